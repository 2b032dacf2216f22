"""``torch.backends.cuda`` without CUDA: settable flags that change nothing."""

from __future__ import annotations

from .flags import Flags


def is_built() -> bool:
    return False


# torch.backends.cuda.matmul.allow_tf32 and friends.
matmul = Flags("dg.backends.cuda.matmul", allow_tf32=False,
               allow_fp16_reduced_precision_reduction=True,
               allow_bf16_reduced_precision_reduction=True)


def flash_sdp_enabled() -> bool:
    return False


def mem_efficient_sdp_enabled() -> bool:
    return False


def math_sdp_enabled() -> bool:
    return True


def enable_flash_sdp(enabled: bool) -> None:
    """Accepted: dualgraph's attention is always the math kernel."""


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Accepted: dualgraph's attention is always the math kernel."""
