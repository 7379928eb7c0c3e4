package org.dtorch.core.device;

import org.dtorch.core.tensor.TorchTensors;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUmod_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.cuda.global.nvrtc;
import org.bytedeco.cuda.nvrtc._nvrtcProgram;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * One pass of an all-reduce among tensors of one GPU: for each element of a range, combines that element of
 * every input, in input order, and writes the result into every output. One launch reads each input byte once
 * and writes each output byte once, the traffic of a device copy of the inputs, where libtorch's binary kernels
 * ({@code add_out}, then {@code add_} per further input, then a copy per output) move the range about twice
 * as often (docs/gpu.md, "Collectives").
 *
 * <p>The kernel is compiled at first use with NVRTC, per element type, operation, count of tensors and device, for the device's
 * own architecture, and loaded into its primary context. Results are those of libtorch's binary ops in the same
 * order: each step is rounded to the element type (half and bfloat16 combine in float and round to nearest even
 * after every step, as c10 does), {@code MAX}/{@code MIN} propagate NaN as {@code torch.maximum} does, and the
 * average divides the sum by the count in the element type, as {@code div_} by a scalar does.
 *
 * <p>Thread-safe: any thread may launch; compiled kernels are shared.
 */
public final class CudaFusedReduce {
    /** How the elements of the inputs combine. */
    public enum Combine { SUM, PRODUCT, MAX, MIN }

    /** Most inputs (and outputs) of one launch: their pointers travel in the kernel's parameter block. */
    public static final int MAX_TENSORS = 16;
    private static final int THREADS = 256;
    private static final int BLOCKS_PER_SM = 8;

    private record KernelKey(int device, ScalarType dtype, Combine combine, boolean average, int tensors) {
    }

    private record Kernel(CUfunc_st function, int blocks) {
    }

    private static final Map<KernelKey, Kernel> KERNELS = new ConcurrentHashMap<>();

    private CudaFusedReduce() {
    }

    /** True for the element types the kernel handles; for the others use libtorch's binary ops. */
    public static boolean supports(ScalarType type, Combine combine, boolean average) {
        ScalarType dtype = type.intern(); // libtorch's enums come back as copies: compare the interned constant
        boolean floating = dtype == ScalarType.Float || dtype == ScalarType.Double || dtype == ScalarType.Half
            || dtype == ScalarType.BFloat16;
        boolean integral = dtype == ScalarType.Int || dtype == ScalarType.Long;
        return floating || (integral && !average);
    }

    /**
     * Enqueues on {@code stream}: for every element {@code i} in {@code [start, start + count)} of the flattened
     * tensors, {@code outs[k][i] = combine(ins[0][i], ..., ins[n-1][i])} (divided by {@code n} when
     * {@code average}) for every {@code k}. The host does not wait. Inputs and outputs must be contiguous, of one
     * element type that {@link #supports} accepts, of at least {@code start + count} elements, on the stream's
     * device, and readable (writable) by the stream's work when it runs.
     *
     * @throws IllegalArgumentException for tensors that break the above, before anything is enqueued
     * @throws IllegalStateException    if NVRTC or the driver refuses (the message names the call)
     */
    public static void allReduceRange(Tensor[] ins, Tensor[] outs, long start, long count, Combine combine, boolean average,
                                      DeviceStream stream) {
        Objects.requireNonNull(combine, "combine");
        CUstream_st cuStream = CudaStream.unwrap(stream, "stream").stream();
        Device device = stream.device();
        ScalarType dtype = check(ins, outs, start, count, device);
        if (!supports(dtype, combine, average)) {
            throw new IllegalArgumentException("the fused all-reduce does not handle " + dtype + (average ? " averages" : ""));
        }
        if (count == 0) {
            return;
        }
        Kernel kernel = KERNELS.computeIfAbsent(new KernelKey(device.index(), dtype, combine, average, ins.length), CudaFusedReduce::compile);
        long elementSize = ins[0].element_size();
        long vectorElements = 16 / elementSize;
        boolean aligned = true;
        try (BytePointer block = new BytePointer(2L * MAX_TENSORS * Long.BYTES)) {
            block.fill(0);
            for (int k = 0; k < ins.length; k++) {
                long in = TorchTensors.address(ins[k]);
                long out = TorchTensors.address(outs[k]);
                aligned &= (in + start * elementSize) % 16 == 0 && (out + start * elementSize) % 16 == 0;
                block.putLong((long) k * Long.BYTES, in);
                block.putLong((long) (MAX_TENSORS + k) * Long.BYTES, out);
            }
            long units = aligned ? count / vectorElements : 0;
            int blocks = (int) Math.max(1, Math.min(kernel.blocks, (Math.max(units, count - units * vectorElements) + THREADS - 1) / THREADS));
            try (LongPointer from = new LongPointer(1).put(start);
                 LongPointer vectors = new LongPointer(1).put(units);
                 LongPointer total = new LongPointer(1).put(count);
                 PointerPointer<Pointer> args = new PointerPointer<>(block, from, vectors, total)) {
                int previous = Cuda.makeCurrentForDriver(device.index());
                try {
                    int result = cudart.cuLaunchKernel(kernel.function, blocks, 1, 1, THREADS, 1, 1, 0, cuStream, args, null);
                    if (result != cudart.CUDA_SUCCESS) {
                        throw new IllegalStateException("cuLaunchKernel of the fused all-reduce on " + device + " failed: " + Cuda.driverError(result));
                    }
                } finally {
                    Cuda.restoreDevice(previous, device.index());
                }
            }
        }
    }

