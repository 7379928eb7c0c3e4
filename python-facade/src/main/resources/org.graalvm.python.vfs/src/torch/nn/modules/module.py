"""torch.nn.Module: PyTorch's base class of layers and models, with its names and behaviour.

Assigning a Parameter, a Module, or a tensor to a registered buffer's name registers it; parameters, buffers and
submodules are then reached as attributes, iterated in registration order (named_parameters, named_modules, ...),
saved by state_dict and restored by load_state_dict. Their values may be torch.Tensors or distributed tensors
(dtorch.Tensor): a module's forward calls torch.nn.functional, which runs distributed when its tensors are.
"""

from __future__ import annotations

import builtins
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from typing import Any, Callable, Iterator

from ... import _types
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..parameter import Parameter, is_distributed, is_tensor_like
from ._hooks import RemovableHandle, hook_table


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict did not match: the module's keys the state_dict lacks, and the state_dict's keys the module
    lacks."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _typename(value: Any) -> str:
    if isinstance(value, Tensor):
        return value.type()
    if is_distributed(value):
        return "dtorch.Tensor"
    t = type(value)
    module = t.__module__
    return t.__qualname__ if module in ("builtins", None) else module + "." + t.__qualname__


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _plain(value: Any) -> Any:
    """A parameter's values without the Parameter (state_dict without keep_vars): the same memory."""
    if isinstance(value, Parameter):
        return value.data
    return value


def _shape(value: Any) -> _types.Size:
    return _types.Size(tuple(value.shape))


