"""`Optimizer`: parameter groups, per-parameter state, ``state_dict``, as PyTorch's.

The containers (``param_groups``, each group and its ``params`` list, ``state`` and each
parameter's state dict) count their changes in one version number that a compiled training
step guards, so ``opt.state.clear()``, a new group or a changed parameter list retraces
instead of running with what the trace saw. Hyperparameters read from a group while a call
is traced are runtime inputs or guards (`dualgraph.optim._tracing`), whoever reads them.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import operator
import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.internal import array_of
from ..eager.tensor import Tensor
from ..errors import TraceError
from ..ops.complex import ComplexTensor
from ..ops.mixin import TensorOps
from . import _tracing as T


class _Required:
    """The default of a hyperparameter that every group must give (PyTorch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


_TICKS = itertools.count(1)


class _Version:
    """One optimizer's change counters, shared by all its containers. ``n`` counts changes
    of structure (what a traced step iterated over or branched on: a retrace); ``v`` counts
    every write, a hyperparameter's new value too, so a compiled call whose counters read
    as last time reuses the hyperparameters it read then; ``g`` counts the changes of the
    groups and their parameter lists only (not of the state), all that ``zero_grad`` and
    a read of ``param_groups`` depend on, so a closure that calls ``zero_grad()`` while
    L-BFGS keeps changing its state between calls is not retraced. Values are unique
    across all optimizers, so a replaced counter never repeats a value a guard expects."""

    __slots__ = ("n", "v", "g")

    def __init__(self) -> None:
        self.n = self.v = self.g = next(_TICKS)

    def bump(self) -> None:
        self.n = self.v = self.g = next(_TICKS)

    def bump_state(self) -> None:
        self.n = self.v = next(_TICKS)

    def touch(self) -> None:
        self.v = next(_TICKS)


def _changed(ver: _Version, what: str, state: bool = False) -> None:
    """A container changed (``state``: a state container): eagerly count it; during a
    trace refuse (a compiled call would not repeat the change)."""
    if T.tracing():
        raise T.eager_only(f"changing the optimizer's {what}")
    if state:
        ver.bump_state()
    else:
        ver.bump()


class ParamGroup(dict):
    """One entry of ``param_groups``: a dict whose reads, while a compiled call is traced,
    are reported to the trace (a number becomes a runtime input, anything else a guard)."""

    __slots__ = ("_ver", "_opt", "_src")

    def __init__(self, ver: _Version, items: dict, opt: Any = None,
                 src: dict | None = None) -> None:
        super().__init__(items)
        self._ver = ver
        self._opt = opt
        self._src = src

    def _pull(self) -> bool:
        """Take in what was written to the caller's dict this group was made from (PyTorch
        keeps that dict as the group, so a write to it changes the optimizer); False
        when there was something to take."""
        src = self._src
        if src is None or (len(src) == dict.__len__(self) and all(
                dict.get(self, k, T._MISSING) is v for k, v in src.items())):
            return True
        for k in [k for k in dict.keys(self) if k not in src]:
            dict.__delitem__(self, k)
        for k, v in list(src.items()):
            if k == "params" and not isinstance(v, _Params):
                v = _Params(self._ver, [v] if isinstance(v, TensorOps) else v)
                dict.__setitem__(src, k, v)
            dict.__setitem__(self, k, v)
        self._ver.bump()
        return False

    def __getitem__(self, key: Any) -> Any:
        if self._src is not None:
            self._pull()
        value = dict.__getitem__(self, key)
        hooks = T.trace_hooks()
        if hooks is None:
            return value
        if self._opt is not None:
            # Code outside the optimizer's own methods may iterate the groups too.
            self._opt._guard_structure(hooks, state=False)
        if key == "params":
            return value
        return T.read(hooks, self, key, value, lambda: dict.__getitem__(self, key),
                      f"param_groups[...][{key!r}]")

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __setitem__(self, key: Any, value: Any) -> None:
        if T.tracing():
            raise T.eager_only(f"setting param_groups[...][{key!r}]")
        if key == "params" or key not in self:
            # The parameter list, or which keys a group has, changed: what a traced step
            # iterated over or branched on (``"momentum" in group``).
            self._ver.bump()
        else:
            self._ver.touch()
        dict.__setitem__(self, key, value)
        if self._src is not None:
            dict.__setitem__(self._src, key, value)

    def __delitem__(self, key: Any) -> None:
        _changed(self._ver, f"param_groups[...][{key!r}]")
        dict.__delitem__(self, key)
        if self._src is not None:
            self._src.pop(key, None)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            _changed(self._ver, f"param_groups[...][{key!r}]")
            if self._src is not None:
                self._src.pop(key, None)
        return dict.pop(self, key, *default)

    def popitem(self) -> Any:
        _changed(self._ver, "param_groups[...]")
        k, v = dict.popitem(self)
        if self._src is not None:
            self._src.pop(k, None)
        return k, v

    def clear(self) -> None:
        _changed(self._ver, "param_groups[...]")
        dict.clear(self)
        if self._src is not None:
            self._src.clear()

    def __ior__(self, other: Any) -> ParamGroup:
        self.update(other)
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        return dict, (dict(self),)

    def __deepcopy__(self, memo: dict) -> dict:
        return {k: copy.deepcopy(v, memo) for k, v in dict.items(self)}


def change_counters(keep: Any) -> tuple | None:
    """The change counters (`_Version`) that say when a value read while a call was traced
    may have changed, for what the read kept (``keep`` of `_tracing.read`: a parameter
    group, a group with one of its values, or several of those joined); None when the
    value depends on anything else, so it is read on every call."""
    if isinstance(keep, ParamGroup):
        return (keep._ver,)
    if isinstance(keep, T.Joined):
        out: tuple = ()
        for k in keep:
            vers = change_counters(k)
            if vers is None:
                return None
            out += tuple(v for v in vers if v not in out)
        return out
    if type(keep) is tuple and len(keep) == 2 and isinstance(keep[0], ParamGroup):
        return (keep[0]._ver,)
    return None


class _TrackedList(list):
    """A list that counts its changes in the optimizer's version."""

    __slots__ = ("_ver",)
    _what = "parameter groups"

    def __init__(self, ver: _Version, items: Iterable = ()) -> None:
        super().__init__(items)
        self._ver = ver

    def _changed(self) -> None:
        _changed(self._ver, self._what)

    def __setitem__(self, i: Any, v: Any) -> None:
        self._changed()
        list.__setitem__(self, i, v)

    def __delitem__(self, i: Any) -> None:
        self._changed()
        list.__delitem__(self, i)

    def __iadd__(self, other: Iterable) -> Any:
        self._changed()
        return list.__iadd__(self, other)

    def __imul__(self, n: int) -> Any:
        self._changed()
        return list.__imul__(self, n)

    def append(self, v: Any) -> None:
        self._changed()
        list.append(self, v)

    def extend(self, vs: Iterable) -> None:
        self._changed()
        list.extend(self, vs)

    def insert(self, i: int, v: Any) -> None:
        self._changed()
        list.insert(self, i, v)

    def pop(self, i: int = -1) -> Any:
        self._changed()
        return list.pop(self, i)

    def remove(self, v: Any) -> None:
        self._changed()
        list.remove(self, v)

    def clear(self) -> None:
        self._changed()
        list.clear(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        self._changed()
        list.reverse(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return list, (list(self),)

    def __deepcopy__(self, memo: dict) -> list:
        return [copy.deepcopy(v, memo) for v in self]


class _Params(_TrackedList):
    __slots__ = ()
    _what = "parameter list"


class _Groups(_TrackedList):
    __slots__ = ()


class _StateDict(dict):
    """A dict of optimizer state whose changes bump the optimizer's version (so a compiled
    step sees them); every write goes through ``__setitem__``."""

    __slots__ = ("_ver", "_opt")

    def __delitem__(self, key: Any) -> None:
        _changed(self._ver, "state", state=True)
        dict.__delitem__(self, key)

    def clear(self) -> None:
        _changed(self._ver, "state", state=True)
        dict.clear(self)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            _changed(self._ver, "state", state=True)
        return dict.pop(self, key, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __reduce_ex__(self, protocol: Any) -> Any:
        return dict, (dict(self),)

    def __deepcopy__(self, memo: dict) -> dict:
        return {k: copy.deepcopy(v, memo) for k, v in dict.items(self)}


# The state entries a trace added or replaced on this thread, each ``(container, key,
# value before)``: the trace fills them only through its compiled call, so a trace that
# fails (the call then runs eagerly) puts them back (`state_restored_on_error`).
_TRACED_STATE = threading.local()


def _note_traced_state(container: dict, key: Any, old: Any) -> None:
    log = getattr(_TRACED_STATE, "log", None)
    if log is not None:
        log.append((container, key, old))


@contextlib.contextmanager
def state_restored_on_error() -> Any:
    """While the block traces and compiles a call: if it raises, the optimizer state
    entries the trace added or replaced are put back as they were, so an eager run of the
    call (or the next trace) finds the state the trace found, not tensors only a compiled
    call would have filled (Lookahead's ``slow_param`` made by ``zeros_like`` and then
    ``copy_``'d)."""
    outer = getattr(_TRACED_STATE, "log", None)
    log = _TRACED_STATE.log = []
    try:
        yield
    except BaseException:
        for container, key, old in reversed(log):
            if old is T._MISSING:
                dict.pop(container, key, None)
            else:
                dict.__setitem__(container, key, old)
        raise
    else:
        if outer is not None:
            outer.extend(log)  # a trace inside another's: undone if the outer one fails
    finally:
        _TRACED_STATE.log = outer


class _ParamState(_StateDict):
    """One parameter's state. During a trace a new entry may be added (the state a first
    step creates); a tensor computed by the trace is stored as an eager tensor the compiled
    call writes, and the step retraces once, as it took its first-step path."""

    __slots__ = ()

    def __init__(self, ver: _Version, opt: Any, items: Any = ()) -> None:
        super().__init__(items)
        self._ver = ver
        self._opt = opt

    def __setitem__(self, key: Any, value: Any) -> None:
        old = dict.get(self, key, T._MISSING)
        if old is value:
            return
        if not T.tracing():
            self._ver.bump_state()
        elif isinstance(value, Tensor) and old is T._MISSING:
            _note_traced_state(self, key, old)  # new eager state, made the same way each step
        elif isinstance(value, TensorOps):
            _note_traced_state(self, key, old)
            value = self._opt._hold(value, self, key)
            self._ver.bump_state()  # the trace took the first-step path: retrace next call
        else:
            raise T.eager_only(f"storing {type(value).__name__} {value!r} in optimizer state "
                               f"[{key!r}] (keep numbers that change in state as tensors)")
        dict.__setitem__(self, key, value)


    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)



class _State(_StateDict):
    """``opt.state``: parameter -> its state dict, created on first use (PyTorch's
    ``defaultdict(dict)``)."""

    __slots__ = ()

    def __init__(self, ver: _Version, opt: Any, items: Any = ()) -> None:
        super().__init__()
        self._ver = ver
        self._opt = opt
        for k, v in dict(items).items():
            self[k] = v

    def __missing__(self, key: Any) -> dict:
        value = _ParamState(self._ver, self._opt)
        dict.__setitem__(self, key, value)
        if not T.tracing():
            self._ver.bump_state()
        else:
            _note_traced_state(self, key, T._MISSING)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        if dict.get(self, key, T._MISSING) is value:
            return
        if T.tracing():
            raise T.eager_only("replacing a parameter's optimizer state")
        # A plain dict is kept as given (the caller may change it later): the guard's
        # fallback reads its entries.
        self._ver.bump_state()
        dict.__setitem__(self, key, value)


    def popitem(self) -> Any:
        _changed(self._ver, "state", state=True)
        return dict.popitem(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = {} if default is None else default
        return dict.__getitem__(self, key)



def _share_version(opt: Any, ver: _Version) -> None:
    """Make optimizer ``opt`` and all its containers count their changes in ``ver`` (an
    optimizer that shares a parameter group with ``opt``), and count that as a change."""
    if opt is None:
        return
    opt._ver = ver
    groups, state = opt.__dict__["_groups"], opt.__dict__["_state"]
    containers = [groups, state, *groups, *dict.values(state)]
    containers += [dict.get(g, "params") for g in groups]
    for c in containers:
        if isinstance(c, (_TrackedList, ParamGroup, _StateDict)):
            c._ver = ver
    ver.bump()


# PyTorch's global step hooks (`register_optimizer_step_pre_hook`, `..._post_hook`), by
# handle id: they run around every optimizer's step, before its own.
_GLOBAL_STEP_HOOKS: dict[str, dict] = {"pre": {}, "post": {}}


def _step_hooks(opt: "Optimizer", kind: str) -> list:
    own = opt.__dict__.get("_step_hooks")
    return list(_GLOBAL_STEP_HOOKS[kind].values()) + (
        list(own[kind].values()) if own else [])


def _hooked_step(fn: Callable, self: "Optimizer", args: tuple, kwargs: dict) -> Any:
    """``step`` with the step hooks: a pre hook may return new ``(args, kwargs)``. As in
    PyTorch, the hooks' ``args`` start with the optimizer itself."""
    if T.trace_hooks() is not None:
        raise TraceError("optimizer step hooks inside a compiled function: they are Python "
                         "code around the step, which a compiled step does not run. Call "
                         "the step eagerly, or remove the hooks")
    args = (self, *args)
    for hook in _step_hooks(self, "pre"):
        r = hook(self, args, kwargs)
        if r is not None:
            if not (isinstance(r, tuple) and len(r) == 2):
                raise RuntimeError(f"{hook} must return None or a tuple of (new_args, "
                                   f"new_kwargs), but got {r}.")
            args, kwargs = r
    out = fn(*args, **kwargs)
    for hook in _step_hooks(self, "post"):
        hook(self, args, kwargs)
    return out


_structure_counter = operator.attrgetter("_ver.n")
_groups_counter = operator.attrgetter("_ver.g")


def _traced_method(fn: Callable) -> Callable:
    """Wrap ``step``/``zero_grad``: while a call is traced, guard what the optimizer's
    containers hold, and afterwards write the state tensors the trace computed. ``step``
    also runs the step hooks, when there are any."""
    if getattr(fn, "_dg_optim_wrapped", False):
        return fn
    is_step = fn.__name__ == "step"

    @functools.wraps(fn)
    def wrapper(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        if is_step and (self.__dict__.get("_step_hooks") or _GLOBAL_STEP_HOOKS["pre"]
                        or _GLOBAL_STEP_HOOKS["post"]):
            return _hooked_step(fn, self, args, kwargs)
        self._pull_groups()
        hooks = T.trace_hooks()
        if hooks is None:
            return fn(self, *args, **kwargs)
        # zero_grad reads the parameter lists only, not the state (which L-BFGS changes
        # between the calls of a compiled closure)
        self._guard_structure(hooks, state=is_step)
        try:
            out = fn(self, *args, **kwargs)
        except BaseException:
            self._drop_held()
            raise
        self._flush_held()
        return out
    wrapper._dg_optim_wrapped = True  # type: ignore[attr-defined]
    return wrapper


class Optimizer:
    """Base class of all optimizers: ``param_groups``, ``state``, ``zero_grad``,
    ``state_dict``/``load_state_dict``, ``add_param_group``.

    A subclass implements ``step()``, reading hyperparameters from ``group[...]`` as
    PyTorch's optimizers do; inside a compiled training step those reads are runtime inputs
    or guards, so a learning-rate schedule changes the compiled step's learning rate.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("step", "zero_grad"):
            if name in cls.__dict__:
                setattr(cls, name, _traced_method(cls.__dict__[name]))

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        if isinstance(params, TensorOps):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        if isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered "
                            "collections, but the ordering of tensors in sets will change "
                            "between runs. Please use a list instead.")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
            self._made = groups[0]  # no caller holds it
        # Groups of another optimizer (``SGD(opt1.param_groups)``) are shared, as in
        # PyTorch: both optimizers then count their changes in one version.
        shared = next((g._ver for g in groups if isinstance(g, ParamGroup)), None)
        self._ver = shared if shared is not None else _Version()
        self._held: list = []
        self.defaults = dict(defaults)
        self.state = {}
        self.param_groups = []
        for g in groups:
            self.add_param_group(g)
        self.__dict__.pop("_made", None)

    # ---------------------------------------------------------------- containers
    @property
    def state(self) -> dict:
        return self._state

    @state.setter
    def state(self, value: dict) -> None:
        self._own_version()
        self._ver.bump_state()
        self._state = value if isinstance(value, _State) else _State(self._ver, self, value)

    @property
    def param_groups(self) -> list:
        return self._groups

    @param_groups.setter
    def param_groups(self, value: list) -> None:
        self._own_version()
        self._ver.bump()
        groups = _Groups(self._ver)
        for g in value:
            list.append(groups, g if isinstance(g, ParamGroup) else self._as_group(g))
        self._groups = groups

    def _own_version(self) -> None:
        """A wrapper optimizer (Lookahead) may set ``param_groups`` and ``state`` without
        calling ``Optimizer.__init__``, as PyTorch allows: it gets its version here."""
        if "_ver" not in self.__dict__:
            self._ver = _Version()
            self._held = []

    def _as_group(self, g: dict) -> ParamGroup:
        items = dict(g)
        if isinstance(items.get("params"), list) and not isinstance(items["params"], _Params):
            items["params"] = _Params(self._ver, items["params"])
        return ParamGroup(self._ver, items, self)

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": dict(self.state),
                "param_groups": [dict(g) for g in self.param_groups]}

    def __setstate__(self, d: dict) -> None:
        self._ver = _Version()
        self._held = []
        self.defaults = d["defaults"]
        # The dicts are this optimizer's own (a copy's): track them like its own state.
        self.state = {p: s if isinstance(s, _ParamState) else _ParamState(self._ver, self, s)
                      for p, s in d["state"].items()}
        self.param_groups = d["param_groups"]

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {dict.__getitem__(group, key)}")
        return "\n".join(lines) + "\n)"

    # ------------------------------------------------------- compiled-step support
    def _plain_containers(self, state: bool = True) -> list:
        """Containers a user put in as plain lists or dicts (their changes bypass the
        counter): each group's parameter list, each parameter's state dict (with
        ``state``)."""
        groups, states = self.__dict__["_groups"], self.__dict__["_state"]
        out = [p for p in (dict.__getitem__(g, "params") for g in groups)
               if not isinstance(p, _Params)]
        if not state:
            return out
        return out + [s for s in dict.values(states) if not isinstance(s, _ParamState)]

    def _fingerprint(self, state: bool = True) -> Any:
        """The change counter, and what the plain containers hold."""
        plain = self._plain_containers(state)
        return (self._ver.n if state else self._ver.g,
                tuple(tuple(map(id, c)) if isinstance(c, list) else
                      tuple((k, id(v)) for k, v in c.items()) for c in plain))

    def _pull_groups(self) -> bool:
        """Take in the writes to the callers' dicts the groups were made from
        (`ParamGroup._pull`); False when there were any."""
        return all([g._pull() for g in self.__dict__["_groups"]
                    if getattr(g, "_src", None) is not None])

    def _guard_structure(self, hooks: tuple, state: bool = True) -> None:
        """Guard the groups and parameter lists, and with ``state`` the state too."""
        guard, _ = hooks
        if any(getattr(g, "_src", None) is not None for g in self.__dict__["_groups"]):
            # A compiled call reads the callers' group dicts as eager mode does.
            self._pull_groups()
            guard(self._pull_groups, True,
                  f"a dict given to {type(self).__name__} as a parameter group was written",
                  self)
        if not state:
            what = (f"{type(self).__name__}'s state or parameter groups changed (parameters "
                    "or groups added or changed)")
            if self._plain_containers(False):
                guard(functools.partial(self._fingerprint, False), self._fingerprint(False),
                      what, self)
            else:
                guard(functools.partial(_groups_counter, self), self._ver.g, what, self)
            return
        what = (f"{type(self).__name__}'s state or parameter groups changed (state cleared "
                "or replaced, parameters or groups added or changed)")
        if self._plain_containers():
            guard(self._fingerprint, self._fingerprint(), what, self)
        else:
            # Every container is tracked: the counter alone says whether anything changed
            # (one attribute read per call, without a Python frame).
            guard(functools.partial(_structure_counter, self), self._ver.n, what, self)

    def _hold(self, value: Any, state: dict, key: Any) -> Tensor:
        """An eager tensor standing for a state value the trace computed; the compiled call
        writes the value into it. The step may go on changing ``value`` in place: then
        `_flush_held` writes its final value."""
        holder = Tensor(np.zeros(tuple(value.shape), value.dtype))
        with no_grad():
            holder.copy_(value)
        ctx = getattr(value, "_ctx", None)
        # Tied, the value and its holder are one tensor to the rest of the trace (a read
        # of ``opt.state[p]`` or ``state_dict()`` after an in-place op on the value sees
        # it); only a value that cannot be tied is written at the step's end.
        tied = ctx is not None and ctx.tie(value, holder)
        self._held.append((holder, value, None if tied else getattr(value, "node", None),
                           state, key, tied))
        return holder

    def _flush_held(self) -> None:
        held, self._held = self._held, []
        with no_grad():
            for holder, value, node, _, _, tied in held:
                if not tied and getattr(value, "node", None) is not node:
                    holder.copy_(value)

    def _drop_held(self) -> None:
        """The traced step failed: no compiled call will fill the held tensors, so they
        leave the state (an eager step then takes its first-step path again)."""
        held, self._held = self._held, []
        for holder, _, _, state, key, _ in held:
            if dict.get(state, key) is holder:
                dict.__delitem__(state, key)

    # ------------------------------------------------------------------ the API
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters, with its own hyperparameters (the optimizer's
        defaults fill in the rest): ``opt.add_param_group({"params": head, "lr": 1e-4})``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group.get("params")
        if params is None:
            raise TypeError("a parameter group must be a dict with a 'params' entry")
        if isinstance(params, (TensorOps, ComplexTensor)):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered "
                            "collections, but the ordering of tensors in sets will change "
                            "between runs. Please use a list instead.")
        else:
            params = list(params)
        # A complex parameter is stepped as its real (*shape, 2) storage, as PyTorch steps
        # view_as_real of it.
        params = [p._storage() if isinstance(p, ComplexTensor) else p for p in params]
        k = len(self.param_groups)
        seen = {id(p): i for i, g in enumerate(self.param_groups) for p in g["params"]}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            # A parameter listed twice would be stepped twice per step(). PyTorch raises
            # across groups and warns within one; both are refused here.
            if id(p) in seen:
                what = ("some parameters appear in more than one parameter group"
                        if seen[id(p)] != k else
                        "optimizer contains a parameter group with duplicate parameters")
                raise ValueError(f"{what}: parameter {i} of group {k} (shape "
                                 f"{tuple(p.shape)}) is listed before")
            seen[id(p)] = k
        group = {**param_group, "params": params}
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        self._check_group(group)
        if isinstance(param_group, ParamGroup):
            # PyTorch keeps the dict it is given, filled in place.
            if param_group._ver is not self._ver:
                _share_version(param_group._opt, self._ver)
            group["params"] = _Params(self._ver, params)
            for k, v in group.items():
                if dict.get(param_group, k, T._MISSING) is not v:
                    dict.__setitem__(param_group, k, v)
            self.param_groups.append(param_group)
            return
        new = self._as_group(group)
        if type(param_group) is dict and param_group is not self.__dict__.get("_made"):
            # PyTorch keeps the caller's dict as the group, filled in place (its parameters
            # a list, the defaults added). The optimizer's group is a dict that counts its
            # changes: it writes through to the caller's, and takes in the caller's writes
            # whenever it is read (`ParamGroup._pull`).
            param_group.update(dict.items(new))
            new._src = param_group
        self.param_groups.append(new)

    def _check_group(self, group: dict) -> None:
        """Hyperparameters are numbers (flags are bools): a string would fail later, inside
        a step."""
        for k, v in group.items():
            default = self.defaults.get(k)
            # A subclass's own settings may be anything (LARS's filters are functions).
            if k == "params" or isinstance(default, (bool, str, type(None))) or callable(default):
                continue
            if v is required:
                continue
            for x in v if isinstance(v, tuple) else (v,):
                if isinstance(x, bool) or not isinstance(x, (int, float, np.number, Tensor)):
                    raise TypeError(f"{type(self).__name__}: {k} must be a number, got {x!r}")
        if group.get("lr", 0) < 0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")

    def register_step_pre_hook(self, hook: Callable) -> _StepHookHandle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``; it may return new
        ``(args, kwargs)``. Eager steps only (a compiled step with hooks raises)."""
        return _add_step_hook(self.__dict__.setdefault("_step_hooks", {"pre": {}, "post": {}}),
                              "pre", hook)

    def register_step_post_hook(self, hook: Callable) -> _StepHookHandle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``."""
        return _add_step_hook(self.__dict__.setdefault("_step_hooks", {"pre": {}, "post": {}}),
                              "post", hook)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to ``None`` (the default), or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad = p.grad.detach() * 0

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient. ``closure`` (re-evaluates the
        loss) is called first, under grad mode, and its result returned. A subclass gives
        its rule for one parameter as ``_update``, or overrides ``step``."""
        if type(self)._update is Optimizer._update:
            raise NotImplementedError
        return self._run_updates(closure)

    def state_dict(self) -> dict:
        """``{"state": {index: state}, "param_groups": [group with "params": [index]]}``,
        PyTorch's format: parameters are numbered across groups in order. The state
        tensors are the optimizer's own (not copies)."""
        self._pull_groups()
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in dict.items(g) if k != "params"}
            ids = []
            for p in dict.__getitem__(g, "params"):
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in dict.items(self.state) if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load what `state_dict` returned (of an optimizer over parameters of the same
        shapes, in the same groups). State tensors are copied and cast to their
        parameter's dtype (``step`` keeps its own)."""
        state_dict = copy.deepcopy(state_dict)
        groups, saved = self.param_groups, state_dict.get("param_groups")
        if not isinstance(saved, list) or "state" not in state_dict:
            raise ValueError("optimizer state_dict must have 'state' and 'param_groups'")
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, s in zip(groups, saved):
            if len(dict.__getitem__(g, "params")) != len(s["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        id_map = {old: p for g, s in zip(groups, saved)
                  for old, p in zip(s["params"], dict.__getitem__(g, "params"))}
        state = {}
        for k, v in state_dict["state"].items():
            p = id_map.get(k)
            if p is None:
                continue
            entry = {}
            for name, value in dict(v).items():
                if isinstance(value, Tensor) and name != "step":
                    value = Tensor(np.array(array_of(value), dtype=p.dtype))
                elif isinstance(value, Tensor):
                    value = Tensor(np.array(array_of(value)))
                entry[name] = value
            state[p] = _ParamState(self._ver, self, entry)
        new_groups = [{**s, "params": list(dict.__getitem__(g, "params"))}
                      for g, s in zip(groups, saved)]
        self.state = _State(self._ver, self, state)
        self.param_groups = new_groups

    # ------------------------------------------------------------- for subclasses
    def _run_updates(self, closure: Callable[[], Any] | None) -> Any:
        """The built-in optimizers' ``step``: ``self._update(p, g, group, state)`` for
        every parameter with a gradient, after checking them all. Eagerly each group's
        values are read once (a plain copy); while tracing, from the group itself, so the
        trace sees the reads."""
        loss = run_closure(closure)
        self._check_grads()
        tracing = T.tracing()
        with no_grad():
            for group in self.param_groups:
                hp = group if tracing else dict.copy(group)
                for p in self._params_with_grad(group):
                    self._update(p, p.grad, hp, self._state_of(p, hp))
        return loss

    def _state_of(self, p: Tensor, group: dict) -> dict:
        return self.state[p]

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        raise NotImplementedError

    def _params_with_grad(self, group: dict) -> list:
        """The group's parameters that have a gradient, checked before anything changes:
        an error must leave all parameters and state as they were."""
        return [p for p in dict.__getitem__(group, "params") if p.grad is not None]

    def _check_grads(self) -> None:
        for group in self.param_groups:
            for p in dict.__getitem__(group, "params"):
                g = p.grad
                if g is not None and g.shape != p.shape:
                    raise RuntimeError(
                        f"{type(self).__name__}.step(): the gradient of a parameter of shape "
                        f"{tuple(p.shape)} has shape {tuple(g.shape)}; nothing was updated")


Optimizer.zero_grad = _traced_method(Optimizer.zero_grad)  # type: ignore[method-assign]
Optimizer.step = _traced_method(Optimizer.step)  # type: ignore[method-assign]


_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_nonnegative(**values: Any) -> None:
    """PyTorch's constructor checks: each hyperparameter at least 0, else ``ValueError``
    ("Invalid learning rate: -1", "Invalid momentum value: -1")."""
    for name, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {_LABELS.get(name, name + ' value')}: {v}")


def check_betas(name: str, betas: Any) -> tuple:
    """A pair of numbers in ``[0, 1)``."""
    if (not isinstance(betas, (tuple, list)) or len(betas) != 2
            or not all(isinstance(b, (int, float, np.number, Tensor)) for b in betas)):
        raise TypeError(f"{name}: betas must be a pair of numbers, got {betas!r}")
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")
    return tuple(betas)


def zeros_state(p: Tensor, dtype: Any = None) -> Tensor:
    """A state tensor of zeros shaped like ``p``: an eager tensor even while a step is
    traced (the trace then reads and writes it like any captured tensor)."""
    return Tensor(np.zeros(tuple(p.shape), p.dtype if dtype is None else dtype))


def full_state(p: Tensor, value: float) -> Tensor:
    return Tensor(np.full(tuple(p.shape), value, p.dtype))


def step_state() -> Tensor:
    """A step counter as PyTorch keeps it: a float32 0-d tensor (exact to 2**24 steps)."""
    return Tensor(np.zeros((), np.float32))


def begin_update(g: Tensor, group: dict, state: dict,
                 init: Callable[[], dict[str, Tensor]]) -> tuple[Tensor, Tensor]:
    """The common start of an ``_update``: the gradient negated when the group maximizes,
    the state made on the parameter's first step (a step counter, then ``init()``'s
    tensors, in that order, as PyTorch's state dict lists them), and the step counter
    advanced in place. Returns the gradient and the step counter."""
    if group["maximize"]:
        g = -g
    if len(state) == 0:
        state["step"] = step_state()
        state.update(init())
    step = state["step"]
    step += 1
    return g, step


def run_closure(closure: Callable[[], Any] | None) -> Any:
    if closure is None:
        return None
    from ..eager.grad_mode import enable_grad

    with enable_grad():
        return closure()


class _StepHookHandle:
    """What the step-hook registrations return: ``remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, table: dict) -> None:
        self.id = next(self._ids)
        self._table = table

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> "_StepHookHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _add_step_hook(table: dict, kind: str, hook: Callable) -> _StepHookHandle:
    handle = _StepHookHandle(table[kind])
    table[kind][handle.id] = hook
    return handle


def register_optimizer_step_pre_hook(hook: Callable) -> _StepHookHandle:
    """``hook(optimizer, args, kwargs)`` before every optimizer's ``step``."""
    return _add_step_hook(_GLOBAL_STEP_HOOKS, "pre", hook)


def register_optimizer_step_post_hook(hook: Callable) -> _StepHookHandle:
    """``hook(optimizer, args, kwargs)`` after every optimizer's ``step``."""
    return _add_step_hook(_GLOBAL_STEP_HOOKS, "post", hook)
