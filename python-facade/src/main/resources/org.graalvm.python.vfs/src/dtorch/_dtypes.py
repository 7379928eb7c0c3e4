"""dtypes: torch's own (dtorch.float32 is torch.float32), so values and distributed tensors compare alike."""

from torch._types import dtype, DTYPES as _BY_NAME, float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8
from torch._types import bool  # noqa: A004 - PyTorch's name

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001

# The names dtorch re-exports (dtorch.bfloat16 is torch.bfloat16).
__all__ = ["dtype", "of", "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
           "float", "double", "half", "long", "int"]


def of(value):
    """A dtype from a dtype or its name."""
    if value is None:
        return float32
    if isinstance(value, dtype):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    raise ValueError("unknown dtype %r" % (value,))