def _forward_unimplemented(self: Module, *args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError('Module [%s] is missing the required "forward" function' % type(self).__name__)


class Module:
    """Base class of every layer and model: subclasses set their parameters and submodules in __init__ (after
    super().__init__()) and compute in forward(); calling the module runs its hooks around forward."""

    training: bool
    _version: int = 1
    forward: Callable[..., Any] = _forward_unimplemented

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError("%s.__init__() got unexpected arguments %r %r" % (type(self).__name__, args, kwargs))
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", hook_table())
        setattr_(self, "_forward_pre_hooks_with_kwargs", hook_table())
        setattr_(self, "_forward_hooks", hook_table())
        setattr_(self, "_forward_hooks_with_kwargs", hook_table())
        setattr_(self, "_forward_hooks_always_called", hook_table())
        setattr_(self, "_backward_pre_hooks", hook_table())
        setattr_(self, "_backward_hooks", hook_table())

    # ---- registration ----
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name("parameter", name, self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (torch.nn.Parameter or None required)"
                            % (_typename(param), name))
        else:
            self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not is_tensor_like(tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (torch Tensor or None required)"
                            % (_typename(tensor), name))
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError("%s is not a Module subclass" % _typename(module))
        if not isinstance(name, str):
            raise TypeError("module name should be a string. Got %s" % _typename(name))
        if hasattr(self, name) and name not in self._modules:
            raise KeyError("attribute '%s' already exists" % name)
        if "." in name:
            raise KeyError('module name can\'t contain ".", got: %s' % name)
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, kind: str, name: Any, table: dict) -> None:
        if not isinstance(name, str):
            raise TypeError("%s name should be a string. Got %s" % (kind, _typename(name)))
        if "." in name:
            raise KeyError('%s name can\'t contain "."' % kind)
        if name == "":
            raise KeyError('%s name can\'t be empty string ""' % kind)
        if hasattr(self, name) and name not in table:
            raise KeyError("attribute '%s' already exists" % name)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, d, self._buffers, self._modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (torch.nn.Parameter or None expected)"
                                % (_typename(value), name))
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                self._forget(name, d, self._parameters, self._buffers)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError("cannot assign '%s' as child module '%s' (torch.nn.Module or None expected)"
                                    % (_typename(value), name))
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not is_tensor_like(value):
                        raise TypeError("cannot assign '%s' as buffer '%s' (torch.Tensor or None expected)"
                                        % (_typename(value), name))
                    buffers[name] = value
                else:
                    object.__setattr__(self, name, value)

    def _forget(self, name: str, *tables: dict) -> None:
        for table in tables:
            table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            found = d.get(table)
            if found is not None and name in found:
                return found[name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        names = list(dir(type(self))) + list(self.__dict__) + list(self._parameters) + list(self._modules) + \
            list(self._buffers)
        return sorted(n for n in set(names) if not n[0].isdigit())

    # ---- iteration ----
    def _named_members(self, members: Callable[[Module], Any], prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Any]]:
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in members(module):
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + ("." if module_prefix else "") + name, value)

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Any]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Any]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(name, module) for this module and every descendant, depth first in registration order ("" for this one)."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def get_submodule(self, target: str) -> Module:
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def get_parameter(self, target: str) -> Any:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Any:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        if name not in module._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return module._buffers[name]

    # ---- state ----
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else _plain(param)
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf

    def state_dict(self, *, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> dict:
        """The parameters and persistent buffers by dotted name, this module's first, then each child's in order.
        The values share the module's memory; keep_vars=True gives the Parameters themselves."""
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict: Mapping, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list, assign: bool = False) -> None:
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in list(self._parameters.items()) + list(persistent.items()) if v is not None}
        for name, current in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            given = state_dict[key]
            if not is_tensor_like(given):
                error_msgs.append('While copying the parameter named "%s", expected torch.Tensor or Tensor-like '
                                  "object from checkpoint but received %s" % (key, type(given)))
                continue
            if tuple(given.shape) != tuple(current.shape):
                error_msgs.append("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                                  "current model is %s." % (key, _shape(given), _shape(current)))
                continue
            try:
                if assign:
                    self._assign(name, current, given)
                else:
                    _copy_into(current, given)
            except Exception as e:  # noqa: BLE001 - reported in the error, as PyTorch reports it
                error_msgs.append('While copying the parameter named "%s", whose dimensions in the model are %s and '
                                  "whose dimensions in the checkpoint are %s, an exception occurred : %s."
                                  % (key, _shape(current), _shape(given), e.args))
        if strict:
            for key in state_dict:
                if not key.startswith(prefix):
                    continue
                head = key[len(prefix):].split(".", 1)
                if len(head) > 1:
                    if head[0] not in self._modules:
                        unexpected_keys.append(key)
                elif head[0] not in local:
                    unexpected_keys.append(key)

    def _assign(self, name: str, current: Any, given: Any) -> None:
        if name in self._parameters:
            self._parameters[name] = Parameter(given, requires_grad=current.requires_grad)
        else:
            self._buffers[name] = given

    def load_state_dict(self, state_dict: Mapping, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copies the state_dict's values into the parameters and persistent buffers of the same names (assign=True
        puts the given tensors in their place instead). Returns the keys that did not match; with strict (the default),
        a missing or unexpected key, or a shape that differs, is a RuntimeError that lists them all."""
        if not isinstance(state_dict, Mapping):
            raise TypeError("Expected state_dict to be dict-like, got %s." % type(state_dict))
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None) or {}

        def load(module: Module, prefix: str) -> None:
            module._load_from_state_dict(state_dict, prefix, metadata.get(prefix[:-1], {}), True, missing, unexpected,
                                         errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s" % (type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- conversions and modes ----
    def _apply(self, fn: Callable[[Any], Any]) -> Module:
        """fn on every parameter and buffer, recursively. A parameter stays the same object and takes fn's result as its
        data (PyTorch's default), so whoever holds it sees the change."""
        for module in self.children():
            module._apply(fn)
        for name, param in self._parameters.items():
            if param is not None:
                with no_grad():
                    converted = fn(param)
                    if converted is not param:
                        param.data = converted
                        grad = param.grad
                        if grad is not None:
                            param.grad = fn(grad)
        for name, buf in self._buffers.items():
            if buf is not None:
                self._buffers[name] = fn(buf)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """to(device), to(dtype), to(device, dtype), to(tensor), with device=, dtype=, non_blocking=: floating-point
        parameters and buffers take the dtype; all move to the device. A distributed tensor keeps its mesh: a device of
        another type than its mesh's is a ValueError."""
        device, dtype = _to_arguments(args, kwargs)
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=%s" % dtype)
        return self._apply(lambda t: _convert(t, device, dtype))

    def _cast(self, dtype: _types.dtype) -> Module:
        return self._apply(lambda t: _convert(t, None, dtype))

    def float(self) -> Module:
        return self._cast(_types.float32)

    def double(self) -> Module:
        return self._cast(_types.float64)

    def half(self) -> Module:
        return self._cast(_types.float16)

    def bfloat16(self) -> Module:
        return self._cast(_types.bfloat16)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Module:
        return self.to("cuda" if device is None else device if isinstance(device, (str, _types.device)) else
                       "cuda:%d" % device)

    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, builtins.bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Sets whether autograd records operations on every parameter (requires_grad_(False) freezes the module)."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Removes every parameter's gradient (set_to_none, the default), or fills it with zeros."""
        for param in self.parameters():
            _clear_grad(param, set_to_none)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """fn on every submodule (children first), then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- calls and hooks ----
    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """hook(module, args) -> None or new args; with_kwargs: hook(module, args, kwargs) -> None or (args, kwargs)."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        _put(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """hook(module, args, output) -> None or a new output; with_kwargs: hook(module, args, kwargs, output).
        always_call runs it even when forward raised."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs, self._forward_hooks_always_called)
        _put(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """hook(module, grad_output) -> None or a new grad_output, when the gradients of the module's outputs are
        computed (distributed tensors)."""
        handle = RemovableHandle(self._backward_pre_hooks)
        _put(self._backward_pre_hooks, handle.id, hook, prepend)
        return handle

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """hook(module, grad_input, grad_output) -> None or a new grad_input, when the gradients of the module's
        tensor arguments are computed (distributed tensors)."""
        handle = RemovableHandle(self._backward_hooks)
        _put(self._backward_hooks, handle.id, hook, prepend)
        return handle

    def _forward_call(self, args: tuple, kwargs: dict) -> Any:
        if self._backward_hooks or self._backward_pre_hooks:
            from ._backward_hooks import call_with_backward_hooks
            return call_with_backward_hooks(self, self.forward, args, kwargs)
        return self.forward(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks):
            return self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           "but got %r." % (result,))
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        called = set()
        try:
            result = self._forward_call(args, kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    replaced = hook(self, args, kwargs, result)
                else:
                    replaced = hook(self, args, result)
                if replaced is not None:
                    result = replaced
            return result
        except BaseException:
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:  # noqa: BLE001 - the forward's own error is the one to see
                        pass
            raise

    # ---- printing ----
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module's own settings, shown inside its repr's parentheses; subclasses override it."""
        return ""

    def _child_lines(self) -> list[str]:
        return ["(" + name + "): " + _addindent(repr(module), 2) for name, module in self._modules.items()]

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        lines += self._child_lines()
        text = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                text += lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


def _put(table: dict, key: int, hook: Callable[..., Any], prepend: bool) -> None:
    if prepend:
        items = list(table.items())
        table.clear()
        table[key] = hook
        table.update(items)
    else:
        table[key] = hook


def _to_arguments(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError("to() got unexpected keyword arguments %s" % sorted(kwargs))
    for a in args:
        if isinstance(a, _types.dtype):
            dtype = a
        elif isinstance(a, (str, _types.device)):
            device = a
        elif isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, builtins.bool):
            continue  # non_blocking given by position
        else:
            raise TypeError("to() takes a device, a dtype or a tensor, got %r" % (a,))
    return (None if device is None else _types.device(device)), dtype


def _convert(t: Any, device: Any, dtype: Any) -> Any:
    """t on `device` with `dtype` where t is floating point (integer and bool tensors keep theirs); t itself when
    nothing changes."""
    cast = dtype if dtype is not None and (t.dtype.is_floating_point or t.dtype.is_complex) and t.dtype != dtype else None
    if is_distributed(t):
        mesh_type = t.device_mesh.device_type
        if device is not None and device.type != mesh_type:
            raise ValueError("a distributed tensor stays on its mesh of %s devices; it cannot move to %s (redistribute "
                             "it onto a mesh of that type instead)" % (mesh_type, device))
        return t if cast is None else t.to(cast)
    if cast is None and (device is None or _same_device(t.device, device)):
        return t
    return t.to(device=device, dtype=cast)


def _same_device(current: Any, wanted: Any) -> bool:
    return current.type == wanted.type and (wanted.index is None or current.index == wanted.index)


def _clear_grad(param: Any, set_to_none: bool) -> None:
    """No gradient on param (set_to_none), or zeros in the one it has, detached from any graph that made it."""
    grad = param.grad
    if grad is None:
        return
    if set_to_none:
        param.grad = None
    else:
        if grad.grad_fn is not None:
            grad.detach_()
        else:
            grad.requires_grad_(False)
        grad.zero_()


@no_grad()
def _copy_into(current: Any, given: Any) -> None:
    """current.copy_(given) across kinds, recording nothing: a distributed tensor's values into a torch.Tensor come
    whole; a torch.Tensor's into a distributed tensor are spread onto its mesh and placements first."""
    if is_distributed(current):
        if isinstance(given, Tensor):
            import dtorch
            given = dtorch.distribute_tensor(given, current.device_mesh, current.placements)
        current.copy_(given)
    else:
        if is_distributed(given):
            given = given.full_tensor()
        current.copy_(given)
