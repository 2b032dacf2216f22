"""Cases of `tests/nn/test_porting_goldens.py`: functional forms ported programs use,
written the same way for torch and dualgraph (``lib`` is either module), with the argument
specs of `functional_cases` (``("f", shape)``: normal float64 that requires grad).
`record_porting_goldens.py` records torch's values and gradients."""

from __future__ import annotations

import numpy as np

from .functional_cases import _arg, outputs_and_grads


def _bicubic(**kw):
    return lambda lib, x: lib.nn.functional.interpolate(x, mode="bicubic", **kw)


def _reflection(mode, align_corners):
    return lambda lib, x, g: lib.nn.functional.grid_sample(
        x, g * 2.5, mode=mode, padding_mode="reflection", align_corners=align_corners)


CASES = [
    ("bicubic-size", _bicubic(size=(3, 11), align_corners=False), [("f", (1, 2, 5, 7))]),
    ("bicubic-size-corners", _bicubic(size=(3, 11), align_corners=True),
     [("f", (1, 2, 5, 7))]),
    ("bicubic-scale", _bicubic(scale_factor=2.5), [("f", (2, 1, 4, 4))]),
    ("bicubic-scale-corners", _bicubic(scale_factor=2, align_corners=True),
     [("f", (2, 1, 4, 3))]),
    ("bicubic-down-uneven", _bicubic(scale_factor=(0.5, 1.7)), [("f", (1, 1, 6, 5))]),
    ("bicubic-one-pixel", _bicubic(size=(4, 2)), [("f", (1, 1, 1, 3))]),
    ("upsample-bicubic", lambda lib, x: lib.nn.Upsample(scale_factor=3, mode="bicubic")(x),
     [("f", (1, 2, 2, 2))]),
    # grids reaching out to about 2.5 image widths: reflected more than once
    ("grid_sample-reflection", _reflection("bilinear", False), [("f", (2, 3, 4, 5)),
                                                                 ("g", (2, 3, 6, 2))]),
    ("grid_sample-reflection-corners", _reflection("bilinear", True),
     [("f", (1, 2, 3, 4)), ("g", (1, 5, 4, 2))]),
    ("grid_sample-reflection-nearest", _reflection("nearest", False),
     [("f", (1, 2, 4, 3)), ("g", (1, 4, 4, 2))]),
    ("grid_sample-reflection-one-row", _reflection("bilinear", False),
     [("f", (1, 1, 1, 4)), ("g", (1, 3, 3, 2))]),
]


def arguments(lib, i: int) -> list:
    rng = np.random.default_rng(3000 + i)
    return [_arg(lib, s, rng) for s in CASES[i][2]]


def run(lib, i: int) -> dict:
    """Case ``i``'s output and the gradients of its float arguments under a fixed
    cotangent."""
    return outputs_and_grads(lib, CASES[i][1], arguments(lib, i), 4000 + i)
