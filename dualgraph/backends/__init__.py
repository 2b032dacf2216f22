"""`dg.backends`: PyTorch's backend switches, accepted as a CPU-only build has them.

Scripts set ``torch.backends.cudnn.benchmark = True`` (often after
``import torch.backends.cudnn as cudnn``) or ``torch.backends.cuda.matmul.allow_tf32 =
True`` and ask ``torch.backends.mps.is_available()``. Each backend is a submodule, as in
PyTorch; its flags can be read and set and change nothing (there is no cuDNN, CUDA or
MPS; dualgraph's float32 matmuls are always full float32), and the availability queries
answer False, as on a CPU build of PyTorch.

>>> dg.backends.cudnn.benchmark = True
>>> dg.backends.mps.is_available()
False
"""

from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]
