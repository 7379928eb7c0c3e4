"""dtypes, devices, memory formats and Size: the values of torch that are not tensors."""

import builtins


class dtype:
    """An element type: torch.float32, torch.int64, torch.bfloat16, ..."""

    __slots__ = ("name", "is_floating_point", "is_complex", "is_signed", "itemsize", "_format")

    def __init__(self, name, is_floating_point, is_complex, is_signed, itemsize, fmt):
        self.name = name
        self.is_floating_point = is_floating_point
        self.is_complex = is_complex
        self.is_signed = is_signed
        self.itemsize = itemsize
        self._format = fmt

    def __repr__(self):
        return "torch." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (_by_name, (self.name,))


float32 = dtype("float32", True, False, True, 4, "f")
float64 = dtype("float64", True, False, True, 8, "d")
float16 = dtype("float16", True, False, True, 2, "e")
bfloat16 = dtype("bfloat16", True, False, True, 2, None)
complex64 = dtype("complex64", False, True, True, 8, None)
complex128 = dtype("complex128", False, True, True, 16, None)
int64 = dtype("int64", False, False, True, 8, "q")
int32 = dtype("int32", False, False, True, 4, "i")
int16 = dtype("int16", False, False, True, 2, "h")
int8 = dtype("int8", False, False, True, 1, "b")
uint8 = dtype("uint8", False, False, False, 1, "B")
bool = dtype("bool", False, False, False, 1, "?")  # noqa: A001 - PyTorch's name

DTYPES = {d.name: d for d in (float32, float64, float16, bfloat16, complex64, complex128, int64, int32, int16, int8,
                              uint8, bool)}


def _by_name(name):
    return DTYPES[name]


class device:
    """A device: torch.device("cpu"), torch.device("cuda:1"), torch.device("cuda", 0)."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002 - PyTorch's name
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError("device() takes a string such as 'cpu' or 'cuda:0', got %r" % (type,))
        name, _, number = type.partition(":")
        if name not in ("cpu", "cuda", "meta"):
            raise RuntimeError("Expected one of cpu, cuda, meta device type at start of device string: %s" % type)
        if number:
            if index is not None:
                raise RuntimeError("device(): the index is given twice in %r and %r" % (type, index))
            index = builtins.int(number)
        self.type = name
        self.index = index

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)

    def __repr__(self):
        if self.index is None:
            return "device(type='%s')" % self.type
        return "device(type='%s', index=%d)" % (self.type, self.index)

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and other.type == self.type and other.index == self.index

    def __hash__(self):
        return hash((self.type, self.index))


class memory_format:
    """torch.contiguous_format, torch.channels_last, torch.preserve_format."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


class Size(tuple):
    """A tensor's shape: a tuple of ints."""

    def __repr__(self):
        return "torch.Size([%s])" % ", ".join(str(s) for s in self)

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        result = tuple.__getitem__(self, item)
        return Size(result) if isinstance(item, slice) else result

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))
