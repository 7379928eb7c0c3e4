"""How torch.nn.functional's pooling and interpolate functions map onto ATen operators. Each function takes torch's
arguments and returns (operator name, positional arguments); torch.nn.functional runs that operator on local tensors
and dtorch.nn.functional on distributed ones, so both bind a call the same way. Only shapes are read here: every
computation is the operator's."""

import math

_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _stride(stride):
    """torch's stride=None (the kernel size) is the operators' empty list."""
    return [] if stride is None else stride


def max_pool(n, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    name = "max_pool%dd_with_indices" % n if return_indices else "max_pool%dd" % n
    return name, (input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def avg_pool(n, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """avg_pool1d has no divisor_override."""
    args = (input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)
    return "avg_pool%dd" % n, args if n == 1 else args + (divisor_override,)


def _sizes(n, value, what, cast):
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError("%s should have %d elements for a %d-D spatial input, got %r" % (what, n, n, value))
        return list(value)
    return [cast(value)] * n


def _output_size(n, input, output_size):
    """None in output_size keeps that spatial size of the input, as in torch."""
    spatial = list(input.shape)[-n:]
    return [spatial[i] if s is None else int(s) for i, s in enumerate(_sizes(n, output_size, "output_size", int))]


def adaptive_avg_pool(n, input, output_size):
    return "adaptive_avg_pool%dd" % n, (input, _output_size(n, input, output_size))


def adaptive_max_pool(n, input, output_size):
    """The operator returns values and indices; torch's function only the values unless return_indices."""
    return "adaptive_max_pool%dd" % n, (input, _output_size(n, input, output_size))


def interpolate_call(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                     antialias=False):
    """The operator torch's interpolate uses for mode and the input's number of spatial dimensions: upsample_nearest*d,
    _upsample_nearest_exact*d, upsample_linear1d, upsample_bilinear2d, upsample_bicubic2d, upsample_trilinear3d (the
    _aa forms with antialias), adaptive_avg_pool*d for "area"."""
    n = input.dim() - 2
    if n not in (1, 2, 3):
        raise ValueError("interpolate() takes a 3-D, 4-D or 5-D input (batch, channels, 1 to 3 spatial dimensions), "
                         "got %d-D" % input.dim())
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate() takes exactly one of size and scale_factor")
    if mode not in _INTERPOLATING and align_corners is not None:
        raise ValueError("align_corners can only be set with the interpolating modes: linear, bilinear, bicubic, trilinear")
    if mode in _MODE_DIMS and _MODE_DIMS[mode] != n:
        raise NotImplementedError("interpolate(mode=%r) takes a %d-D input, got %d-D" % (mode, _MODE_DIMS[mode] + 2, n + 2))
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError("antialias is only for the bilinear and bicubic modes on 4-D inputs")
    spatial = list(input.shape)[2:]
    scales = None
    if size is not None:
        size = [int(s) for s in _sizes(n, size, "size", int)]
    else:
        scales = [float(s) for s in _sizes(n, scale_factor, "scale_factor", float)]
        if recompute_scale_factor or mode == "area":
            size = [int(math.floor(spatial[i] * scales[i])) for i in range(n)]
            scales = None
    if mode == "area":
        return "adaptive_avg_pool%dd" % n, (input, size)
    if mode in ("nearest", "nearest-exact"):
        name = "upsample_nearest%dd" if mode == "nearest" else "_upsample_nearest_exact%dd"
        return name % n, (input, size, scales)
    if mode not in _MODE_DIMS:
        raise NotImplementedError("interpolate(mode=%r): the modes are nearest, nearest-exact, linear, bilinear, bicubic, "
                                  "trilinear and area" % (mode,))
    name = {"linear": "upsample_linear1d", "bilinear": "upsample_bilinear2d", "bicubic": "upsample_bicubic2d",
            "trilinear": "upsample_trilinear3d"}[mode]
    if antialias:
        name = "_" + name + "_aa"
    return name, (input, size, bool(align_corners), scales)


def bind(run):
    """torch.nn.functional's pooling and interpolate functions, with torch's signatures, each running its operator as
    run(name, args): a module's globals().update(bind(run)) defines max_pool1d, max_pool2d, avg_pool1d, avg_pool2d,
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool2d and interpolate."""

    def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return run(*max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices))

    def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return run(*max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices))

    def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        return run(*avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad))

    def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None):
        return run(*avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override))

    def adaptive_avg_pool1d(input, output_size):
        return run(*adaptive_avg_pool(1, input, output_size))

    def adaptive_avg_pool2d(input, output_size):
        return run(*adaptive_avg_pool(2, input, output_size))

    def adaptive_max_pool1d(input, output_size, return_indices=False):
        out = run(*adaptive_max_pool(1, input, output_size))
        return out if return_indices else out[0]

    def adaptive_max_pool2d(input, output_size, return_indices=False):
        out = run(*adaptive_max_pool(2, input, output_size))
        return out if return_indices else out[0]

    def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                    recompute_scale_factor=None, antialias=False):
        return run(*interpolate_call(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias))

    return {f.__name__: f for f in (max_pool1d, max_pool2d, avg_pool1d, avg_pool2d, adaptive_avg_pool1d,
                                    adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool2d, interpolate)}
