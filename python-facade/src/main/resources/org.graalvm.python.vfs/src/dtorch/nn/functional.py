"""dtorch.nn.functional: torch.nn.functional's names on distributed tensors. The hand-written operators (relu, silu,
gelu, softmax) keep their own sharding rules; any other name is the ATen operator of that name through the generic path
(dtorch.aten), e.g. linear, hardtanh, leaky_relu, elu, softplus, mish, logsigmoid."""

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


def __getattr__(name):
    if name.startswith("_") or not _tensor._has_op(name):
        raise AttributeError("module 'dtorch.nn.functional' has no attribute %r" % (name,))

    def function(*args, **kwargs):
        return _tensor.aten(name, args, kwargs)

    function.__name__ = name
    return function
