"""The padding modules, channel dropout, PReLU, the shrinking activations,
ConvTranspose1d and the parameter containers: values and gradients equal torch's (float64
goldens recorded by record_extra_goldens.py), and the behaviours torch documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg

from .._support.recording import case_arrays
from .extra_cases import BAGS, CASES, run, run_bag

GOLD = np.load(Path(__file__).with_name("extra_goldens.npz"))


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_matches_torch(i: int) -> None:
    name = CASES[i][0]
    want = case_arrays(GOLD, name)
    weights = {k[6:]: v for k, v in want.items() if k.startswith("param.")}
    got = run(dg, i, weights)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        dg.testing.assert_close(got[k], v, rtol=1e-10, atol=1e-12, equal_nan=True,
                                check_dtype=False, msg=k)


def test_channel_dropout_zeroes_whole_channels() -> None:
    dg.manual_seed(0)
    x = dg.ones(4, 8, 3, 3)
    y = dg.nn.Dropout2d(0.5)(x).numpy()
    per_channel = y.reshape(4, 8, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(axis=2) == per_channel.max(axis=2)).all()  # whole channels
    assert 0 < (per_channel[:, :, 0] == 0).sum() < 32
    assert dg.nn.functional.dropout1d(dg.ones(2, 3, 4), 0.5, training=False).tolist() == \
        dg.ones(2, 3, 4).tolist()
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):  # (N, C) is accepted
        dg.nn.Dropout2d()(dg.ones(2))


def test_parameter_containers_register_their_parameters() -> None:
    class Net(dg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ws = dg.nn.ParameterList([dg.nn.Parameter(dg.ones(2)) for _ in range(2)])
            self.ws.append(dg.zeros(3))  # a tensor is wrapped as a parameter
            self.named = dg.nn.ParameterDict({"scale": dg.nn.Parameter(dg.ones(1))})
            self.named["shift"] = dg.zeros(1)

    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "ws.0", "ws.1", "ws.2", "named.scale", "named.shift"]
    assert isinstance(net.ws[2], dg.nn.Parameter) and net.ws[-1].shape == (3,)
    assert len(net.ws) == 3 and len(net.ws[1:]) == 2 and [p.shape for p in net.ws][0] == (2,)
    assert list(net.named) == ["scale", "shift"] and "scale" in net.named
    assert list(net.state_dict()) == ["ws.0", "ws.1", "ws.2", "named.scale", "named.shift"]
    assert net.named.pop("shift").shape == (1,) and list(net.named.keys()) == ["scale"]
    with pytest.raises(IndexError):
        net.ws[3]


def test_module_reprs_and_errors() -> None:
    assert repr(dg.nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert repr(dg.nn.ConstantPad1d(2, 1.5)) == "ConstantPad1d(padding=(2, 2), value=1.5)"
    assert repr(dg.nn.PReLU(3)) == "PReLU(num_parameters=3)"
    assert dg.nn.ConvTranspose1d(2, 3, 4).weight.shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):
        dg.nn.PReLU(4)(dg.ones(2, 3))
    with pytest.raises(ValueError, match="must be an int or a 4-tuple"):
        dg.nn.ReflectionPad2d((1, 2))


@pytest.mark.parametrize("i", range(len(BAGS)), ids=[b[0] for b in BAGS])
def test_embedding_bag_matches_torch(i: int) -> None:
    key = f"bag-{BAGS[i][0]}/"
    want = {k[len(key):]: GOLD[k] for k in GOLD.files if k.startswith(key)}
    got = run_bag(dg, i, want["weight"])
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        dg.testing.assert_close(got[k], v, rtol=1e-10, atol=1e-12, equal_nan=True,
                                check_dtype=False, msg=k)


def test_embedding_keywords_and_from_pretrained() -> None:
    e = dg.nn.Embedding(5, 3, sparse=False, dtype=dg.float64)
    assert e.weight.dtype == np.float64
    w = dg.tensor(np.arange(6.0).reshape(3, 2))
    frozen = dg.nn.Embedding.from_pretrained(w)
    assert not frozen.weight.requires_grad and frozen(dg.tensor([2])).tolist() == [[4.0, 5.0]]
    assert dg.nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    # sparse=True is accepted: the gradient is the same, held dense.
    e = dg.nn.Embedding(5, 3, sparse=True)
    e(dg.tensor([1, 1, 3])).sum().backward()
    assert e.sparse and e.weight.grad.sum(1).tolist() == [0.0, 6.0, 0.0, 3.0, 0.0]
