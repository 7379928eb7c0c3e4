package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.runtime.process.OpSpecCodec;
import org.dtorch.core.runtime.process.OpSpecCodecProvider;
import org.dtorch.core.runtime.process.SpecReader;
import org.dtorch.core.runtime.process.SpecWriter;

/** Codecs of the test-only operators, so that they run in worker processes too (test class path only). */
public final class TestOpsCodecs implements OpSpecCodecProvider {

    @Override
    public List<OpSpecCodec<?>> codecs() {
        return List.of(new OpSpecCodec<TestOps.RequireDevice>() {
            @Override
            public Class<TestOps.RequireDevice> specClass() {
                return TestOps.RequireDevice.class;
            }

            @Override
            public String tag() {
                return "test.require-device";
            }

            @Override
            public void write(TestOps.RequireDevice spec, SpecWriter out) {
                out.wire().putString(spec.where());
            }

            @Override
            public TestOps.RequireDevice read(SpecReader in) {
                return new TestOps.RequireDevice(in.wire().getString("required device"));
            }
        }, new OpSpecCodec<TestOps.Sleep>() {
            @Override
            public Class<TestOps.Sleep> specClass() {
                return TestOps.Sleep.class;
            }

            @Override
            public String tag() {
                return "test.sleep";
            }

            @Override
            public void write(TestOps.Sleep spec, SpecWriter out) {
                out.wire().putLong(spec.millis());
            }

            @Override
            public TestOps.Sleep read(SpecReader in) {
                return new TestOps.Sleep(in.wire().getLong("sleep millis"));
            }
        }, new OpSpecCodec<TestOps.Gate>() {
            @Override
            public Class<TestOps.Gate> specClass() {
                return TestOps.Gate.class;
            }

            @Override
            public String tag() {
                return "test.gate";
            }

            @Override
            public void write(TestOps.Gate spec, SpecWriter out) {
                out.wire().putString(spec.path()).putLong(spec.timeoutMillis());
            }

            @Override
            public TestOps.Gate read(SpecReader in) {
                return new TestOps.Gate(in.wire().getString("gate path"), in.wire().getLong("gate timeout"));
            }
        }, new OpSpecCodec<TestOps.FailOn>() {
            @Override
            public Class<TestOps.FailOn> specClass() {
                return TestOps.FailOn.class;
            }

            @Override
            public String tag() {
                return "test.fail_on";
            }

            @Override
            public void write(TestOps.FailOn spec, SpecWriter out) {
                out.wire().putLong(spec.device());
            }

            @Override
            public TestOps.FailOn read(SpecReader in) {
                return new TestOps.FailOn(in.wire().getLong("fail device"));
            }
        }, new OpSpecCodec<TestOps.StallOn>() {
            @Override
            public Class<TestOps.StallOn> specClass() {
                return TestOps.StallOn.class;
            }

            @Override
            public String tag() {
                return "test.stall_on";
            }

            @Override
            public void write(TestOps.StallOn spec, SpecWriter out) {
                out.wire().putLong(spec.device()).putLong(spec.millis()).putBoolean(spec.ignoreInterrupts());
            }

            @Override
            public TestOps.StallOn read(SpecReader in) {
                return new TestOps.StallOn(in.wire().getLong("stall device"), in.wire().getLong("stall millis"),
                    in.wire().getBoolean("stall ignores interrupts"));
            }
        }, new OpSpecCodec<TestOps.HeldInference>() {
            @Override
            public Class<TestOps.HeldInference> specClass() {
                return TestOps.HeldInference.class;
            }

            @Override
            public String tag() {
                return "test.held";
            }

            @Override
            public void write(TestOps.HeldInference spec, SpecWriter out) {
                throw new UnsupportedOperationException("held: its latches stay in the test's JVM; the controller refuses it");
            }

            @Override
            public TestOps.HeldInference read(SpecReader in) {
                throw new UnsupportedOperationException("held: never sent to a worker");
            }
        });
    }
}
