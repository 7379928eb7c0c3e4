"""dtorch.nn.functional: torch.nn.functional's names on distributed tensors. The hand-written operators (relu, silu,
gelu, softmax, linear) keep their own sharding rules; convolutions, pooling, interpolate and scaled_dot_product_attention
take torch's signatures and run the ATen operator torch would (torch.nn._spatial) through the generic path; any other
name is the ATen operator of that name through the generic path (dtorch.aten), e.g. hardtanh, leaky_relu, elu, softplus,
mish, logsigmoid."""

from torch.nn import _spatial

from .. import _tensor


def relu(input, inplace=False):
    return input.relu()


def silu(input, inplace=False):
    return input.silu()


def gelu(input, approximate="none"):
    if approximate == "none":
        return input.gelu()
    return _tensor.aten("gelu", (input,), {"approximate": approximate})


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("softmax() needs dim")
    if dtype is not None:
        input = input.to(dtype)
    return input.softmax(dim)


def linear(input, weight, bias=None):
    return _tensor.linear(input, weight, bias)


def _run(name, args, kwargs=None):
    return _tensor.aten(name, args, kwargs)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _run("conv1d", (input, weight, bias, stride, padding, dilation, groups))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _run("conv2d", (input, weight, bias, stride, padding, dilation, groups))


globals().update(_spatial.bind(_run))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """Sharded on batch or heads (query, key and value alike); dropout_p must be 0 on distributed tensors."""
    return _run("scaled_dot_product_attention", (query, key, value, attn_mask, float(dropout_p), is_causal),
                {"scale": scale, "enable_gqa": enable_gqa})


def __getattr__(name):
    if name.startswith("_") or not _tensor._has_op(name):
        raise AttributeError("module 'dtorch.nn.functional' has no attribute %r" % (name,))

    def function(*args, **kwargs):
        return _tensor.aten(name, args, kwargs)

    function.__name__ = name
    return function
