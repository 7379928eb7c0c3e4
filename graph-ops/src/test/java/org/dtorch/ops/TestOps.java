package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/** Operators that exist only for tests: a slow identity and an identity that fails on one device. */
final class TestOps {

    private TestOps() {
    }

    /** Passes its input through after sleeping {@code millis} on every device. */
    record Sleep(long millis) implements OpSpec {
        @Override
        public String name() {
            return "sleep";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                try {
                    Thread.sleep(millis);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted", e);
                }
                return in.getFirst().clone();
            });
        }
    }

    /** Passes its input through, except on {@code device}, where its kernel throws. */
    record FailOn(long device) implements OpSpec {
        @Override
        public String name() {
            return "explode";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                if (deviceId == device) {
                    throw new IllegalStateException("boom on purpose");
                }
                return in.getFirst().clone();
            });
        }
    }
}
