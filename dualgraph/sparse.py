"""``torch.sparse``'s COO entry points over dense tensors.

dualgraph has no sparse layout: `sparse_coo_tensor` builds the dense tensor that the
indices and values stand for (duplicate indices summed, as coalescing sums them), so the
programs that build a sparse adjacency and multiply by it (``torch.spmm``,
``torch.sparse.mm``) get PyTorch's values and gradients, at dense cost. As
``Embedding(sparse=True)`` gives a densified gradient, the result reports
``is_sparse == False``.

    >>> dg.sparse_coo_tensor(dg.tensor([[0, 1, 1], [2, 0, 0]]), dg.tensor([3., 4., 5.]), (2, 3))
    tensor([[0., 0., 3.],
            [9., 0., 0.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import as_dtype, check_device
from .eager.creation import zeros
from .eager.tensor import tensor as _tensor
from .modes import current_trace
from .ops.index import index_put
from .ops.mixin import TensorOps

__all__ = ["mm", "sparse_coo_tensor"]

# ``torch.sparse`` imports torch itself, and published code reaches the package through it
# (``torch.sparse.torch.eye(n)`` builds one-hot targets in CapsNet tutorials): the package
# sets ``torch`` here once it is loaded.
torch: Any = None


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, requires_grad: bool = False,
                      check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> Any:
    """``torch.sparse_coo_tensor``: the dense tensor whose element ``indices[:, k]`` is
    ``values[k]`` (summed over repeated indices), zero elsewhere; ``size`` defaults to the
    smallest that holds the indices, followed by the values' own dimensions."""
    check_device(device, "sparse_coo_tensor()")
    idx = indices if isinstance(indices, TensorOps) else _tensor(indices)
    vals = values if isinstance(values, TensorOps) else _tensor(values)
    if idx.dtype.kind not in "iu" or idx.ndim != 2:
        raise RuntimeError("sparse_coo_tensor: indices must be a 2-D integer tensor of shape "
                           f"(sparse_dim, nnz), got {idx.dtype} of shape {tuple(idx.shape)}")
    sparse_dim, nnz = idx.shape
    if vals.ndim < 1 or vals.shape[0] != nnz:
        raise RuntimeError(f"sparse_coo_tensor: number of dimensions of values ({vals.ndim}) "
                           f"or its first size ({vals.shape[0] if vals.ndim else None}) does "
                           f"not match the number of indices ({nnz})")
    dense_shape = tuple(vals.shape[1:])
    if size is None:
        top = idx.numpy().max(axis=1) + 1 if nnz else np.zeros(sparse_dim, int)
        size = tuple(int(n) for n in top) + dense_shape
    size = tuple(int(n) for n in size)
    if size[sparse_dim:] != dense_shape or len(size) != sparse_dim + len(dense_shape):
        raise RuntimeError(f"sparse_coo_tensor: size {size} is inconsistent with indices of "
                           f"{sparse_dim} sparse dims and values of shape {tuple(vals.shape)}")
    # Traced indices are checked by the index write itself.
    if nnz and current_trace() is None:
        top = idx.numpy()
        bad = [d for d in range(sparse_dim)
               if top[d].min() < 0 or top[d].max() >= size[d]]
        if bad:
            d = bad[0]
            raise RuntimeError(f"sparse_coo_tensor: size is inconsistent with indices: for "
                               f"dim {d}, size is {size[d]} but found index "
                               f"{int(top[d].max() if top[d].max() >= size[d] else top[d].min())}")
    out_dtype = as_dtype(dtype) if dtype is not None else vals.dtype
    if vals.dtype != out_dtype:
        vals = vals.to(out_dtype)
    out = index_put(zeros(size, dtype=out_dtype), tuple(idx[d] for d in range(sparse_dim)),
                    vals, accumulate=True)
    if requires_grad:
        out = out.detach().requires_grad_(True)
    return out


def mm(mat1: Any, mat2: Any) -> Any:
    """``torch.sparse.mm``: the matrix product (both operands are dense here)."""
    return mat1.mm(mat2)
