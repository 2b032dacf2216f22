"""Normalisation layers: `LayerNorm`, `GroupNorm`, batch and instance norm."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import default_float
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from .. import functional as F
from .module import Module, Parameter, accepts_device_dtype

__all__ = [
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "LayerNorm", "LocalResponseNorm", "RMSNorm", "SyncBatchNorm",
]


def _norm_shape(normalized_shape: Any) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(d) for d in normalized_shape)


def _affine_parameters(module: Module, shape: Any, affine: bool, bias: bool) -> None:
    """A learnt ``weight`` (ones) and ``bias`` (zeros) of ``shape`` when ``affine`` (no
    bias when not ``bias``); parameters registered as None otherwise."""
    if affine:
        module.weight = Parameter(np.ones(shape, default_float()))
        if bias:
            module.bias = Parameter(np.zeros(shape, default_float()))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


@accepts_device_dtype
def _reset_affine(module: Module) -> None:
    """Weight ones and bias zeros again, where the module has them."""
    from .. import init

    if getattr(module, "weight", None) is not None:
        init.ones_(module.weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)


@accepts_device_dtype
class LayerNorm(Module):
    """`F.layer_norm` over the last dims ``normalized_shape``, with a learnt elementwise
    ``weight`` (ones) and ``bias`` (zeros) when ``elementwise_affine``.

    >>> ln = dg.nn.LayerNorm(128)
    """

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True) -> None:
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias)

    def reset_parameters(self) -> None:
        """Weight ones and bias zeros again."""
        _reset_affine(self)

    def forward(self, x: Any) -> Any:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


@accepts_device_dtype
class GroupNorm(Module):
    """`F.group_norm` with ``num_groups`` groups of ``num_channels`` channels and a learnt
    per-channel affine when ``affine``."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, num_channels, affine, bias)

    def reset_parameters(self) -> None:
        """Weight ones and bias zeros again."""
        _reset_affine(self)

    def forward(self, x: Any) -> Any:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class _NormBase(Module):
    """Batch and instance norm: per-channel ``weight``/``bias`` when ``affine``, and the
    buffers ``running_mean``, ``running_var``, ``num_batches_tracked`` when
    ``track_running_stats``."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, num_features, affine, bias)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, default_float())))
            self.register_buffer("running_var", Tensor(np.ones(num_features, default_float())))
            self.register_buffer("num_batches_tracked", Tensor(np.zeros((), np.int64)))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1.0)
                if self.bias is not None:
                    self.bias.zero_()

    def _check_input_dim(self, x: Any) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims: tuple = ()

    def _check_input_dim(self, x: Any) -> None:
        if x.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {x.ndim}D input)")

    def forward(self, x: Any) -> Any:
        self._check_input_dim(x)
        factor: Any = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                # A cumulative average: a tensor, so a compiled step reads the count at run
                # time instead of baking it into the trace.
                factor = 1.0 / self.num_batches_tracked.to(np.float64)
        training = self.training or (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if use_stats else None,
                            self.running_var if use_stats else None, self.weight, self.bias,
                            training, factor, self.eps)


@accepts_device_dtype
class BatchNorm1d(_BatchNorm):
    """Batch norm of ``(N, C)`` or ``(N, C, L)`` input (`F.batch_norm`): batch statistics
    in training, which also update the running ones; the running ones in eval.

    >>> bn = dg.nn.BatchNorm1d(16)
    """

    _dims = (2, 3)


@accepts_device_dtype
class BatchNorm2d(_BatchNorm):
    """Batch norm of ``(N, C, H, W)`` input; see `BatchNorm1d`."""

    _dims = (4,)


@accepts_device_dtype
class BatchNorm3d(_BatchNorm):
    """Batch norm of ``(N, C, D, H, W)`` input; see `BatchNorm1d`."""

    _dims = (5,)


@accepts_device_dtype
class SyncBatchNorm(_BatchNorm):
    """Batch norm of input with a channel dimension (2-D or more). Statistics are
    synchronized across processes only in a distributed run; without one (as on a CPU
    build's single process) it is `BatchNorm2d`'s computation over the local batch.

    >>> model = dg.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, x: Any) -> None:
        if x.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {x.ndim}D input)")

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every batch norm layer in it replaced by a `SyncBatchNorm` that
        shares its parameters and buffers (the module itself when it is one)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            # The same tensors, not copies: an optimizer built over the old parameters
            # keeps training the converted model, as in PyTorch.
            for name in ("weight", "bias"):
                out._parameters[name] = module._parameters.get(name)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                out._buffers[name] = module._buffers.get(name)
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class _InstanceNorm(_NormBase):
    _spatial: int = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, bias=bias)

    def forward(self, x: Any) -> Any:
        if x.ndim not in (self._spatial + 1, self._spatial + 2):
            raise ValueError(f"expected {self._spatial + 1}D or {self._spatial + 2}D input "
                             f"(got {x.ndim}D input)")
        unbatched = x.ndim == self._spatial + 1
        if unbatched:
            x = x.reshape((1,) + tuple(x.shape))
        out = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats, self.momentum or 0.0, self.eps)
        return out.reshape(tuple(out.shape)[1:]) if unbatched else out


@accepts_device_dtype
class InstanceNorm1d(_InstanceNorm):
    """Instance norm of ``(N, C, L)`` (or unbatched ``(C, L)``) input: each channel of each
    sample over its length (`F.instance_norm`)."""

    _spatial = 1


@accepts_device_dtype
class InstanceNorm2d(_InstanceNorm):
    """Instance norm of ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) input."""

    _spatial = 2


@accepts_device_dtype
class InstanceNorm3d(_InstanceNorm):
    """Instance norm of ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``) input."""

    _spatial = 3


class RMSNorm(Module):
    """`F.rms_norm` over the last ``len(normalized_shape)`` dims, with a learnable
    ``weight`` (ones) when ``elementwise_affine``. ``nn.RMSNorm(512)``"""

    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            dt = default_float() if dtype is None else np.dtype(dtype)
            self.weight = Parameter(np.ones(self.normalized_shape, dt))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        """Weight ones and bias zeros again."""
        _reset_affine(self)

    def forward(self, x: Any) -> Any:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """`F.local_response_norm` across channels. ``nn.LocalResponseNorm(2)``"""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x: Any) -> Any:
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
