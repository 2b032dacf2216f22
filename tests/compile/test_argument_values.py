"""A small integer tensor argument whose values the trace reads as numbers (a packed
batch's lengths, which decide its shapes) keys the entry by those values, as torch
guards a tensor it reads with ``.tolist()``: the same lengths run compiled, other lengths
trace again; lengths computed inside the function still run eagerly, with a warning."""

from __future__ import annotations

import warnings

import pytest

import dualgraph as dg

from .conftest import MODES, traces


def _model():
    dg.manual_seed(0)
    return dg.nn.GRU(3, 4, batch_first=True)


def _step(gru):
    def step(x, lengths):
        packed = dg.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                      enforce_sorted=False)
        _, h = gru(packed)
        return h.sum()

    return step


@pytest.mark.parametrize("runner", MODES, indirect=True)
def test_packed_lengths_argument_runs_compiled_keyed_by_its_values(runner):
    gru = _model()
    step = _step(gru)
    f = runner(step)
    x = dg.tensor([[[0.1 * (i + j + k) for k in range(3)] for j in range(3)]
                   for i in range(2)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for lengths in ([3, 2], [3, 2], [2, 3], [3, 2]):
            dg.testing.assert_close(f(x, dg.tensor(lengths)), step(x, dg.tensor(lengths)))
    if runner.mode != "eager":
        assert traces(f) == 2, f.stats.retrace_reasons
        assert "values of argument 1" in f.stats.retrace_reasons[0]
        assert f.stats.tier0_calls + f.stats.tier1_calls == 4


def test_lengths_computed_inside_run_eagerly_with_a_warning():
    gru = _model()

    def step(x, mask):
        lengths = mask.sum(1)
        packed = dg.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        return gru(packed)[1].sum()

    x, mask = dg.ones(2, 3, 3), dg.tensor([[1, 1, 1], [1, 1, 0]])
    with pytest.warns(RuntimeWarning, match="must be concrete"):
        got = dg.compile(step)(x, mask)
    dg.testing.assert_close(got, step(x, mask))