    private static ScalarType check(Tensor[] ins, Tensor[] outs, long start, long count, Device device) {
        Objects.requireNonNull(ins, "ins");
        Objects.requireNonNull(outs, "outs");
        if (ins.length == 0 || ins.length > MAX_TENSORS || outs.length != ins.length) {
            throw new IllegalArgumentException("the fused all-reduce takes 1 to " + MAX_TENSORS + " inputs and as many outputs, got "
                + ins.length + " and " + outs.length);
        }
        if (start < 0 || count < 0) {
            throw new IllegalArgumentException("range [" + start + ", +" + count + ") is negative");
        }
        ScalarType dtype = ins[0].scalar_type().intern();
        for (int k = 0; k < ins.length * 2; k++) {
            Tensor t = k < ins.length ? ins[k] : outs[k - ins.length];
            String what = (k < ins.length ? "input " : "output ") + (k % ins.length);
            Objects.requireNonNull(t, what);
            if (!t.is_cuda() || deviceIndex(t) != device.index()) {
                throw new IllegalArgumentException(what + " is not on " + device);
            }
            if (t.scalar_type().intern() != dtype || !t.is_contiguous() || t.numel() < start + count) {
                throw new IllegalArgumentException(what + " must be a contiguous " + dtype + " tensor of at least " + (start + count)
                    + " elements, got " + t.scalar_type() + " of " + t.numel() + (t.is_contiguous() ? "" : ", not contiguous"));
            }
        }
        return dtype;
    }

    private static int deviceIndex(Tensor t) {
        try (org.bytedeco.pytorch.Device d = t.device()) {
            return d.index();
        }
    }

    // ---- compiling ----------------------------------------------------------------------------------------

