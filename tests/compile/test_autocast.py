"""CPU autocast (``dg.autocast("cpu")``, ``dg.cpu.amp.autocast``): the lower-precision ops
round to bfloat16 or float16 (emulated in float32), eagerly and compiled, with torch's
results (goldens recorded from torch by ``record_autocast_goldens.py``); the region is part
of a compiled function's signature."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops.precision import reduce_precision

from .autocast_cases import run

GOLDENS = json.loads(Path(__file__).with_name("autocast_goldens.json").read_text())["runs"]
BF16_ULP = 2.0 ** -7


def _counted_compile() -> tuple:
    made: list = []

    def wrap(fn):
        made.append(dg.compile(fn))
        return made[-1]

    return wrap, made


@pytest.mark.parametrize("compiled", [False, True])
def test_bfloat16_training_equals_torch(compiled: bool) -> None:
    wrap, made = _counted_compile()
    got = run(dg, "bfloat16", wrap if compiled else None)
    for model in ("mlp", "cnn"):
        want = GOLDENS["bfloat16"][model]
        dg.testing.assert_close(got[model]["losses"], want["losses"], rtol=1e-5, atol=0.0,
                                check_dtype=False)
        # Lower-precision values: equal up to one bfloat16 rounding step (a float32 sum
        # accumulated in another order may round to the neighbour).
        dg.testing.assert_close(got[model]["logits"], want["logits"], rtol=BF16_ULP, atol=0.0,
                                check_dtype=False)
        for k, g in want["grads"].items():
            dg.testing.assert_close(got[model]["grads"][k], g, rtol=BF16_ULP, atol=1e-6,
                                    check_dtype=False)
    assert [f.stats.traces for f in made] == ([1, 1] if compiled else [])


def test_float16_training_equals_torch_where_torch_rounds_once() -> None:
    """float16: the MLP equals torch; torch's float16 convolution backward on the CPU rounds
    partial sums (its weight gradient differs from one rounding by up to an ulp), so for the
    CNN only the first loss, before any update, is torch's."""
    got = run(dg, "float16")
    want = GOLDENS["float16"]
    dg.testing.assert_close(got["mlp"]["losses"], want["mlp"]["losses"], rtol=1e-5, atol=0.0,
                            check_dtype=False)
    dg.testing.assert_close(got["cnn"]["losses"][0], want["cnn"]["losses"][0], rtol=1e-6,
                            atol=0.0, check_dtype=False)


def test_region_is_part_of_the_signature_and_nests() -> None:
    w = dg.full((3, 1), 1.0 + 2.0 ** -9)
    f = dg.compile(lambda x: x @ w)
    x = dg.ones(2, 3)
    exact, rounded = [[3.005859375]] * 2, [[3.0]] * 2
    half = exact  # 1 + 2**-9 is a float16 value
    assert f(x).tolist() == exact  # traced outside a region
    with dg.autocast("cpu"):
        assert dg.is_autocast_enabled("cpu") and not dg.is_autocast_enabled()
        assert f(x).tolist() == (x @ w).tolist() == rounded
        with dg.autocast("cpu", enabled=False):
            assert f(x).tolist() == exact
        with dg.cpu.amp.autocast(dtype=dg.float16):
            assert dg.get_autocast_dtype("cpu") == dg.float16
            assert f(x).tolist() == half
        assert f(x).tolist() == rounded
    assert not dg.is_autocast_enabled("cpu")
    assert f(x).tolist() == exact
    assert f.stats.traces == 3  # none, bfloat16, float16: each region its own entry
    assert "bfloat16 autocast region instead of no autocast region" in \
        f.stats.retrace_reasons[0]


def test_decorator_float64_and_other_ops() -> None:
    @dg.autocast("cpu")
    def product(a: dg.Tensor, b: dg.Tensor) -> dg.Tensor:
        return a @ b

    w = dg.full((3, 1), 1.0 + 2.0 ** -9)
    assert product(dg.ones(2, 3), w).tolist() == [[3.0], [3.0]]
    assert not dg.is_autocast_enabled("cpu")
    # float64 is not cast (PyTorch's CPU autocast casts float32 only), nor are the ops
    # outside the lower-precision list.
    w64 = w.double()
    assert product(dg.ones(2, 3, dtype=dg.float64), w64).tolist() == [[3.005859375]] * 2
    with dg.autocast("cpu"):
        assert (w * 3).tolist() == [[3.005859375]] * 3
    with pytest.raises(RuntimeError, match="not supported"):
        dg.autocast("cpu", dtype=dg.float64)
    with pytest.warns(UserWarning, match="cuda"):
        dg.autocast("cuda")


def test_reduce_precision_rounds_as_a_cast_does() -> None:
    x = dg.tensor([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.4e38, 1e-40, 65520.0, -0.0,
                   float("nan")], requires_grad=True)
    bf = reduce_precision(x, 7, 8)
    want = [1.0, 1.015625, np.inf, 9.183549615799121e-41, 65536.0, -0.0, np.nan]
    dg.testing.assert_close(bf.detach().numpy(), np.array(want, np.float32), rtol=0.0,
                            atol=0.0, equal_nan=True)
    assert bf.grad_fn.name() == "ToCopyBackward0"
    # the gradient is held in the format too
    bf.backward(dg.full((7,), 1.0 + 2.0 ** -9))
    dg.testing.assert_close(x.grad.numpy(), np.ones(7, np.float32), rtol=0.0, atol=0.0)
    half = reduce_precision(dg.tensor([65519.0, 65520.0, 3e-8]), 10, 5)
    dg.testing.assert_close(half.numpy(), np.array([65504.0, np.inf, 2.0 ** -24], np.float32),
                            rtol=0.0, atol=0.0)
