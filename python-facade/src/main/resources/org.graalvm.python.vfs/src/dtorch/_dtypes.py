"""dtypes, named as in PyTorch."""


class dtype:
    """An element type: dtorch.float32, dtorch.int64, ..."""

    __slots__ = ("name", "is_floating_point", "itemsize", "_format")

    def __init__(self, name, is_floating_point, itemsize, fmt):
        self.name = name
        self.is_floating_point = is_floating_point
        self.itemsize = itemsize
        self._format = fmt

    def __repr__(self):
        return "dtorch." + self.name

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, dtype) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


float32 = dtype("float32", True, 4, "f")
float64 = dtype("float64", True, 8, "d")
float16 = dtype("float16", True, 2, "e")
bfloat16 = dtype("bfloat16", True, 2, None)
int64 = dtype("int64", False, 8, "q")
int32 = dtype("int32", False, 4, "i")
int16 = dtype("int16", False, 2, "h")
int8 = dtype("int8", False, 1, "b")
uint8 = dtype("uint8", False, 1, "B")
bool = dtype("bool", False, 1, "?")  # noqa: A001 - PyTorch's name
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001

_BY_NAME = {d.name: d for d in (float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool)}


def of(value):
    """A dtype from a dtype or its name."""
    if value is None:
        return float32
    if isinstance(value, dtype):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    raise ValueError("unknown dtype %r" % (value,))
