"""torch.testing.assert_close: values equal within tolerances that depend on the dtype."""

from __future__ import annotations

from typing import Any

# (rtol, atol) by dtype, when neither is given: about the precision of the type.
_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


def _as_tensor(value, like=None):
    from ._tensor import Tensor
    from ._factories import tensor
    if isinstance(value, Tensor):
        return value
    return tensor(value, dtype=None if like is None else like.dtype)


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None, atol: float | None = None, equal_nan: bool = False,
                 check_device: bool = True, check_dtype: bool = True, msg: str | None = None) -> None:
    """Raises AssertionError unless |actual - expected| <= atol + rtol * |expected| everywhere, the shapes agree and
    (by default) the dtypes and devices agree."""
    from ._tensor import Tensor
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)) and (
            any(isinstance(v, Tensor) for v in actual) or any(isinstance(v, Tensor) for v in expected)):
        if len(actual) != len(expected):
            raise AssertionError("The length of the sequences mismatch: %d != %d" % (len(actual), len(expected)))
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                         check_dtype=check_dtype, msg=msg)
        return
    if (rtol is None) != (atol is None):
        raise ValueError("rtol and atol must both be given or both be omitted")
    numbers_only = not isinstance(actual, Tensor) and not isinstance(expected, Tensor)
    a = _as_tensor(actual)
    e = _as_tensor(expected, None if numbers_only else a)
    if numbers_only:
        check_dtype = False
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(msg or "The values for attribute 'shape' do not match: %s != %s." % (a.shape, e.shape))
    if check_dtype and a.dtype != e.dtype:
        raise AssertionError(msg or "The values for attribute 'dtype' do not match: %s != %s." % (a.dtype, e.dtype))
    if check_device and a.device != e.device:
        raise AssertionError(msg or "The values for attribute 'device' do not match: %s != %s." % (a.device, e.device))
    if rtol is None:
        rtol, atol = _TOLERANCES.get(a.dtype.name, (0.0, 0.0))
        if e.dtype.name in _TOLERANCES:
            rtol, atol = max(rtol, _TOLERANCES[e.dtype.name][0]), max(atol, _TOLERANCES[e.dtype.name][1])
    if a.device != e.device:
        e = e.to(a.device)
    af, ef = a.double() if not a.dtype.is_complex else a, e.double() if not e.dtype.is_complex else e
    close = af.isclose(ef, rtol, atol, equal_nan)
    if bool(close.all()):
        return
    total = a.numel()
    bad = total - int(close.sum())
    diff = (af - ef).abs()
    worst = float(diff.max())
    position = int(diff.flatten().argmax())
    relative = float((diff / ef.abs()).flatten()[position]) if total else 0.0
    raise AssertionError(msg or (
        "Tensor-likes are not close!\n\nMismatched elements: %d / %d (%.1f%%)\n"
        "Greatest absolute difference: %s at index %d (up to %s allowed)\n"
        "Greatest relative difference: %s (up to %s allowed)" % (bad, total, 100.0 * bad / total, worst, position, atol,
                                                               relative, rtol)))


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None, equal_nan: bool = True,
                    msg: str = "") -> None:
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False, msg=msg or None)
