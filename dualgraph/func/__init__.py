"""`dg.func`: ``torch.func``'s function transforms, eager.

- `functional_call` runs a module with other tensors in place of its parameters and
  buffers (a dict of dotted names), leaving the module as it was;
- `grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`, `jacfwd`, `hessian` are built on
  reverse-mode autograd (``jacfwd`` equals ``jacrev``: the Jacobian is exact either way;
  `jvp` is the double-VJP trick: the VJP ``u -> u^T J`` is linear in ``u``, so
  differentiating it in ``u`` against the tangent gives ``J t``, at the cost of two backward
  passes); the arguments they differentiate may be tensors or dicts/lists/tuples of
  tensors;
- `vmap` maps a function over a dimension by calling it once per slice and stacking the
  results (the answers of PyTorch's batched rules, at a loop's speed); ``randomness=``
  ``"different"``/``"same"`` are accepted (each slice draws afresh under either).

A gradient keeps history (``create_graph``) when the differentiated arguments already
require grad, so nested transforms (``grad(grad(f))``) and a MAML-style outer loss
differentiate through it. The transforms run eagerly; called inside `dg.compile` they
trace as the autograd calls they are made of.

>>> dg.func.grad(lambda x: (x ** 2).sum())(dg.tensor([1.0, 2.0]))
tensor([2., 4.])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..eager.grad_mode import enable_grad
from ..eager.tensor import grad as _autograd_grad
from ..modes import current_trace
from ..ops.mixin import TensorOps
from ..ops.shape import reshape, stack

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "stack_module_state", "vjp", "vmap"]


# ---------------------------------------------------------------- pytrees (dict/list/tuple)
def _flatten(tree: Any) -> tuple[list, Callable]:
    """(the tensors of ``tree`` in order, a function rebuilding it from such a list)."""
    if isinstance(tree, dict):
        keys = list(tree)
        parts = [_flatten(tree[k]) for k in keys]
        return _join(parts, lambda vals: type(tree)(zip(keys, vals)) if type(tree) is not dict
                     else dict(zip(keys, vals)))
    if isinstance(tree, (list, tuple)):
        parts = [_flatten(v) for v in tree]
        if isinstance(tree, tuple) and hasattr(tree, "_fields"):
            return _join(parts, lambda vals: type(tree)(*vals))
        return _join(parts, lambda vals: type(tree)(vals))
    return [tree], lambda leaves: leaves[0]


def _join(parts: list, build: Callable) -> tuple[list, Callable]:
    sizes = [len(p[0]) for p in parts]
    leaves = [x for p in parts for x in p[0]]

    def rebuild(new: list) -> Any:
        vals, k = [], 0
        for (_, unflat), n in zip(parts, sizes):
            vals.append(unflat(new[k:k + n]))
            k += n
        return build(vals)
    return leaves, rebuild


def _tree_map(fn: Callable, tree: Any) -> Any:
    leaves, rebuild = _flatten(tree)
    return rebuild([fn(x) for x in leaves])


# ---------------------------------------------------------------- functional_call
def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the named tensors of ``parameter_and_buffer_dicts``
    (a dict, or a tuple of dicts, keyed by dotted names) standing in for the module's
    parameters and buffers; the module is left as it was. With ``tie_weights``, a
    parameter registered under two names takes the value given for either. ``strict``:
    every parameter and buffer must be given, and nothing else."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        values = dict(dicts)
    elif isinstance(dicts, (list, tuple)) and all(isinstance(d, dict) for d in dicts):
        values = {}
        for d in dicts:
            for k, v in d.items():
                if k in values:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of "
                                     "functional call is ambiguous")
                values[k] = v
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(dicts).__name__}")
    slots = _named_slots(module)
    if strict:
        missing = sorted(set(slots) - set(values))
        unexpected = sorted(set(values) - set(slots))
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
    if tie_weights:
        by_id: dict = {}
        for name, (owner, kind, leaf) in slots.items():
            if name in values:
                by_id[id(owner.__dict__[kind][leaf])] = values[name]
        for name, (owner, kind, leaf) in slots.items():
            if name not in values and id(owner.__dict__[kind][leaf]) in by_id:
                values[name] = by_id[id(owner.__dict__[kind][leaf])]
    saved = []
    # While `dg.compile` traces, the module's own tensors are what later calls must find
    # (the stand-ins are arguments): the trace guards on them, read before the swap.
    trace = current_trace()
    try:
        for name, value in values.items():
            if name in slots:
                owner, kind, leaf = slots[name]
            else:
                owner, kind, leaf = _new_slot(module, name)
            store = owner.__dict__[kind]
            saved.append((store, leaf, store.get(leaf, _ABSENT)))
            if trace is not None and leaf in store:
                trace.note_attr(owner, leaf, store[leaf])
            store[leaf] = value
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, leaf, old in reversed(saved):
            if old is _ABSENT:
                store.pop(leaf, None)
            else:
                store[leaf] = old


_ABSENT = object()


def _named_slots(module: Any) -> dict:
    """Every parameter's and buffer's dotted name (duplicates kept) -> (owning module,
    ``"_parameters"``/``"_buffers"``, its name there)."""
    out: dict = {}

    def walk(m: Any, prefix: str, seen: set) -> None:
        if id(m) in seen:
            return
        seen = seen | {id(m)}
        for kind in ("_parameters", "_buffers"):
            for leaf, v in m.__dict__[kind].items():
                if v is not None:
                    out[prefix + leaf] = (m, kind, leaf)
        for child_name, child in m.__dict__["_modules"].items():
            if child is not None:
                walk(child, f"{prefix}{child_name}.", seen)
    walk(module, "", set())
    return out


def _new_slot(module: Any, name: str) -> tuple:
    *path, leaf = name.split(".")
    owner = module
    for part in path:
        sub = owner.__dict__["_modules"].get(part)
        if sub is None:
            raise AttributeError(f"{type(owner).__name__} has no submodule {part!r} "
                                 f"(functional_call key {name!r})")
        owner = sub
    return owner, "_buffers", leaf


def stack_module_state(models: Any) -> tuple[dict, dict]:
    """(parameters, buffers) of same-structured ``models``, each stacked along a new first
    dimension: the inputs `functional_call` under `vmap` takes to run an ensemble."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    params = {k: stack([dict(m.named_parameters())[k].detach() for m in models]).detach()
              for k, _ in models[0].named_parameters()}
    for k, p in models[0].named_parameters():
        if p.requires_grad:
            params[k].requires_grad_(True)
    buffers = {k: stack([dict(m.named_buffers())[k] for m in models])
               for k, _ in models[0].named_buffers()}
    return params, buffers


