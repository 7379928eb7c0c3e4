package org.dtorch.ops;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * Operators that exist only for tests: a slow identity, an identity held until the test opens a gate, and an
 * identity that fails on one device.
 */
final class TestOps {

    private TestOps() {
    }

    /**
     * A runtime of two devices, threads or worker processes, whose client waits are bounded by {@code timeout} and
     * whose close cancels queued work after 100 ms: for tests of failures and deadlines.
     */
    static DTorch twoDevices(boolean processes, Duration timeout) {
        return DTorch.init(DTorchOptions.builder().devices(2).perDevicePerProcess(processes).timeout(timeout)
            .shutdownTimeout(Duration.ofMillis(100)).build());
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

    /**
     * Passes its input through once the file {@code path} exists (the test creates it), or fails after
     * {@code timeoutMillis}. A file rather than a latch, so that it also holds worker processes.
     */
    record Gate(String path, long timeoutMillis) implements OpSpec {
        @Override
        public String name() {
            return "gate";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                long deadline = System.nanoTime() + timeoutMillis * 1_000_000;
                while (!Files.exists(Path.of(path))) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("gate on cpu:" + deviceId + ": " + path + " was not created within " + timeoutMillis + " ms");
                    }
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while waiting for " + path, e);
                    }
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

    /**
     * Passes its input through if every device holds it on the physical device {@code where} ({@code cuda:0}, say);
     * its kernel throws otherwise. It shows where a worker's shards live.
     */
    record RequireDevice(String where) implements OpSpec {
        @Override
        public String name() {
            return "require_device";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        /** It also checks shards on a CPU mesh of a runtime on CUDA (host memory of the GPU workers). */
        @Override
        public boolean runsOnHostMeshes(Operator op) {
            return true;
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                String actual = in.getFirst().is_cuda() ? org.dtorch.core.tensor.TorchTensors.device(in.getFirst()).toString() : "cpu";
                if (!actual.equals(where)) {
                    throw new IllegalStateException("device " + deviceId + " holds its shard on " + actual + ", expected " + where);
                }
                return in.getFirst().clone();
            });
        }
    }

    /** Passes its input through if every device's shard is channels-last (and not also contiguous); its kernel throws otherwise. */
    record RequireChannelsLast() implements OpSpec {
        @Override
        public String name() {
            return "require_channels_last";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                Tensor t = in.getFirst();
                if (!t.is_contiguous(torch.MemoryFormat.ChannelsLast) || t.is_contiguous()) {
                    throw new IllegalStateException("device " + deviceId + "'s shard " + Arrays.toString(t.sizes().vec().get())
                        + " is not channels-last");
                }
                return t.clone();
            });
        }
    }

    /**
     * Passes its input through; on {@code device} only, first holds it for {@code millis}: asleep, or, with
     * {@code ignoreInterrupts}, parked in a loop that ignores interrupts (a kernel stuck in native code).
     */
    record StallOn(long device, long millis, boolean ignoreInterrupts) implements OpSpec {
        @Override
        public String name() {
            return "stall";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                if (deviceId == device) {
                    stall();
                }
                return in.getFirst().clone();
            });
        }

        private void stall() {
            long end = System.nanoTime() + millis * 1_000_000L;
            if (!ignoreInterrupts) {
                try {
                    Thread.sleep(millis);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted", e);
                }
                return;
            }
            boolean interrupted = false;
            for (long left = end - System.nanoTime(); left > 0; left = end - System.nanoTime()) {
                java.util.concurrent.locks.LockSupport.parkNanos(left);
                interrupted |= Thread.interrupted();
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Passes its input through; on {@code device} only, first holds it, ignoring interrupts (a kernel stuck in native
     * code), until {@code release} opens or {@code timeoutMillis} pass. Thread mode only: the latch does not cross
     * processes.
     */
    record HoldOn(long device, java.util.concurrent.CountDownLatch release, long timeoutMillis) implements OpSpec {
        @Override
        public String name() {
            return "hold";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> {
                if (deviceId == device) {
                    hold();
                }
                return in.getFirst().clone();
            });
        }

        private void hold() {
            long end = System.nanoTime() + timeoutMillis * 1_000_000L;
            boolean interrupted = false;
            for (long left = end - System.nanoTime(); release.getCount() > 0 && left > 0; left = end - System.nanoTime()) {
                try {
                    release.await(left, java.util.concurrent.TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Like {@code get_tensor}, but its kernel's {@code failed} throws without completing the promise (a report
     * that breaks). Thread mode only: its promise does not cross processes.
     */
    record BrokenReport(org.dtorch.core.communication.promise.TensorPromise promise) implements OpSpec {
        @Override
        public String name() {
            return "broken_report";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of();
        }

        @Override
        public void abandon(Throwable cause) {
            org.dtorch.core.communication.promise.TensorPromises.abandon(promise, cause);
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new DeviceKernel() {
                @Override
                public List<org.bytedeco.pytorch.Tensor> run(org.dtorch.core.kernel.KernelContext ctx, List<org.bytedeco.pytorch.Tensor> inputs) {
                    promise.setValue(inputs.getFirst());
                    return List.of();
                }

                @Override
                public void failed(org.dtorch.core.kernel.KernelContext ctx, Throwable cause) {
                    throw new IllegalStateException("the report broke on purpose");
                }
            };
        }
    }

    /**
     * An identity whose inference, which runs in the client's thread before the operator reaches the controller, counts
     * down {@code entered} and then waits for {@code release}: a test holds the client between the runtime's open check
     * and the controller. The operator is meant to be refused there; its codec carries no latch to a worker.
     */
    record HeldInference(CountDownLatch entered, CountDownLatch release, Duration timeout) implements OpSpec {
        @Override
        public String name() {
            return "held";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            entered.countDown();
            try {
                if (!release.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("held: not released within " + timeout);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("held: interrupted", e);
            }
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new LocalKernel(in -> in.getFirst().clone());
        }
    }
}
