"""Packed sequences (`dg.nn.utils.rnn`) and the recurrent layers over them: values and
gradients equal torch's (float64 goldens recorded by record_packed_goldens.py), the
helpers' errors, and a compiled step over a packed batch equals the eager one."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn.utils import rnn as rnn_utils

from .packed_cases import cases, name, run

GOLD = np.load(Path(__file__).with_name("packed_goldens.npz"))


@pytest.mark.parametrize("case", cases(), ids=name)
def test_packed_layers_match_torch(case: dict) -> None:
    """pack_padded_sequence, a 2-layer RNN/GRU/LSTM over the packed batch (state given
    in the user's batch order), pad_packed_sequence, and backward: every value and gradient
    equals torch's."""
    key = name(case) + "/"
    want = {k[len(key):]: GOLD[k] for k in GOLD.files if k.startswith(key)}
    weights = {k[6:]: v for k, v in want.items() if k.startswith("param.")}
    seed = cases().index(case)
    got = run(dg, case, seed, weights)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        dg.testing.assert_close(got[k], v, rtol=1e-10, atol=1e-12, equal_nan=True,
                                check_dtype=False, msg=k)


def test_pad_and_pack_sequence_helpers() -> None:
    a, b, c = dg.ones(3, 2), 2 * dg.ones(1, 2), 3 * dg.ones(2, 2)
    padded = rnn_utils.pad_sequence([a, b, c], batch_first=True, padding_value=-1.0)
    assert padded.shape == (3, 3, 2)
    assert padded[:, :, 0].tolist() == [[1, 1, 1], [2, -1, -1], [3, 3, -1]]
    left = rnn_utils.pad_sequence([a, b], padding_side="left")
    assert left[:, 1, 0].tolist() == [0, 0, 2]
    packed = rnn_utils.pack_sequence([a, b, c], enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 2, 1]
    assert packed.sorted_indices.tolist() == [0, 2, 1]
    assert packed.unsorted_indices.tolist() == [0, 2, 1]
    assert packed.data[:, 0].tolist() == [1, 3, 2, 1, 3, 1]
    back = rnn_utils.unpack_sequence(packed)
    assert [t.shape for t in back] == [(3, 2), (1, 2), (2, 2)]
    assert back[2].tolist() == c.tolist()
    assert isinstance(packed, rnn_utils.PackedSequence) and packed.to(dg.float64).data.dtype \
        == np.float64


def test_packing_errors() -> None:
    x = dg.zeros(4, 3, 2)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(x, [1, 3, 2])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        rnn_utils.pack_padded_sequence(x, [3, 2, 0])
    with pytest.raises(RuntimeError, match="equal to batch_size"):
        rnn_utils.pack_padded_sequence(x, [3, 2])
    with pytest.raises(RuntimeError, match="exceeds"):
        rnn_utils.pack_padded_sequence(x, [5, 2, 1])
    packed = rnn_utils.pack_padded_sequence(x, [4, 2, 1])
    with pytest.raises(ValueError, match="total_length to be at least"):
        rnn_utils.pad_packed_sequence(packed, total_length=3)
    with pytest.raises(ValueError, match="padding_side"):
        rnn_utils.pad_sequence([x[0]], padding_side="middle")


def test_compiled_step_over_a_packed_batch_equals_eager() -> None:
    """An LSTM over a packed batch inside `dg.compile`: the lengths are a Python list (the
    batch sizes the layer loops over must be concrete), one trace, eager's values."""
    dg.manual_seed(0)
    lstm = dg.nn.LSTM(3, 4, bidirectional=True)
    head = dg.nn.Linear(8, 1)
    lengths = [2, 4, 1]

    def step(x):
        packed = rnn_utils.pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, (h_n, _) = lstm(packed)
        padded, _ = rnn_utils.pad_packed_sequence(out)
        loss = head(padded).pow(2).mean() + h_n.sum()
        loss.backward()
        return loss

    x = dg.tensor(np.random.default_rng(1).standard_normal((4, 3, 3)).astype(np.float32))
    params = list(lstm.parameters())
    eager = step(x).item()
    eager_grads = [p.grad.numpy().copy() for p in params]
    lstm.zero_grad()
    compiled = dg.compile(step)
    assert compiled(x).item() == pytest.approx(eager, rel=1e-5)
    assert compiled.stats.traces == 1 and compiled.stats.kernels >= 1
    for p, g in zip(params, eager_grads):
        dg.testing.assert_close(p.grad.numpy(), g, rtol=1e-4, atol=1e-6, equal_nan=True,
                                check_dtype=False)


def test_traced_lengths_are_refused_with_the_way_out() -> None:
    with pytest.raises(dg.errors.EagerOnlyError, match="lengths` must be concrete"):
        dg.trace(lambda x, n: rnn_utils.pack_padded_sequence(x, n).data,
                 dg.zeros(3, 2, 1), dg.tensor([3, 2]))


def test_compiled_step_with_lengths_as_an_argument_is_keyed_by_their_values() -> None:
    """A collate_fn's lengths tensor passed to the compiled step: the call compiles, keyed
    by the lengths' values, with eager's values and no warning."""
    dg.manual_seed(0)
    gru = dg.nn.GRU(2, 3, batch_first=True)

    def step(x, n):
        out, _ = rnn_utils.pad_packed_sequence(
            gru(rnn_utils.pack_padded_sequence(x, n, batch_first=True,
                                               enforce_sorted=False))[0], batch_first=True)
        return out.sum()

    x, n = dg.ones(3, 4, 2), dg.tensor([2, 4, 1])
    f = dg.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = f(x, n)
    assert got.item() == pytest.approx(step(x, n).item(), rel=1e-6)
    assert f.stats.traces == 1
