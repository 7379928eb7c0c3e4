package org.dtorch.api;

import java.lang.ref.Cleaner;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.NativeMemoryBudget;
import org.dtorch.ops.BinarySpec;
import org.dtorch.ops.CastSpec;
import org.dtorch.ops.CompareCalls;
import org.dtorch.ops.CopySpec;
import org.dtorch.ops.LocalShards;
import org.dtorch.ops.MaskIndexSpec;
import org.dtorch.ops.ProductCalls;
import org.dtorch.ops.RedistributeSpec;
import org.dtorch.ops.ReduceSpec;
import org.dtorch.ops.ScalarSpec;
import org.dtorch.ops.Shapes;
import org.dtorch.ops.UnarySpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.ViewCalls;
import org.dtorch.ops.aten.AtenCall;

/**
 * A global tensor on a device mesh: shape, dtype, mesh and placements are known at once; its values
 * exist on the workers. Every operator method returns a new {@code DTensor} immediately, with its
 * metadata inferred; an input combination the operator cannot take throws here, naming the operator and
 * the placements. Values come back through {@link #toTorchAsync()} or {@link #toTorch()}.
 *
 * <p>Dimensions are taken as in torch: a negative one counts from the end, one out of range is an
 * {@link IndexOutOfBoundsException} naming the valid range. A null argument is a
 * {@link NullPointerException} naming it. Integral scalars ({@code long} overloads) stay exact, and the result
 * dtype of a tensor and a scalar follows torch's promotion.
 *
 * <p>Memory: {@link #close()} releases the tensor on the workers (after the operators already queued
 * that use it); a handle the program forgets is released when the garbage collector finds it. Every
 * handle charges the bytes its devices hold to the {@link NativeMemoryBudget}, so that forgotten handles
 * make the runtime request a collection before their tensors fill memory.
 *
 * <p>Not thread-safe: the client thread that owns the runtime uses its tensors; {@link #close()} may be
 * called from any thread.
 */
public final class DTensor implements AutoCloseable {
    private final DTorch runtime;
    private final Operand operand;
    private final Cleaner.Cleanable release;
    private volatile boolean closed;
    /** The memory this tensor shares with its views ({@link Storage}); set once more where the tensor is a derived view. */
    private Storage storage;
    /** requires_grad, the recorded operator that made this tensor, and the accumulated gradient. */
    private final AutogradState autograd = new AutogradState();

    DTensor(DTorch runtime, Operand operand) {
        this(runtime, operand, Storage.own());
    }

    DTensor(DTorch runtime, Operand operand, Storage storage) {
        this.runtime = runtime;
        this.operand = operand;
        this.storage = storage;
        this.release = NativeMemoryBudget.of(operand.meta().sharding().mesh().kind())
            .register(this, deviceBytes(operand.meta()), new Release(runtime.graph(), operand));
    }

    Storage storage() {
        return storage;
    }

    void shareStorage(Storage other) {
        this.storage = other;
    }

    /** The bytes all devices of the mesh hold together: the global bytes, times the copies non-sharded mesh dimensions make. */
    static long deviceBytes(TensorMeta meta) {
        long bytes = meta.numel() * elementSize(meta.dtype());
        int[] meshShape = meta.sharding().mesh().shape();
        for (int d = 0; d < meshShape.length; d++) {
            if (!(meta.placement(d) instanceof Shard)) {
                bytes *= meshShape[d];
            }
        }
        return bytes;
    }

    /**
     * The bytes of one element. A switch, as this runs for every handle; {@code dtype} is canonical, as
     * {@link TensorMeta}'s are (a fresh JavaCPP enum value matches no case and takes the native call).
     */
    static long elementSize(ScalarType dtype) {
        return switch (dtype) {
            case Double, Long, ComplexFloat -> 8;
            case Float, Int -> 4;
            case Half, BFloat16, Short -> 2;
            case Byte, Char, Bool -> 1;
            case ComplexDouble -> 16;
            default -> org.bytedeco.pytorch.global.torch.elementSize(dtype);
        };
    }

