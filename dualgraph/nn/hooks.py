"""Module hooks, as PyTorch's: forward pre-hooks, forward hooks, full backward hooks and
full backward pre-hooks, each registered on a `Module` and removed through its handle.

Forward hooks are Python around ``forward``, so under `dg.compile` they are traced like any
other code. Backward hooks need gradients of a module's inputs and outputs together: the
inputs that require grad go through one ``custom_function`` node and the outputs through
another (PyTorch's ``BackwardHookFunction``), whose gradient rules call the hooks. Under
`dg.compile` they therefore run once, while the backward is traced, with traced gradients.

>>> h = model.fc.register_forward_hook(lambda m, args, out: print(out.shape))
>>> h.remove()
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..eager.grad_mode import GRAD_ENABLED
from ..ops.custom import custom_function, pack, unpack
from ..ops.mixin import TensorOps
from .changes import CountedTable

_IDS = itertools.count()


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods: ``remove()`` unregisters the hook (also
    on leaving a ``with handle:`` block)."""

    def __init__(self, *dicts: dict) -> None:
        self.id = next(_IDS)
        self._dicts = dicts

    def remove(self) -> None:
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


class ModuleHooks:
    """A module's hooks, kept in registration order (``prepend`` puts one first)."""

    def __init__(self) -> None:
        # Counted (`nn.changes`): a compiled call checks its guard on them only when a
        # hook was added or removed since its last call.
        self.forward_pre: OrderedDict = CountedTable()
        self.forward: OrderedDict = CountedTable()
        self.backward: OrderedDict = CountedTable()
        self.backward_pre: OrderedDict = CountedTable()
        self.pre_with_kwargs: dict = CountedTable()
        self.with_kwargs: dict = CountedTable()
        self.always_call: dict = CountedTable()

    def __bool__(self) -> bool:
        return bool(self.forward_pre or self.forward or self.backward or self.backward_pre)

    def add(self, table: str, hook: Callable, prepend: bool, *flags: str) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        d = getattr(self, table)
        extra = [getattr(self, f) for f in flags]
        handle = RemovableHandle(d, *extra)
        d[handle.id] = hook
        for e in extra:
            e[handle.id] = True
        if prepend:
            d.move_to_end(handle.id, last=False)
        return handle

    def call(self, module: Any, args: tuple, kwargs: dict) -> Any:
        """``module(*args, **kwargs)`` with the hooks: pre-hooks may replace the arguments,
        forward hooks the output."""
        def pre(hid: int, hook: Callable, call: tuple) -> tuple | None:
            args, kwargs = call
            if hid in self.pre_with_kwargs:
                r = hook(module, args, kwargs)
                if r is not None and not (isinstance(r, tuple) and len(r) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {r!r}.")
                return r
            r = hook(module, args)
            return None if r is None else (r if isinstance(r, tuple) else (r,), kwargs)

        args, kwargs = _threaded(self.forward_pre, (args, kwargs), pre)
        state = None
        if (self.backward or self.backward_pre) and GRAD_ENABLED.value:
            state = _BackwardState(module, self)
            args = state.wrap_inputs(args)
        try:
            out = module.forward(*args, **kwargs)
        except Exception:
            for hid, hook in list(self.forward.items()):
                if hid in self.always_call:
                    self._run_forward_hook(hid, hook, module, args, kwargs, None)
            raise
        out = _threaded(self.forward, out, lambda hid, hook, o: self._run_forward_hook(
            hid, hook, module, args, kwargs, o))
        if state is not None:
            out = state.wrap_outputs(out)
        return out

    def _run_forward_hook(self, hid: int, hook: Callable, module: Any, args: tuple,
                          kwargs: dict, out: Any) -> Any:
        if hid in self.with_kwargs:
            return hook(module, args, kwargs, out)
        return hook(module, args, out)


class GlobalHooks(ModuleHooks):
    """The hooks every module runs (``nn.modules.module.register_module_*_hook``), before
    its own. ``any`` holds one entry per registered hook, so a module call tests one dict
    (not four tables through ``__bool__``) on its way to ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.any: dict = {}

    def add(self, table: str, hook: Callable, prepend: bool, *flags: str) -> RemovableHandle:
        handle = super().add(table, hook, prepend, *flags)
        handle._dicts += (self.any,)
        self.any[handle.id] = True
        return handle


GLOBAL = GlobalHooks()
# Hooks that see every parameter, buffer and submodule a module registers:
# ``hook(module, name, value)``, whose result (if not None) is registered instead.
REGISTRATION: dict[str, OrderedDict] = {"module": OrderedDict(), "parameter": OrderedDict(),
                                        "buffer": OrderedDict()}


class EveryModule:
    """Stands for every module where a compiled call guards hook tables: its ``_hooks``
    are the global hooks, so registering or removing one retraces, as a module's own do."""

    def __init__(self) -> None:
        self.__dict__["_hooks"] = GLOBAL


EVERY_MODULE = EveryModule()


def with_global(local: ModuleHooks | None) -> ModuleHooks | None:
    """A module's hooks with the global ones first (PyTorch's order), or ``local`` itself
    when there are no global hooks."""
    if not GLOBAL:
        return local
    both = ModuleHooks()
    for table in ("forward_pre", "forward", "backward", "backward_pre", "pre_with_kwargs",
                  "with_kwargs", "always_call"):
        d = getattr(both, table)
        d.update(getattr(GLOBAL, table))
        if local is not None:
            d.update(getattr(local, table))
    return both


def registered(kind: str, module: Any, name: str, value: Any) -> Any:
    """``value`` passed through the global ``kind`` registration hooks."""
    return _threaded(REGISTRATION[kind], value, lambda _, hook, v: hook(module, name, v))


def add_registration_hook(kind: str, hook: Callable) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"hook must be callable, got {type(hook).__name__}")
    table = REGISTRATION[kind]
    handle = RemovableHandle(table)
    table[handle.id] = hook
    return handle