# ---------------------------------------------------------------- gradients
def _argnums(argnums: Any, n: int) -> tuple[tuple, bool]:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums or not all(isinstance(a, int) for a in nums):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {argnums!r}")
    for a in nums:
        if not -n <= a < n:
            raise RuntimeError(f"Got argnums={a}, but only {n} positional inputs")
    return tuple(a % n for a in nums), single


def _differentiable(x: Any) -> Any:
    if not isinstance(x, TensorOps):
        raise RuntimeError(f"Expected the differentiated arguments to be tensors (or "
                           f"dicts/lists/tuples of tensors), got {type(x).__name__}")
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"only floating point tensors can be differentiated, got {x.dtype}")
    return x.view_as(x) if x.requires_grad else x.detach().requires_grad_(True)


def _grad_and_value_impl(func: Callable, argnums: Any, has_aux: bool, args: tuple,
                         kwargs: dict) -> tuple:
    nums, single = _argnums(argnums, len(args))
    args = list(args)
    trees, create = [], False
    for a in nums:
        leaves, rebuild = _flatten(args[a])
        create = create or any(isinstance(x, TensorOps) and x.requires_grad for x in leaves)
        new = [_differentiable(x) for x in leaves]
        trees.append((new, rebuild))
        args[a] = rebuild(new)
    with enable_grad():
        out = func(*args, **kwargs)
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError("grad_and_value(f)(*args): output of function f should be a "
                               "tuple: (output, aux) if has_aux is True")
        out, aux = out
    if not isinstance(out, TensorOps):
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, "
                           f"got {type(out).__name__}")
    if out.numel() != 1 or out.dim() != 0:
        raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar "
                           f"Tensor, got tensor with {out.dim()} dims. Maybe you wanted to "
                           "use the vjp or jacrev APIs instead?")
    flat = [x for new, _ in trees for x in new]
    if out.requires_grad:
        with enable_grad():
            gs = list(_autograd_grad(out, flat, create_graph=create, allow_unused=True))
    else:
        gs = [None] * len(flat)
    gs = [g if g is not None else x.detach() * 0 for g, x in zip(gs, flat)]
    results, k = [], 0
    for new, rebuild in trees:
        results.append(rebuild(gs[k:k + len(new)]))
        k += len(new)
    g = results[0] if single else tuple(results)
    value = out if create else out.detach()
    return (g, (value, aux)) if has_aux else (g, value)


