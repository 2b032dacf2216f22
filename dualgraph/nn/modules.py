"""`dg.nn` modules: Module, Parameter, layers and losses, with PyTorch's behaviour."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.internal import array_of
from ..eager.tensor import Tensor, _init, rng
from ..modes import current_trace
from . import functional as F


class Parameter(Tensor):
    """A tensor that a `Module` registers as a parameter; requires grad by default."""

    __slots__ = ()

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            arr = np.zeros((0,), np.float32)
        elif isinstance(data, Tensor):
            arr = array_of(data)
        else:
            arr = np.asarray(data)
        _init(self, arr, False, None)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class Module:
    """Base class of layers and models: parameters and submodules are found by attribute."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # `training` is a property so that a compiled call can guard the flags its trace read:
    # while `dg.compile` traces, each read is reported to the trace (its `note_training`),
    # and a changed flag retraces instead of running the other mode's graph.
    @property
    def training(self) -> bool:
        value = self.__dict__.get("_training", True)
        note = getattr(current_trace(), "note_training", None)
        if note is not None:
            note(self, value)
        return value

    @training.setter
    def training(self, mode: bool) -> None:
        self.__dict__["_training"] = bool(mode)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                "cannot assign attributes before Module.__init__() call "
                "(call super().__init__() first)"
            )
        params, modules = self.__dict__["_parameters"], self.__dict__["_modules"]
        # PyTorch's rule: a registered parameter or submodule name takes only its own kind
        # (or None); `lin.weight = 5` would otherwise be accepted and fail much later.
        if name in params and value is not None and not isinstance(value, Parameter):
            raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                            "(dg.nn.Parameter or None expected)")
        if name in modules and value is not None and not isinstance(value, Module):
            raise TypeError(f"cannot assign '{_type_name(value)}' as child module '{name}' "
                            "(dg.nn.Module or None expected)")
        params.pop(name, None)
        modules.pop(name, None)
        self.__dict__.pop(name, None)
        if isinstance(value, Parameter):
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in d.get("_parameters", {}):
            value = d["_parameters"][name]
        elif name in d.get("_modules", {}):
            value = d["_modules"][name]
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        # While `dg.compile` traces: the trace guards the identity of what it read here, so
        # rebinding `m.weight = Parameter(...)` (or a submodule) retraces.
        note = getattr(current_trace(), "note_attr", None)
        if note is not None:
            note(self, name, value)
        return value

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is None:
            self._parameters.pop(name, None)
            object.__setattr__(self, name, None)
        else:
            setattr(self, name, param)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ----------------------------------------------------------------- traversal
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def children(self) -> Iterator["Module"]:
        yield from self._modules.values()

    def named_parameters(self, prefix: str = "", recurse: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = p.grad.detach() * 0

    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    # ----------------------------------------------------------------- state dict
    def state_dict(self) -> "OrderedDict[str, Tensor]":
        """Parameter name -> tensor sharing the parameter's data (detached)."""
        return OrderedDict((name, p.detach()) for name, p in self.named_parameters())

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> tuple:
        """Copy parameters in; every key and shape is checked before anything is written."""
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and unexpected:
            keys = ", ".join(f'"{k}"' for k in unexpected)
            errors.append(f"Unexpected key(s) in state_dict: {keys}")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
        values = {}
        for k, p in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            arr = array_of(v) if isinstance(v, Tensor) else np.asarray(v)
            if arr.shape != p.shape:
                errors.append(
                    f"size mismatch for {k}: copying a param with shape {arr.shape} from "
                    f"checkpoint, the shape in current model is {p.shape}."
                )
            values[k] = arr
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for k, arr in values.items():
                own[k].copy_(Tensor(arr))
        return missing, unexpected

    # ---------------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _uniform(shape: tuple, bound: float) -> np.ndarray:
    return rng().uniform(-bound, bound, size=shape).astype(np.float32)


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight ``(out_features, in_features)``.

    Initialised like PyTorch: uniform in ``±1/sqrt(in_features)`` for weight and bias.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"Linear: {name} must be a non-negative int, got {n!r}")
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    def forward(self, x: Any) -> Any:
        return F.relu(x)


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return F.sigmoid(x)


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return F.tanh(x)


class Sequential(Module):
    """Modules applied in order; indexable like PyTorch's."""

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is not a Module: {type(m).__name__}")
            setattr(self, str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(_Loss):
    """``F.cross_entropy`` with PyTorch's arguments: class ``weight``, ``ignore_index``,
    ``reduction`` and ``label_smoothing`` (``size_average``/``reduce`` are the deprecated
    spellings of ``reduction``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.cross_entropy(input, target, self.weight, None, self.ignore_index, None,
                               self.reduction, self.label_smoothing)


class BCEWithLogitsLoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.reduction)


class Dropout(Module):
    """``F.dropout`` with probability ``p`` in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p = float(p)
        self.inplace = inplace

    def forward(self, x: Any) -> Any:
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


# ============================================================================ issue 12
# Activation modules: each holds its hyperparameters and calls `functional`.


class _Activation(Module):
    """A module calling ``F.<fn>(x, **hyperparameters)``; ``extra_repr`` lists them."""

    _fn: str = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._kwargs = kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)

    def forward(self, x: Any) -> Any:
        return getattr(F, self._fn)(x, **{k: getattr(self, k) for k in self._kwargs})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._kwargs)