    /** Releases the operand; holds no reference to the handle, so the handle can be collected. */
    private record Release(GraphConstructor graph, Operand operand) implements Runnable {
        @Override
        public void run() {
            graph.release(operand);
        }
    }

    // ---- metadata -------------------------------------------------------------------------------

    /** The global shape. */
    public long[] shape() {
        return operand.meta().shape();
    }

    /** The size of dimension {@code d} (negative counts from the end). */
    public long size(int d) {
        TensorMeta meta = operand.meta();
        return meta.size(Shapes.normalizeDim("size", d, meta.ndim()));
    }

    /** The number of dimensions. */
    public int ndim() {
        return operand.meta().ndim();
    }

    /** The element type. */
    public ScalarType dtype() {
        return operand.meta().dtype();
    }

    /** The device mesh. */
    public DeviceMesh mesh() {
        return operand.meta().sharding().mesh();
    }

    /** The placements, one per mesh dimension. */
    public List<Placement> placements() {
        return operand.meta().placements();
    }

    /** Shape, dtype and sharding together. */
    public TensorMeta meta() {
        return operand.meta();
    }

    /** The graph operand behind this handle. */
    public Operand operand() {
        ensureOpen();
        return operand;
    }

    /** The runtime this tensor belongs to. */
    public DTorch runtime() {
        return runtime;
    }

    // ---- element-wise ---------------------------------------------------------------------------

    /** {@code this + other}, broadcasting. */
    public DTensor add(DTensor other) {
        return runtime.apply(BinarySpec.ADD, this, nonNull(other, "add", "other"));
    }

