"""Values that came back from the workers: whole tensors in this process."""

import weakref

from . import _bridge, _dtypes, _isolation, _shapes


def _ctypes(what):
    """The ctypes module (imported on first use: it needs native access, which isolated mode turns off)."""
    if _isolation.ACTIVE:
        raise _isolation.refuse(what)
    import ctypes
    return ctypes


class HostTensor:
    """A whole tensor held by this process: shape, dtype, values, and its bytes as a zero-copy buffer.

    close() (or leaving a `with` block) frees the memory at once, or, while memoryviews of it are alive, when the
    last of them is released; a HostTensor nobody closes is freed when the garbage collector finds it.
    """

    __slots__ = ("_java", "__weakref__")

    def __init__(self, java):
        self._java = java

    @property
    def shape(self):
        return tuple(self._java.shape())

    @property
    def dtype(self):
        return _dtypes.of(self._java.dtype())

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        return self._java.numel()

    @property
    def nbytes(self):
        return self._java.nbytes()

    def tolist(self):
        """The values as nested Python lists (one Python object per element, as in PyTorch)."""
        integral = self._java.isIntegral()
        flat = list(_bridge.call(self._java.longs if integral else self._java.doubles))
        if self.dtype == _dtypes.bool:
            flat = [v != 0 for v in flat]
        return _shapes.nest(flat, self.shape)

    def item(self):
        """The one value of a one-element tensor."""
        if self.numel() != 1:
            raise ValueError("item() needs a tensor of one element, this one has %d" % self.numel())
        values = _bridge.call(self._java.longs if self._java.isIntegral() else self._java.doubles)
        value = values[0]
        return value != 0 if self.dtype == _dtypes.bool else value

    def memoryview(self):
        """A zero-copy memoryview of the tensor's bytes, typed and shaped where Python has a format for the dtype.

        The view pins the memory: close() while a view is alive closes the tensor, and the memory is freed once the
        last view is released and collected.
        """
        ctypes = _ctypes("memoryview()")
        n = self.nbytes
        if n == 0:
            _bridge.call(self._java.address)  # a closed tensor refuses, as for any size
            return memoryview(b"")
        owned = type("_TensorBytes", (ctypes.c_char * n,), {})
        address = _bridge.call(self._java.pin)
        try:
            raw = owned.from_address(address)
            weakref.finalize(raw, self._java.unpin)
        except BaseException:
            self._java.unpin()
            raise
        view = memoryview(raw).cast("B")
        fmt = self.dtype._format
        if fmt is None:
            return view
        shape = list(self.shape) or [1]
        return view.cast(fmt, shape)

    def tobytes(self):
        """The tensor's bytes, copied once into a Python bytes object."""
        ctypes = _ctypes("tobytes()")
        address = _bridge.call(self._java.pin)
        try:
            return ctypes.string_at(address, self.nbytes)
        finally:
            self._java.unpin()

    def close(self):
        """Frees the memory now, or when the last memoryview of it is released. Idempotent."""
        self._java.close()

    @property
    def closed(self):
        return self._java.isClosed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._java.isClosed():
            return "tensor(<closed>, shape=%s, dtype=%r)" % (self.shape, self.dtype)
        return "tensor(%s, dtype=%r)" % (self._java.format(64), self.dtype)

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]