def grad_and_value(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """A function returning (the gradient of scalar ``func`` with respect to the
    ``argnums`` arguments, ``func``'s value); with ``has_aux``, ``func`` returns
    (value, aux) and the result is (gradient, (value, aux))."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _grad_and_value_impl(func, argnums, has_aux, args, kwargs)
    return wrapper


def grad(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """A function returning the gradient of scalar ``func`` with respect to its
    ``argnums`` arguments (and ``aux`` when ``has_aux``)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        g, value = _grad_and_value_impl(func, argnums, has_aux, args, kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """(``func(*primals)``, ``vjp_fn``): ``vjp_fn(cotangents)`` returns a tuple with one
    vector-Jacobian product per primal."""
    trees, new_primals = [], []
    for p in primals:
        leaves, rebuild = _flatten(p)
        new = [_differentiable(x) for x in leaves]
        trees.append((new, rebuild))
        new_primals.append(rebuild(new))
    with enable_grad():
        out = func(*new_primals)
    aux = None
    if has_aux:
        out, aux = out
    out_leaves, _ = _flatten(out)

    def vjp_fn(cotangents: Any) -> tuple:
        cts, _ = _flatten(cotangents)
        if len(cts) != len(out_leaves):
            raise RuntimeError(f"Expected {len(out_leaves)} cotangents, got {len(cts)}")
        flat = [x for new, _ in trees for x in new]
        with enable_grad():
            gs = _autograd_grad(list(out_leaves), flat, list(cts), retain_graph=True,
                                allow_unused=True)
        gs = [g if g is not None else x.detach() * 0 for g, x in zip(gs, flat)]
        res, k = [], 0
        for new, rebuild in trees:
            res.append(rebuild(gs[k:k + len(new)]))
            k += len(new)
        return tuple(res)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple:
    """(``func(*primals)``, the Jacobian-vector product ``J tangents``), both with the
    structure of ``func``'s output; ``tangents`` has the structure of ``primals`` (a tuple).
    With ``has_aux``, ``func`` returns (output, aux) and aux comes third.

    >>> dg.func.jvp(lambda x: x ** 2, (dg.tensor([1.0, 2.0]),), (dg.ones(2),))[1]
    tensor([2., 4.])
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                           f"tuples, got {type(primals).__name__} and "
                           f"{type(tangents).__name__}")
    flat_p, rebuild = _flatten(primals)
    flat_t, _ = _flatten(tangents)
    if len(flat_p) != len(flat_t):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           f"the same python structure, got {len(flat_p)} and "
                           f"{len(flat_t)} tensors")
    for p, t in zip(flat_p, flat_t):
        if not isinstance(t, TensorOps) or tuple(t.shape) != tuple(p.shape):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to "
                               "have the same shape, got "
                               f"{tuple(p.shape)} and {tuple(getattr(t, 'shape', ()))}")
    create = any(isinstance(x, TensorOps) and x.requires_grad for x in flat_p + flat_t)
    xs = [_differentiable(x) for x in flat_p]
    with enable_grad():
        out = func(*rebuild(xs))
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError("jvp(f, primals, tangents): output of function f should be a "
                               "tuple: (output, aux) if has_aux is True")
        out, aux = out
    outs, rebuild_out = _flatten(out)
    if not all(isinstance(o, TensorOps) for o in outs):
        raise RuntimeError("jvp(f, primals, tangents): Expected f to return tensors (or "
                           "dicts/lists/tuples of tensors)")
    tangents_out = [forward_product(o, xs, flat_t, create) for o in outs]
    for k, t in enumerate(tangents_out):
        if t is None:
            if strict:
                raise RuntimeError(f"jvp: output {k} does not depend on the primals (strict)")
            tangents_out[k] = outs[k].detach() * 0
    if not create:
        outs = [o.detach() for o in outs]
    result = (rebuild_out(outs), rebuild_out(tangents_out))
    return result + (aux,) if has_aux else result


def forward_product(out: Any, xs: list, ts: list, create: bool) -> Any:
    """``sum_i d out / d xs[i] . ts[i]`` by the double-VJP trick (None when ``out`` depends
    on none of ``xs``): the VJP with a seed ``u`` is linear in ``u``, and its VJP in ``u``
    against the tangents is the forward product."""
    if not out.requires_grad or out.dtype.kind not in "fc":
        return None
    u = out.detach().new_zeros(tuple(out.shape)).requires_grad_(True)
    with enable_grad():
        gs = _autograd_grad(out, xs, u, retain_graph=True, create_graph=True,
                            allow_unused=True)
        live = [(g, t) for g, t in zip(gs, ts) if g is not None and g.requires_grad]
        if not live:
            return None if all(g is None for g in gs) else out.detach() * 0
        (r,) = _autograd_grad([g for g, _ in live], [u], [t for _, t in live],
                              retain_graph=True, create_graph=create, allow_unused=True)
    return out.detach() * 0 if r is None else r


def jacrev(func: Callable, argnums: Any = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable:
    """A function returning the Jacobian of ``func`` with respect to its ``argnums``
    tensor arguments: shape ``output.shape + input.shape`` (a tuple per argument when
    ``argnums`` is a tuple)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args))
        args = list(args)
        xs, create = [], False
        for a in nums:
            if not isinstance(args[a], TensorOps):
                raise RuntimeError("jacrev: the differentiated arguments must be tensors, got "
                                   f"{type(args[a]).__name__}")
            create = create or args[a].requires_grad
            args[a] = _differentiable(args[a])
            xs.append(args[a])
        with enable_grad():
            out = func(*args, **kwargs)
        aux = None
        if has_aux:
            out, aux = out
        if not isinstance(out, TensorOps):
            raise RuntimeError("jacrev: the function must return a tensor (or (tensor, aux) "
                               f"with has_aux), got {type(out).__name__}")
        flat = reshape(out, -1)
        rows: list = [[] for _ in xs]
        for e in range(flat.shape[0]):
            with enable_grad():
                gs = _autograd_grad(flat[e], xs, retain_graph=True, create_graph=create,
                                    allow_unused=True)
            for j, (g, x) in enumerate(zip(gs, xs)):
                rows[j].append(g if g is not None else x.detach() * 0)
        jac = [reshape(stack(r), tuple(out.shape) + tuple(x.shape)) if r else
               x.detach().new_zeros(tuple(out.shape) + tuple(x.shape))
               for r, x in zip(rows, xs)]
        if not create:
            jac = [j.detach() for j in jac]
        res = jac[0] if single else tuple(jac)
        return (res, aux) if has_aux else res
    return wrapper