class GELU(_Activation):
    _fn = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        super().__init__(approximate=approximate)


class SiLU(_Activation):
    _fn = "silu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class ELU(_Activation):
    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class CELU(_Activation):
    _fn = "celu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class SELU(_Activation):
    _fn = "selu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Softplus(_Activation):
    _fn = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Softsign(_Activation):
    _fn = "softsign"


class Hardtanh(_Activation):
    _fn = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class ReLU6(_Activation):
    _fn = "relu6"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardsigmoid(_Activation):
    _fn = "hardsigmoid"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardswish(_Activation):
    _fn = "hardswish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LeakyReLU(_Activation):
    _fn = "leaky_relu"

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class Mish(_Activation):
    _fn = "mish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LogSigmoid(_Activation):
    _fn = "logsigmoid"


class Softmax(_Activation):
    _fn = "softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class LogSoftmax(_Activation):
    _fn = "log_softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class Softmin(_Activation):
    _fn = "softmin"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


# ============================================================================ issue 12
# Losses and attention.


class NLLLoss(_Loss):
    """``F.nll_loss`` with PyTorch's arguments (``weight``, ``ignore_index``, ``reduction``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.nll_loss(input, target, self.weight, None, self.ignore_index, None,
                          self.reduction)


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: one packed input projection (``in_proj_weight``
    (3E, E), ``in_proj_bias``), ``num_heads`` heads of scaled dot-product attention and
    ``out_proj``; PyTorch's initialisation (Xavier-uniform input projection, zero biases).
    ``forward`` returns ``(attn_output, attn_weights)``, the weights averaged over heads by
    default (``None`` when ``need_weights=False``). A bool ``attn_mask`` or
    ``key_padding_mask`` marks the pairs that may NOT attend (PyTorch's convention here,
    the opposite of ``scaled_dot_product_attention``'s).

    >>> mha = dg.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> out, weights = mha(x, x, x)
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: Any = None,
                 vdim: Any = None, batch_first: bool = False) -> None:
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or \
                vdim not in (None, embed_dim):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and "
                                      "kdim/vdim other than embed_dim are not supported")
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        # Xavier uniform over the packed (3E, E) matrix, as PyTorch's _reset_parameters.
        bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))
        self.in_proj_weight = Parameter(_uniform((3 * embed_dim, embed_dim), bound))
        if bias:
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, np.float32))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(embed_dim, np.float32))

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask`"
                               " to create this mask.")
        batched = query.ndim == 3
        if not batched:  # (L, E): one sequence
            query, key, value = (t.reshape(t.shape[0], 1, t.shape[1])
                                 for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape(1, -1)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        # Now (L, N, E), PyTorch's own layout.
        e, h, d = self.embed_dim, self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        parts = [F.linear(t, w[i * e:(i + 1) * e], None if b is None else b[i * e:(i + 1) * e])
                 for i, t in enumerate((query, key, value))]
        n_l, n = query.shape[0], query.shape[1]
        n_s = key.shape[0]
        # (T, N, E) -> (N, H, T, D)
        q, k, v = (p.reshape(p.shape[0], n, h, d).permute(1, 2, 0, 3) for p in parts)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = _additive_mask(attn_mask, scores.dtype)
        if mask is not None:
            if mask.ndim == 3:  # (N * H, L, S)
                mask = mask.reshape(n, h, n_l, n_s)
            scores = scores + mask
        if key_padding_mask is not None:
            pad = _additive_mask(key_padding_mask, scores.dtype)
            scores = scores + pad.reshape(n, 1, 1, n_s)
        attn = F.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            attn = F.dropout(attn, self.dropout)
        out = (attn @ v).permute(2, 0, 1, 3).reshape(n_l, n, e)
        out = self.out_proj(out)
        if not batched:
            out = out.reshape(n_l, e)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = attn.mean(1) if average_attn_weights else attn
        if not batched:
            weights = weights.reshape(weights.shape[1:])
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _additive_mask(mask: Any, dtype: Any) -> Any:
    """A bool mask (True: may not attend) as 0 / -inf; a float mask as it is."""
    if mask is None:
        return None
    from ..ops import elementwise as E

    if mask.dtype == np.bool_:
        return E.where(mask, -math.inf, np.zeros((), dtype))
    return mask


class L1Loss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class KLDivLoss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SoftMarginLoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
