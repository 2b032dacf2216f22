"""`dg.nn.parallel`: PyTorch's data-parallel wrappers, as on a machine without GPUs.

`DataParallel` without devices is what PyTorch gives there: the wrapped module runs
as it is (its state dict keys gain the ``module.`` prefix, as in PyTorch). There is no
process group (``torch.distributed``), so `DistributedDataParallel` raises on
construction, as PyTorch does before ``init_process_group``.
"""

from __future__ import annotations

from typing import Any

from .modules import Module


def _no_devices(device_ids: Any, output_device: Any) -> None:
    ids = [] if device_ids is None else list(device_ids)
    if ids or output_device is not None:
        raise RuntimeError(f"DataParallel: devices {ids or [output_device]} are not available: "
                           "dualgraph runs on the CPU only; leave device_ids out")


class DataParallel(Module):
    """Runs ``module`` itself (there are no GPUs to split the batch over).

    >>> net = dg.nn.parallel.DataParallel(dg.nn.Linear(2, 1))
    >>> list(net.state_dict())
    ['module.weight', 'module.bias']
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0) -> None:
        super().__init__()
        _no_devices(device_ids, output_device)
        self.module = module
        self.device_ids: list = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs: Any, device_ids: Any = None,
                  output_device: Any = None, dim: int = 0, module_kwargs: Any = None) -> Any:
    """``module(*inputs)``: the functional form of `DataParallel`."""
    _no_devices(device_ids, output_device)
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))


class DistributedDataParallel(Module):
    """Needs a distributed process group, which dualgraph does not have: constructing one
    raises `RuntimeError` (PyTorch raises too until ``init_process_group`` is called)."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("DistributedDataParallel: dualgraph has no distributed process "
                           "group (torch.distributed); train the module itself, or wrap it "
                           "in DataParallel, which runs it as it is")


__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
