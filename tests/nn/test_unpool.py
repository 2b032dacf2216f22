"""`max_pool3d(return_indices=True)` (and `MaxPool3d`) and max unpooling in 1, 2 and 3
dims: indices and unpooled volumes equal torch's (goldens recorded by
record_pool_goldens.py, ties included), gradients, errors, and compiled equals eager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.testing import gradcheck

from .record_pool_goldens import CASES, inputs

GOLD = np.load(Path(__file__).with_name("pool_goldens.npz"))


@pytest.mark.parametrize("i", range(len(CASES)))
def test_max_pool3d_indices_match_torch(i: int) -> None:
    kw = CASES[i][1]
    for j, x in enumerate(inputs(i)):
        values, index = F.max_pool3d(dg.tensor(x), return_indices=True, **kw)
        np.testing.assert_array_equal(values.numpy(), GOLD[f"{i}/{j}/values"])
        assert index.dtype == np.int64
        np.testing.assert_array_equal(index.numpy(), GOLD[f"{i}/{j}/indices"])
        np.testing.assert_array_equal(F.max_pool3d(dg.tensor(x), **kw).numpy(),
                                      GOLD[f"{i}/{j}/values"])
        if f"{i}/{j}/unpooled" in GOLD.files:
            out = F.max_unpool3d(values, index, kw["kernel_size"], kw.get("stride"),
                                 output_size=x.shape[-3:])
            np.testing.assert_array_equal(out.numpy(), GOLD[f"{i}/{j}/unpooled"])


def test_modules_round_trip_in_one_two_and_three_dims() -> None:
    x = dg.tensor(np.random.default_rng(0).standard_normal((2, 3, 4, 4, 6)))
    for pool, unpool, inp in [
        (dg.nn.MaxPool3d(2, return_indices=True), dg.nn.MaxUnpool3d(2), x),
        (dg.nn.MaxPool2d(2, return_indices=True), dg.nn.MaxUnpool2d(2), x[:, :, 0]),
        (dg.nn.MaxPool1d(2, return_indices=True), dg.nn.MaxUnpool1d(2), x[:, :, 0, 0]),
    ]:
        values, index = pool(inp)
        back = unpool(values, index)
        assert back.shape == inp.shape
        # Every maximum is back at its place, everything else is zero.
        kept = back.numpy() != 0
        assert kept.sum() == values.numel()
        np.testing.assert_array_equal(back.numpy()[kept], inp.numpy()[kept])
    assert repr(dg.nn.MaxUnpool3d(2)) == "MaxUnpool3d(kernel_size=2, stride=2, padding=0)"


def test_max_pool3d_with_indices_gradient() -> None:
    x = dg.tensor(np.random.default_rng(1).standard_normal((1, 2, 4, 3, 3)),
                  requires_grad=True)
    assert gradcheck(lambda t: F.max_pool3d(t, 2, stride=1, return_indices=True)[0], x)
    assert gradcheck(lambda t: F.max_unpool3d(*F.max_pool3d(t, 2, return_indices=True), 2,
                                              output_size=(4, 3, 3)), x)


def test_unpool_errors() -> None:
    values, index = F.max_pool3d(dg.randn(1, 1, 5, 6, 7), 2, return_indices=True)
    with pytest.raises(RuntimeError, match="Found an invalid max index"):
        F.max_unpool3d(values, index, 2)
    with pytest.raises(ValueError, match=r"invalid output_size .*dim 0 must be between 2 and 6"):
        F.max_unpool3d(values, index, 2, output_size=(7, 6, 7))
    with pytest.raises(RuntimeError, match="shape of indices"):
        F.max_unpool3d(values, index[..., :1], 2)
    with pytest.raises(RuntimeError, match="expected a 4-D or 5-D input"):
        F.max_unpool3d(values[0, 0], index[0, 0], 2)


def test_compiled_pool_and_unpool_equal_eager() -> None:
    x = dg.tensor(np.random.default_rng(2).standard_normal((2, 2, 4, 4, 4)).astype(np.float32))

    def f(t):
        values, index = F.max_pool3d(t, (2, 2, 1), stride=(2, 1, 1), return_indices=True)
        return F.max_unpool3d(values * 2, index, (2, 2, 1), (2, 1, 1),
                              output_size=t.shape[-3:]), index

    compiled = dg.compile(f)
    (got, got_index), (want, want_index) = compiled(x), f(x)
    np.testing.assert_array_equal(got_index.numpy(), want_index.numpy())
    dg.testing.assert_close(got.numpy(), want.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    assert compiled.stats.traces == 1 and compiled.stats.tier1_calls == 1