    private static Kernel compile(KernelKey key) {
        int previous = Cuda.makeCurrentForDriver(key.device);
        try {
            int[] major = new int[1];
            int[] minor = new int[1];
            int[] sms = new int[1];
            Cuda.checkRuntime(cudart.cudaDeviceGetAttribute(major, cudart.cudaDevAttrComputeCapabilityMajor, key.device), "compute capability");
            Cuda.checkRuntime(cudart.cudaDeviceGetAttribute(minor, cudart.cudaDevAttrComputeCapabilityMinor, key.device), "compute capability");
            Cuda.checkRuntime(cudart.cudaDeviceGetAttribute(sms, cudart.cudaDevAttrMultiProcessorCount, key.device), "SM count");
            byte[] cubin = nvrtcCompile(source(key), "sm_" + major[0] + minor[0]);
            CUmod_st module = new CUmod_st();
            try (BytePointer image = new BytePointer(cubin)) {
                int result = cudart.cuModuleLoadData(module, image);
                if (result != cudart.CUDA_SUCCESS) {
                    throw new IllegalStateException("cuModuleLoadData of the fused all-reduce failed: " + Cuda.driverError(result));
                }
            }
            CUfunc_st function = new CUfunc_st();
            int result = cudart.cuModuleGetFunction(function, module, "fused_all_reduce");
            if (result != cudart.CUDA_SUCCESS) {
                throw new IllegalStateException("cuModuleGetFunction(fused_all_reduce) failed: " + Cuda.driverError(result));
            }
            // The module stays loaded for the process's life, as libtorch's own kernels do.
            return new Kernel(function, sms[0] * BLOCKS_PER_SM);
        } finally {
            Cuda.restoreDevice(previous, key.device);
        }
    }