def jacfwd(func: Callable, argnums: Any = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """`jacrev`'s Jacobian (forward and reverse mode give the same exact matrix)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func: Callable, argnums: Any = 0) -> Callable:
    """The Jacobian of the Jacobian: ``input.shape + input.shape`` for scalar ``func``."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------- vmap
_RANDOMNESS = ("error", "different", "same")


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over dimension ``in_dims`` of its arguments (an int, or one entry
    per argument, ``None`` for arguments passed whole; dicts/lists/tuples are mapped
    leaf by leaf): one call per slice, results stacked at ``out_dims``."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if not isinstance(in_dims, (int, tuple, list)) and in_dims is not None:
            raise ValueError(f"vmap: in_dims must be an int, None or a tuple, got "
                             f"{type(in_dims).__name__}")
        if len(dims) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of `inputs`. in_dims has "
                             f"structure with {len(dims)} entries but inputs has {len(args)}.")
        mapped = []  # per argument: (leaves, rebuild, per-leaf dim or None)
        size = None
        for a, d in zip(args, dims):
            leaves, rebuild = _flatten(a)
            ld = _leaf_dims(d, a, len(leaves))
            for x, dd in zip(leaves, ld):
                if dd is None:
                    continue
                if not isinstance(x, TensorOps):
                    raise ValueError(f"vmap: got in_dim={dd} for an input but the input is "
                                     f"of type {type(x).__name__}. We cannot vmap over "
                                     "non-Tensor arguments, please use None as the "
                                     "respective in_dim")
                if not -x.dim() <= dd < x.dim():
                    raise ValueError(f"vmap: Got in_dim={dd} for some input, but that input "
                                     f"is a Tensor of dimensionality {x.dim()} so expected "
                                     f"in_dim to satisfy -{x.dim()} <= in_dim < {x.dim()}.")
                n = x.shape[dd]
                if size is not None and n != size:
                    raise ValueError("vmap: Expected all tensors to have the same size in "
                                     f"the mapped dimension, got sizes {size} and {n} for "
                                     "the mapped dimension")
                size = n
            mapped.append((leaves, rebuild, ld))
        if size is None:
            raise ValueError("vmap: at least one input must be a tensor mapped over a "
                             "dimension (in_dims all None)")
        outs = []
        for i in range(size):
            call = [rebuild([x if dd is None else x.select(dd, i) for x, dd in zip(leaves, ld)])
                    for leaves, rebuild, ld in mapped]
            outs.append(func(*call, **kwargs))
        leaves0, rebuild_out = _flatten(outs[0])
        flat = [_flatten(o)[0] for o in outs]
        od = _leaf_dims(out_dims, outs[0], len(leaves0))
        res = []
        for j, dd in enumerate(od):
            col = [f[j] for f in flat]
            if not all(isinstance(c, TensorOps) for c in col):
                raise ValueError("vmap: `func` must only return Tensors, got "
                                 f"{type(col[0]).__name__}")
            res.append(stack(col, 0 if dd is None else dd))
        return rebuild_out(res)
    return wrapper


def _leaf_dims(d: Any, tree: Any, n: int) -> list:
    """The mapped dimension of each of a tree's ``n`` leaves (``d``: one int/None for the
    whole tree, or a tree of the same structure)."""
    if d is None or isinstance(d, int):
        return [d] * n
    leaves, _ = _flatten(d) if isinstance(d, (dict, list, tuple)) else ([d], None)
    if len(leaves) != n:
        raise ValueError(f"vmap: in_dims {d!r} does not match the structure of its input")
    return leaves