def _threaded(hooks: OrderedDict, value: Any, step: Callable[[int, Callable, Any], Any]) -> Any:
    """``value`` passed through ``hooks`` in registration order: ``step(id, hook, value)``
    runs one hook and gives the value that replaces it, or None to keep it."""
    for hid, hook in list(hooks.items()):
        new = step(hid, hook, value)
        if new is not None:
            value = new
    return value


def _as_grads(r: Any) -> tuple | None:
    """A backward hook's result as a tuple of gradients (None: keep them)."""
    return None if r is None else tuple(r) if isinstance(r, (tuple, list)) else (r,)


def _meta(t: Any) -> tuple:
    return tuple(t.shape), t.dtype


def _wants_grad(a: Any) -> bool:
    return isinstance(a, TensorOps) and a.dtype.kind == "f" and a.requires_grad


class _BackwardState:
    """One hooked call: routes the output gradients to the input node's rule, which
    calls the full backward hooks with both."""

    def __init__(self, module: Any, hooks: ModuleHooks) -> None:
        self.module = module
        self.hooks = hooks
        self.n_args = 0
        self.arg_pos: list = []  # positions of the positional tensor arguments
        self.grad_pos: list = []  # of those, the ones that require grad
        self.grad_output: tuple | None = None

    def wrap_inputs(self, args: tuple) -> tuple:
        self.arg_pos = [i for i, a in enumerate(args) if isinstance(a, TensorOps)]
        self.grad_pos = [i for i in self.arg_pos if _wants_grad(args[i])]
        if not self.grad_pos:
            return args
        xs = [args[i] for i in self.grad_pos]
        self.in_metas = [_meta(x) for x in xs]
        node = custom_function(pack(xs), xs, (), _InputNode(self))
        new = list(args)
        for i, x in zip(self.grad_pos, unpack(node, self.in_metas, _HookNode.node_name)):
            new[i] = x
        return tuple(new)

    def wrap_outputs(self, out: Any) -> Any:
        single = isinstance(out, TensorOps)
        outs = [out] if single else list(out) if isinstance(out, (tuple, list)) else None
        if outs is None:
            return out
        pos = [k for k, o in enumerate(outs) if _wants_grad(o)]
        if not pos:
            return out
        ys = [outs[k] for k in pos]
        self.out_metas = [_meta(y) for y in ys]
        node = custom_function(pack(ys), ys, (), _OutputNode(self))
        for k, y in zip(pos, unpack(node, self.out_metas, _HookNode.node_name)):
            outs[k] = y
        return outs[0] if single else type(out)(outs)

    def run_backward_hooks(self, grad_input: tuple) -> tuple:
        def step(_: int, hook: Callable, grads: tuple) -> tuple | None:
            r = _as_grads(hook(self.module, grads, self.grad_output))
            if r is not None and len(r) != len(grads):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, got "
                    f"{len(r)}, but expected {len(grads)}")
            return r

        return _threaded(self.hooks.backward, grad_input, step)


class _HookNode:
    node_name = "BackwardHookFunctionBackward"

    def __init__(self, state: _BackwardState) -> None:
        self.state = state

    def __repr__(self) -> str:
        return "BackwardHookFunction"

    def __reduce__(self) -> tuple:
        # A compiled graph goes to the compile worker pickled; the node is an identity
        # there (its hooks ran when the backward was traced).
        return (_Pickled, ())


class _Pickled:
    node_name = "BackwardHookFunctionBackward"

    def __repr__(self) -> str:
        return "BackwardHookFunction"


class _OutputNode(_HookNode):
    def vjp(self, ctx: Any, g: Any) -> tuple:
        st = self.state
        grads = _threaded(st.hooks.backward_pre, tuple(unpack(g, st.out_metas)),
                          lambda _, hook, gs: _as_grads(hook(st.module, gs)))
        st.grad_output = grads
        if not st.grad_pos and st.hooks.backward:
            # No input wants a gradient: the hooks run now, with no input gradients.
            st.run_backward_hooks((None,) * len(st.arg_pos))
        return (None, *grads)


class _InputNode(_HookNode):
    def vjp(self, ctx: Any, g: Any) -> tuple:
        st = self.state
        grads = dict(zip(st.grad_pos, unpack(g, st.in_metas)))
        grad_input = tuple(grads.get(i) for i in st.arg_pos)
        if st.hooks.backward:
            grad_input = st.run_backward_hooks(grad_input)
        new = dict(zip(st.arg_pos, grad_input))
        return (None, *[new[i] for i in st.grad_pos])