    private static byte[] nvrtcCompile(String source, String arch) {
        _nvrtcProgram program = new _nvrtcProgram();
        try (BytePointer text = new BytePointer(source); BytePointer name = new BytePointer("fused_all_reduce.cu")) {
            checkNvrtc(nvrtc.nvrtcCreateProgram(program, text, name, 0, (PointerPointer<?>) null, (PointerPointer<?>) null), "nvrtcCreateProgram");
        }
        try {
            String[] options = {"--gpu-architecture=" + arch, "-default-device", "--std=c++17"};
            try (PointerPointer<BytePointer> opts = new PointerPointer<>(options)) {
                int result = nvrtc.nvrtcCompileProgram(program, options.length, opts);
                if (result != nvrtc.NVRTC_SUCCESS) {
                    throw new IllegalStateException("NVRTC could not compile the fused all-reduce for " + arch + ": "
                        + nvrtc.nvrtcGetErrorString(result).getString() + "\n" + log(program));
                }
            }
            try (SizeTPointer size = new SizeTPointer(1)) {
                checkNvrtc(nvrtc.nvrtcGetCUBINSize(program, size), "nvrtcGetCUBINSize");
                byte[] cubin = new byte[(int) size.get()];
                checkNvrtc(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN");
                return cubin;
            }
        } finally {
            nvrtc.nvrtcDestroyProgram(program);
        }
    }

    private static String log(_nvrtcProgram program) {
        try (SizeTPointer size = new SizeTPointer(1)) {
            if (nvrtc.nvrtcGetProgramLogSize(program, size) != nvrtc.NVRTC_SUCCESS) {
                return "";
            }
            byte[] text = new byte[(int) size.get()];
            nvrtc.nvrtcGetProgramLog(program, text);
            return new String(text, java.nio.charset.StandardCharsets.UTF_8).trim();
        }
    }

    private static void checkNvrtc(int result, String call) {
        if (result != nvrtc.NVRTC_SUCCESS) {
            throw new IllegalStateException(call + " failed: " + nvrtc.nvrtcGetErrorString(result).getString());
        }
    }

    /**
     * The kernel's source for one element type and operation. {@code S} is how an element is stored, {@code A}
     * what one step computes in; {@code load}/{@code store} convert (identity except for half and bfloat16).
     * Elements are moved 16 bytes at a time where every pointer is 16-byte aligned at the range's start
     * ({@code vectors} such units), the rest one at a time. The count of tensors is a constant of the kernel, so
     * that a thread issues the loads of all inputs before it combines them (latency, not bandwidth, bounds a
     * thread that waits for each load in turn). The average multiplies by the reciprocal of the
     * count, computed in {@code A}, as ATen's division by a host scalar does.
     */
    private static String source(KernelKey key) {
        String storage;
        String compute;
        String load;
        String store;
        switch (key.dtype) {
            case Float -> {
                storage = "float";
                compute = "float";
                load = "x";
                store = "a";
            }
            case Double -> {
                storage = "double";
                compute = "double";
                load = "x";
                store = "a";
            }
            case Int -> {
                storage = "int";
                compute = "int";
                load = "x";
                store = "a";
            }
            case Long -> {
                storage = "long long";
                compute = "long long";
                load = "x";
                store = "a";
            }
            case Half -> {
                storage = "unsigned short";
                compute = "float";
                load = "half_to_float(x)";
                store = "float_to_half(a)";
            }
            case BFloat16 -> {
                storage = "unsigned short";
                compute = "float";
                load = "__uint_as_float(((unsigned int) x) << 16)";
                store = "float_to_bf16(a)";
            }
            default -> throw new IllegalArgumentException("no fused all-reduce for " + key.dtype);
        }
        boolean floating = compute.equals("float") || compute.equals("double");
        String step = switch (key.combine) {
            case SUM -> "a + b";
            case PRODUCT -> "a * b";
            case MAX -> floating ? "(a != a) ? a : ((b != b) ? b : (a > b ? a : b))" : "(a > b ? a : b)";
            case MIN -> floating ? "(a != a) ? a : ((b != b) ? b : (a < b ? a : b))" : "(a < b ? a : b)";
        };
        String finish = key.average ? "a = a * ((A) 1 / (A) n);" : "";
        return """
            typedef %1$s S;
            typedef %2$s A;
            #define MAX_TENSORS %7$d
            #define N %8$d
            struct Tensors { const S* in[MAX_TENSORS]; S* out[MAX_TENSORS]; };
            __device__ __forceinline__ float half_to_float(unsigned short h) {
              float f; asm("cvt.f32.f16 %%0, %%1;" : "=f"(f) : "h"(h)); return f;
            }
            __device__ __forceinline__ unsigned short float_to_half(float f) {
              unsigned short h; asm("cvt.rn.f16.f32 %%0, %%1;" : "=h"(h) : "f"(f)); return h;
            }
            __device__ __forceinline__ unsigned short float_to_bf16(float f) {
              unsigned int u = __float_as_uint(f);
              if (f != f) return (unsigned short) 0x7FC0;
              return (unsigned short) ((u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16);
            }
            __device__ __forceinline__ A load_(S x) { return %3$s; }
            __device__ __forceinline__ S store_(A a) { return %4$s; }
            __device__ __forceinline__ S combine_(S x, S y) { A a = load_(x); A b = load_(y); a = %5$s; return store_(a); }
            __device__ __forceinline__ S finish_(S x) { A a = load_(x); const int n = N; %6$s return store_(a); }
            #define VEC (16 / sizeof(S))
            union Vec { uint4 raw; S v[VEC]; };
            extern "C" __global__ void __launch_bounds__(256) fused_all_reduce(Tensors t, long long start, long long vectors, long long count) {
              long long stride = (long long) gridDim.x * blockDim.x;
              long long first = (long long) blockIdx.x * blockDim.x + threadIdx.x;
              for (long long u = first; u < vectors; u += stride) {
                long long at = start + u * VEC;
                Vec in[N];
                #pragma unroll
                for (int k = 0; k < N; k++) in[k].raw = __ldg(reinterpret_cast<const uint4*>(t.in[k] + at));
                Vec acc = in[0];
                #pragma unroll
                for (int k = 1; k < N; k++) {
                  #pragma unroll
                  for (int e = 0; e < VEC; e++) acc.v[e] = combine_(acc.v[e], in[k].v[e]);
                }
                #pragma unroll
                for (int e = 0; e < VEC; e++) acc.v[e] = finish_(acc.v[e]);
                #pragma unroll
                for (int k = 0; k < N; k++) *reinterpret_cast<uint4*>(t.out[k] + at) = acc.raw;
              }
              for (long long i = vectors * VEC + first; i < count; i += stride) {
                long long at = start + i;
                S acc = t.in[0][at];
                #pragma unroll
                for (int k = 1; k < N; k++) acc = combine_(acc, t.in[k][at]);
                acc = finish_(acc);
                #pragma unroll
                for (int k = 0; k < N; k++) t.out[k][at] = acc;
              }
            }
            """.formatted(storage, compute, load, store, step, finish, MAX_TENSORS, key.tensors);
    }
}
