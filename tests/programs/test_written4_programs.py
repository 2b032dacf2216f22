"""A compiled step packing by a lengths tensor argument (the ``written4`` set's packed_rnn and
yunjey_birnn programs, run by ``test_written_programs.py``) traces once and gives no warning."""

from __future__ import annotations

import warnings

import dualgraph as dg


def test_packed_lengths_argument_compiles() -> None:
    gru = dg.nn.GRU(3, 4, batch_first=True)

    def step(x, lengths):
        packed = dg.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        _, h = gru(packed)
        return h.sum()

    f = dg.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        f(dg.ones(2, 3, 3), dg.tensor([3, 2]))
    assert f.stats.traces == 1