    /** {@code this + value}. */
    public DTensor add(double value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.ADD, value), this);
    }

    /** {@code this + value}, an integral scalar (keeps integral dtypes). */
    public DTensor add(long value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.ADD, value), this);
    }

    /** {@code this - other}, broadcasting. */
    public DTensor sub(DTensor other) {
        return runtime.apply(BinarySpec.SUB, this, nonNull(other, "sub", "other"));
    }

    /** {@code this - value}. */
    public DTensor sub(double value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.SUB, value), this);
    }

    /** {@code this - value}, an integral scalar. */
    public DTensor sub(long value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.SUB, value), this);
    }

    /** {@code value - this}. */
    public DTensor rsub(double value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.RSUB, value), this);
    }

    /** {@code value - this}, an integral scalar. */
    public DTensor rsub(long value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.RSUB, value), this);
    }

    /** {@code this * other}, broadcasting. */
    public DTensor mul(DTensor other) {
        return runtime.apply(BinarySpec.MUL, this, nonNull(other, "mul", "other"));
    }

    /** {@code this * value}. */
    public DTensor mul(double value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.MUL, value), this);
    }

    /** {@code this * value}, an integral scalar. */
    public DTensor mul(long value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.MUL, value), this);
    }

    /** {@code this / other}, broadcasting; true division. */
    public DTensor div(DTensor other) {
        return runtime.apply(BinarySpec.DIV, this, nonNull(other, "div", "other"));
    }

    /** {@code this / value}; true division. */
    public DTensor div(double value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.DIV, value), this);
    }

    /** {@code value / this}; true division. */
    public DTensor rdiv(double value) {
        return runtime.apply(new ScalarSpec(ScalarSpec.Kind.RDIV, value), this);
    }

    /** {@code -this}. */
    public DTensor neg() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.NEG), this);
    }

    /** {@code max(this, 0)}. */
    public DTensor relu() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.RELU), this);
    }

    /** {@code this * sigmoid(this)}. */
    public DTensor silu() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.SILU), this);
    }

    /** The Gaussian error linear unit (exact form). */
    public DTensor gelu() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.GELU), this);
    }

    /** {@code e^this}. */
    public DTensor exp() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.EXP), this);
    }

    /** The hyperbolic tangent. */
    public DTensor tanh() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.TANH), this);
    }

    /** The logistic function. */
    public DTensor sigmoid() {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.SIGMOID), this);
    }

    // ---- comparison, logical and bitwise (element-wise, through the generic operator: CompareCalls) ---------------

    /** {@code this > other}, broadcasting; a bool tensor. */
    public DTensor gt(DTensor other) {
        return elementwise(CompareCalls.tensors("gt"), nonNull(other, "gt", "other"));
    }

    /** {@code this > value}; an integral tensor is compared in floating point, as torch does. */
    public DTensor gt(double value) {
        return elementwise(CompareCalls.scalar("gt", value));
    }

    /** {@code this > value}, exactly for integral tensors. */
    public DTensor gt(long value) {
        return elementwise(CompareCalls.scalar("gt", value));
    }

    /** {@code this < other}, broadcasting; a bool tensor. */
    public DTensor lt(DTensor other) {
        return elementwise(CompareCalls.tensors("lt"), nonNull(other, "lt", "other"));
    }

    /** {@code this < value}. */
    public DTensor lt(double value) {
        return elementwise(CompareCalls.scalar("lt", value));
    }

    /** {@code this < value}, exactly for integral tensors. */
    public DTensor lt(long value) {
        return elementwise(CompareCalls.scalar("lt", value));
    }

    /** {@code this >= other}, broadcasting; a bool tensor. */
    public DTensor ge(DTensor other) {
        return elementwise(CompareCalls.tensors("ge"), nonNull(other, "ge", "other"));
    }

    /** {@code this >= value}. */
    public DTensor ge(double value) {
        return elementwise(CompareCalls.scalar("ge", value));
    }

    /** {@code this >= value}, exactly for integral tensors. */
    public DTensor ge(long value) {
        return elementwise(CompareCalls.scalar("ge", value));
    }

    /** {@code this <= other}, broadcasting; a bool tensor. */
    public DTensor le(DTensor other) {
        return elementwise(CompareCalls.tensors("le"), nonNull(other, "le", "other"));
    }

    /** {@code this <= value}. */
    public DTensor le(double value) {
        return elementwise(CompareCalls.scalar("le", value));
    }

    /** {@code this <= value}, exactly for integral tensors. */
    public DTensor le(long value) {
        return elementwise(CompareCalls.scalar("le", value));
    }

    /** {@code this == other} element by element, broadcasting; a bool tensor. */
    public DTensor eq(DTensor other) {
        return elementwise(CompareCalls.tensors("eq"), nonNull(other, "eq", "other"));
    }

    /** {@code this == value} element by element. */
    public DTensor eq(double value) {
        return elementwise(CompareCalls.scalar("eq", value));
    }

    /** {@code this == value} element by element, exactly for integral tensors. */
    public DTensor eq(long value) {
        return elementwise(CompareCalls.scalar("eq", value));
    }

    /** {@code this != other} element by element, broadcasting; a bool tensor. */
    public DTensor ne(DTensor other) {
        return elementwise(CompareCalls.tensors("ne"), nonNull(other, "ne", "other"));
    }

    /** {@code this != value} element by element. */
    public DTensor ne(double value) {
        return elementwise(CompareCalls.scalar("ne", value));
    }

    /** {@code this != value} element by element, exactly for integral tensors. */
    public DTensor ne(long value) {
        return elementwise(CompareCalls.scalar("ne", value));
    }

    /** Element-wise logical and (non-zero is true), broadcasting; a bool tensor. */
    public DTensor logicalAnd(DTensor other) {
        return elementwise(CompareCalls.tensors("logical_and"), nonNull(other, "logicalAnd", "other"));
    }

    /** Element-wise logical or, broadcasting; a bool tensor. */
    public DTensor logicalOr(DTensor other) {
        return elementwise(CompareCalls.tensors("logical_or"), nonNull(other, "logicalOr", "other"));
    }

    /** Element-wise logical exclusive or, broadcasting; a bool tensor. */
    public DTensor logicalXor(DTensor other) {
        return elementwise(CompareCalls.tensors("logical_xor"), nonNull(other, "logicalXor", "other"));
    }

    /** Element-wise logical not (zero is true); a bool tensor. */
    public DTensor logicalNot() {
        return elementwise(CompareCalls.unary("logical_not"));
    }

    /** Bitwise and of integral or bool tensors, broadcasting (bool with bool stays bool). */
    public DTensor bitwiseAnd(DTensor other) {
        return elementwise(CompareCalls.tensors("bitwise_and"), nonNull(other, "bitwiseAnd", "other"));
    }

    /** Bitwise and with an exact integer. */
    public DTensor bitwiseAnd(long value) {
        return elementwise(CompareCalls.scalar("bitwise_and", value));
    }

    /** Bitwise or of integral or bool tensors, broadcasting. */
    public DTensor bitwiseOr(DTensor other) {
        return elementwise(CompareCalls.tensors("bitwise_or"), nonNull(other, "bitwiseOr", "other"));
    }

    /** Bitwise or with an exact integer. */
    public DTensor bitwiseOr(long value) {
        return elementwise(CompareCalls.scalar("bitwise_or", value));
    }

    /** Bitwise exclusive or of integral or bool tensors, broadcasting. */
    public DTensor bitwiseXor(DTensor other) {
        return elementwise(CompareCalls.tensors("bitwise_xor"), nonNull(other, "bitwiseXor", "other"));
    }

    /** Bitwise exclusive or with an exact integer. */
    public DTensor bitwiseXor(long value) {
        return elementwise(CompareCalls.scalar("bitwise_xor", value));
    }

    /** Bitwise not of an integral tensor; logical not of a bool one. */
    public DTensor bitwiseNot() {
        return elementwise(CompareCalls.unary("bitwise_not"));
    }

    /** This tensor with {@code value} where {@code mask} (bool, broadcast to this shape) is true; this dtype. */
    public DTensor maskedFill(DTensor mask, double value) {
        return elementwise(AtenCall.of("masked_fill", "T,T,f", null, null, value), nonNull(mask, "maskedFill", "mask"));
    }

    /** This tensor with the exact integer {@code value} where {@code mask} is true; this dtype. */
    public DTensor maskedFill(DTensor mask, long value) {
        return elementwise(AtenCall.of("masked_fill", "T,T,i", null, null, value), nonNull(mask, "maskedFill", "mask"));
    }

    /**
     * {@code this[mask]} for a bool {@code mask} of this tensor's leading dimensions: the selected elements (or rows,
     * for a mask of fewer dimensions) along one new first dimension, as torch's boolean indexing. The result's size
     * depends on the values, so this blocks to read the mask's number of true elements first (a synchronization
     * point, as the same indexing of a CUDA tensor in torch is) up to the runtime's timeout. Where no dimension the mask
     * covers is sharded, every device selects from its own shard and the other dimensions keep their shards; otherwise
     * the tensor is replicated first, with a warning once ({@link MaskIndexSpec}).
     */
    public DTensor indexByMask(DTensor mask) {
        return MaskIndexSpec.index(this, nonNull(mask, "indexByMask", "mask"));
    }

    private DTensor elementwise(AtenCall call, DTensor... others) {
        DTensor[] inputs = new DTensor[others.length + 1];
        inputs[0] = this;
        System.arraycopy(others, 0, inputs, 1, others.length);
        return runtime.aten(call, inputs).getFirst();
    }

    // ---- linear algebra and reductions ------------------------------------------------------------

    /**
     * The matrix product {@code this @ other}, as {@code torch.matmul} (1-D operands, broadcast batch dimensions), through
     * the generic operator ({@link DTorch#aten}): inputs whose placements no tensor-parallel rule takes as they are
     * are redistributed the cheapest way first.
     */
    public DTensor matmul(DTensor other) {
        return runtime.aten(ProductCalls.MATMUL, this, nonNull(other, "matmul", "other")).getFirst();
    }

    /** The sum over {@code dims} (all if none), dropping them. */
    public DTensor sum(int... dims) {
        return sum(dims, false);
    }

    /** The sum over {@code dims} (all if empty). */
    public DTensor sum(int[] dims, boolean keepdim) {
        return runtime.apply(new ReduceSpec(ReduceSpec.Kind.SUM, dims, keepdim), this);
    }

    /** The mean over {@code dims} (all if none), dropping them; floating-point tensors only. */
    public DTensor mean(int... dims) {
        return mean(dims, false);
    }

    /** The mean over {@code dims} (all if empty). */
    public DTensor mean(int[] dims, boolean keepdim) {
        return runtime.apply(new ReduceSpec(ReduceSpec.Kind.MEAN, dims, keepdim), this);
    }

    /** The maximum over {@code dims} (all if none), dropping them (values only, as {@code amax}). */
    public DTensor max(int... dims) {
        return max(dims, false);
    }

    /** The maximum over {@code dims} (all if empty). */
    public DTensor max(int[] dims, boolean keepdim) {
        return runtime.apply(new ReduceSpec(ReduceSpec.Kind.MAX, dims, keepdim), this);
    }

    /**
     * The softmax over {@code dim} (negative counts from the end): {@code aten::softmax} through the generic path, which
     * gathers {@code dim} first where it is sharded and keeps shards elsewhere.
     */
    public DTensor softmax(int dim) {
        return runtime.aten(AtenCall.of("softmax", "T,i", null, (long) dim), this).getFirst();
    }

    // ---- shape ------------------------------------------------------------------------------------

    /** Swaps dimensions {@code a} and {@code b}. */
    public DTensor transpose(int a, int b) {
        return runtime.aten(ViewCalls.transpose(ndim(), a, b), this).getFirst();
    }

    /** Reorders the dimensions: the result's dimension i is this tensor's {@code dims[i]}. */
    public DTensor permute(int... dims) {
        return runtime.aten(ViewCalls.permute(ndim(), dims), this).getFirst();
    }

    /** The same elements in another shape (one dimension may be -1). */
    public DTensor reshape(long... shape) {
        return runtime.aten(ViewCalls.reshape(shape, false), this).getFirst();
    }

    /** As {@link #reshape}: the same elements in another shape, a view where possible. */
    public DTensor view(long... shape) {
        return runtime.aten(ViewCalls.reshape(shape, true), this).getFirst();
    }

    /** {@code length} elements of {@code dim} from {@code start} (a negative dim or start counts from the end). */
    public DTensor narrow(int dim, long start, long length) {
        return runtime.aten(ViewCalls.narrow(shape(), dim, start, length), this).getFirst();
    }

    /** Converted to {@code dtype}. */
    public DTensor to(ScalarType dtype) {
        return runtime.apply(new CastSpec(dtype), this);
    }

    // ---- distribution -----------------------------------------------------------------------------

    /**
     * Moved to {@code placements} on {@code mesh} (possibly another mesh), with the collectives that takes; through the
     * channel of a declared edge from this tensor's mesh to {@code mesh} ({@link DTorch#channel}) if there is one.
     */
    public DTensor redistribute(DeviceMesh mesh, Placement... placements) {
        Sharding target = new Sharding(mesh, DTorch.placementsFor("redistribute", mesh, placements));
        ensureOpen();
        ChannelEdge edge = runtime.channelFor(mesh(), mesh);
        RedistributeSpec spec = new RedistributeSpec(target, edge == null ? null : edge.options());
        boolean identity = edge == null && spec.plan(meta()).isIdentity();
        if (identity && sameLocalTensors(target)) {
            // Nothing moves and every device's tensor stays what it is: a handle of this tensor's memory under the new
            // placements, as in PyTorch DTensor, with no operator for the devices to run.
            return runtime.alias(spec, this);
        }
        DTensor moved = runtime.apply(spec, this);
        if (edge != null) {
            edge.countTransfer();
        }
        if (identity) {
            moved.shareStorage(storage); // nothing moves: the result is this tensor's memory, as in PyTorch DTensor
        }
        return moved;
    }

    /**
     * True when {@code target} is on this tensor's mesh and differs from its placements only on mesh dimensions of one
     * device, where no placement splits or sums anything: every device's local tensor is the same under both.
     */
    private boolean sameLocalTensors(Sharding target) {
        TensorMeta meta = operand.meta();
        DeviceMesh mesh = meta.sharding().mesh();
        if (!mesh.equals(target.mesh())) {
            return false;
        }
        for (int i = 0; i < mesh.ndim(); i++) {
            if (mesh.size(i) != 1 && !meta.placement(i).equals(target.placement(i))) {
                return false;
            }
        }
        return true;
    }

    /** Moved to {@code placements} on the same mesh. */
    public DTensor redistribute(Placement... placements) {
        return redistribute(mesh(), placements);
    }

    /** Writes {@code source} into this tensor (redistributing and converting as needed); returns this tensor. */
    public DTensor copy_(DTensor source) {
        nonNull(source, "copy_", "source");
        if (!java.util.Arrays.equals(shape(), source.shape())) {
            // torch's copy_ broadcasts the source to the destination's shape (expand refuses one that does not broadcast).
            List<Long> to = java.util.Arrays.stream(shape()).boxed().toList();
            try (DTensor expanded = runtime.aten(AtenCall.of("expand", "T,[i]", null, to), source).getFirst()) {
                runtime.write(CopySpec.INSTANCE, this, expanded);
            }
            return this;
        }
        runtime.write(CopySpec.INSTANCE, this, source);
        return this;
    }

    // ---- in place ----------------------------------------------------------------------------------

    /**
     * {@code this += other} in place, broadcasting {@code other}: each device adds into its own shard, so this tensor keeps
     * its placements and {@code other} is moved to them where needed (on partial sums, {@code other} becomes partial).
     * Returns this tensor. Views of it see the change, as torch's do.
     */
    public DTensor add_(DTensor other) {
        return inPlace(AtenCall.of("add_", "T,T", null, null), nonNull(other, "add_", "other"));
    }

    /** {@code this += value} in place. */
    public DTensor add_(double value) {
        return inPlace(AtenCall.of("add_", "T,f", null, value));
    }

    /** {@code this += value} in place, an exact integer. */
    public DTensor add_(long value) {
        return inPlace(AtenCall.of("add_", "T,i", null, value));
    }

    /** {@code this -= other} in place, broadcasting. */
    public DTensor sub_(DTensor other) {
        return inPlace(AtenCall.of("sub_", "T,T", null, null), nonNull(other, "sub_", "other"));
    }

    /** {@code this -= value} in place. */
    public DTensor sub_(double value) {
        return inPlace(AtenCall.of("sub_", "T,f", null, value));
    }

    /** {@code this *= other} in place, broadcasting. */
    public DTensor mul_(DTensor other) {
        return inPlace(AtenCall.of("mul_", "T,T", null, null), nonNull(other, "mul_", "other"));
    }

    /** {@code this *= value} in place. */
    public DTensor mul_(double value) {
        return inPlace(AtenCall.of("mul_", "T,f", null, value));
    }

    /** {@code this /= other} in place, broadcasting (true division: a floating-point tensor). */
    public DTensor div_(DTensor other) {
        return inPlace(AtenCall.of("div_", "T,T", null, null), nonNull(other, "div_", "other"));
    }

    /** {@code this /= value} in place. */
    public DTensor div_(double value) {
        return inPlace(AtenCall.of("div_", "T,f", null, value));
    }

    /** {@code value} where {@code mask} (bool, broadcasting) is true, in place. */
    public DTensor maskedFill_(DTensor mask, double value) {
        return inPlace(AtenCall.of("masked_fill_", "T,T,f", null, null, value), nonNull(mask, "masked_fill_", "mask"));
    }

    /** Every element {@code value}, in place. */
    public DTensor fill_(double value) {
        return inPlace(AtenCall.of("fill_", "T,f", null, value));
    }

    /** Every element 0, in place. */
    public DTensor zero_() {
        return inPlace(AtenCall.of("zero_", "T", (Object) null));
    }

    private DTensor inPlace(AtenCall call, DTensor... others) {
        DTensor[] inputs = new DTensor[others.length + 1];
        inputs[0] = this;
        System.arraycopy(others, 0, inputs, 1, others.length);
        runtime.aten(call, inputs);
        return this;
    }

    /**
     * {@code this[index] = value} in place ({@code t[2:5] = v}, {@code t[..., i, :] = v}): each device writes the part of
     * the indexed box in its own shard, so writing one row into a sharded tensor touches one row's bytes. {@code value}
     * broadcasts to the box's shape. Returns this tensor.
     */
    public DTensor setItem(DTensor value, Index... index) {
        long[] withoutNewAxes = Index.withoutNewAxes(ndim(), nonNull(value, "setitem", "value").shape(), index);
        if (withoutNewAxes != null) {
            try (DTensor v = value.reshape(withoutNewAxes)) {
                runtime.setRegion(this, Index.region(shape(), index), v);
            }
            return this;
        }
        runtime.setRegion(this, Index.region(shape(), index), value);
        return this;
    }

    /** {@code this[index] = value} in place, for a number. */
    public DTensor setItem(double value, Index... index) {
        runtime.setRegion(this, Index.region(shape(), index), value);
        return this;
    }

    /** {@code this[index] = value} in place, for an exact integer. */
    public DTensor setItem(long value, Index... index) {
        runtime.setRegion(this, Index.region(shape(), index), value);
        return this;
    }

    /**
     * {@code this[index]}: a view made of {@code select}, {@code slice} and {@code unsqueeze}; it shares this tensor's memory
     * where the view keeps every shard where it is, and follows it otherwise (a write into either shows in the other).
     */
    public DTensor getItem(Index... index) {
        List<Index> items = Index.expand(ndim(), index);
        DTensor view = this;
        int d = 0;
        // The intermediate views stay open: a view derived from one of them writes back into it.
        {
            for (Index item : items) {
                DTensor next = switch (item) {
                    case Index.NewAxis n -> runtime.aten(AtenCall.of("unsqueeze", "T,i", null, (long) d++), view).getFirst();
                    case Index.At at -> {
                        Region r = Index.region(new long[] {view.size(d)}, at);
                        yield runtime.aten(AtenCall.of("select", "T,i,i", null, (long) d, r.starts()[0]), view).getFirst();
                    }
                    case Index.Slice sl -> {
                        Region r = Index.region(new long[] {view.size(d)}, sl);
                        long start = r.starts()[0];
                        long end = r.counts()[0] == 0 ? start : start + (r.counts()[0] - 1) * sl.step() + 1;
                        d++;
                        if (start == 0 && end == view.size(d - 1) && sl.step() == 1) {
                            yield view;
                        }
                        yield runtime.aten(AtenCall.of("slice", "T,i,i,i,i", null, (long) (d - 1), start, end, sl.step()), view).getFirst();
                    }
                    case Index.Ellipsis e -> throw new IllegalStateException("expanded away");
                };
                view = next;
            }
            return view == this ? runtime.aten(AtenCall.of("alias", "T", (Object) null), this).getFirst() : view;
        }
    }

    // ---- autograd ({@link GradTape}) ---------------------------------------------------------------------------

    /** True when operators that take this tensor are recorded for backward (while grad mode is on). */
    public boolean requiresGrad() {
        return autograd.requiresGrad;
    }

    /**
     * Makes this leaf require grad (or not); returns this tensor.
     *
     * @throws IllegalArgumentException for a dtype that is not floating point or complex
     * @throws IllegalStateException    to switch it off on a tensor a recorded operator made
     */
    public DTensor requiresGrad_(boolean requiresGrad) {
        runtime.autograd().setRequiresGrad(this, requiresGrad);
        return this;
    }

    /** The gradient backward passes accumulated into this tensor (its mesh and placements, {@code P} as {@code R}), or null. */
    public DTensor grad() {
        return autograd.grad;
    }

    /** Replaces the gradient ({@code null} clears it); its shape and dtype must be this tensor's. */
    public void setGrad(DTensor grad) {
        runtime.autograd().setGrad(this, grad);
    }

    /** True unless a recorded operator made this tensor. */
    public boolean isLeaf() {
        return autograd.gradFn == null;
    }

    /** The name of the recorded operator that made this tensor ({@code "mm"}), or null for a leaf. */
    public String gradFn() {
        return autograd.gradFn == null ? null : autograd.gradFn.name;
    }

    /** Accumulates the gradient of this one-element tensor into the leaves it depends on ({@link GradTape#backward}). */
    public void backward() {
        runtime.autograd().backward(List.of(this), List.of(), false, List.of());
    }

    /** Accumulates the gradient of this tensor, seeded with {@code gradient} (its shape), into the leaves it depends on. */
    public void backward(DTensor gradient) {
        runtime.autograd().backward(List.of(this), List.of(nonNull(gradient, "backward", "gradient")), false, List.of());
    }

    /** The same values and memory, without history: a leaf that does not require grad. */
    public DTensor detach() {
        return runtime.autograd().detach(this);
    }

    AutogradState autograd() {
        return autograd;
    }

    // ---- values -----------------------------------------------------------------------------------

    /** A future of the whole tensor as one torch tensor; returns at once ({@code _GetTensorAsync}). */
    public TensorFuture toTorchAsync() {
        return runtime.getTensorAsync(this);
    }

    /** The whole tensor as one torch tensor, which the caller owns; blocks up to the runtime's timeout. */
    public Tensor toTorch() {
        return toTorchAsync().get();
    }

    /**
     * The local tensor of every device of the mesh, in the mesh's device order ({@link DeviceMesh#deviceIds()}): its
     * shard, its replica, or its partial value, as PyTorch's {@code to_local} gives one rank's. The caller owns the list's
     * tensors. In thread mode they are the workers' tensors themselves (no copy: an in-place change through one changes
     * the shard; a CUDA tensor is synchronized with its worker's stream first); in per-device-process mode they are
     * copies from the workers. One blocking read, up to the runtime's timeout; its error names this tensor and the
     * devices that did not answer ({@link LocalShards#toLocal}).
     */
    public List<Tensor> toLocal() {
        return LocalShards.toLocal(this);
    }

    /** The whole tensor as one torch tensor, which the caller owns: PyTorch's name for {@link #toTorch()}. */
    public Tensor fullTensor() {
        return toTorch();
    }

    /** Releases the tensor on the workers once the operators already queued have used it. Idempotent. */
    @Override
    public void close() {
        closed = true;
        release.clean();
    }

    /** True once closed. */
    public boolean isClosed() {
        return closed;
    }

    void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("DTensor %" + operand.id() + " " + operand.meta() + " is closed");
        }
    }

    /** {@code DTensor(float32[8, 16] [S(0)] on DeviceMesh(cpu, [0, 1, 2, 3]))}. */
    @Override
    public String toString() {
        return "DTensor(" + operand.meta() + (closed ? ", closed" : "") + ")";
    }

    static Operand operandOf(DTensor t) {
        return Objects.requireNonNull(t, "tensor").operand();
    }

    private static DTensor nonNull(DTensor t, String op, String name) {
        return Objects.requireNonNull(t, () -> op + ": " + name + " is null");
    }
}
