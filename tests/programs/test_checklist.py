"""The PyTorch surface that ported programs, autograd tutorials and an op suite use
(tests/programs/checklist_cases.py): each name behaves as torch's (goldens recorded from
torch by record_checklist_goldens.py), and what a golden cannot show (random orders,
refused devices and files, compile's signature) is checked here."""

from __future__ import annotations

import io
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .checklist_cases import CASES

GOLD = np.load(Path(__file__).with_name("checklist_goldens.npz"))
NAMES = [name for name, _ in CASES]


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_matches_torch(i: int) -> None:
    name, fn = CASES[i]
    want = {k[len(name) + 1:]: GOLD[k] for k in GOLD.files if k.startswith(name + "/")}
    dg.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations torch also warns of
        got = fn(dg)
    assert sorted(got) == sorted(want), name
    for k, v in want.items():
        g = np.asarray(got[k])
        if v.dtype.kind in "fc":
            assert_close(g, v, rtol=1e-9, atol=1e-11, msg=f"{name}: {k}")
        else:
            assert g.shape == v.shape and (g == v).all(), f"{name}: {k}: {g!r} != {v!r}"


def test_loader_shuffles_with_its_generator() -> None:
    data = dg.utils.data
    ds = data.TensorDataset(dg.arange(10))

    def order(seed: int, **kw: object) -> list:
        g = dg.Generator().manual_seed(seed)
        return [int(v) for (b,) in data.DataLoader(ds, batch_size=3, shuffle=True,
                                                   generator=g, **kw) for v in b]

    a = order(1)
    assert sorted(a) == list(range(10)) and a != list(range(10))
    assert order(1) == a and order(2) != a
    assert order(1, num_workers=2) == a  # accepted; loads in this process
    drawn = list(data.RandomSampler(range(5), replacement=True, num_samples=12,
                                    generator=dg.Generator().manual_seed(0)))
    assert len(drawn) == 12 and set(drawn) <= set(range(5))
    w = list(data.WeightedRandomSampler([0.0, 1.0, 0.0], 6))
    assert w == [1] * 6


@pytest.mark.parametrize("make", [
    lambda: dg.zeros(2, device="cuda"), lambda: dg.ones(2).to("cuda:0"),
    lambda: dg.ones(2).cuda(), lambda: dg.tensor([1.0], device="mps"),
    lambda: dg.randn(2, device=dg.device("cuda"))])
def test_other_devices_are_refused_by_name(make) -> None:
    with pytest.raises(RuntimeError, match=r"device '(cuda|mps)"):
        make()


def test_save_load_round_trip_and_refusals(tmp_path: Path) -> None:
    lin = dg.nn.Linear(3, 2)
    path = tmp_path / "m.pt"
    dg.save({"model": lin.state_dict(), "step": 4, "t": dg.arange(3)}, path)
    back = dg.load(path)
    assert back["step"] == 4 and back["t"].dtype == dg.int64
    assert_close(back["model"]["weight"], lin.weight)
    fresh = dg.nn.Linear(3, 2)
    fresh.load_state_dict(back["model"])
    assert_close(fresh.bias, lin.bias)
    # A pickle (or a torch checkpoint, a ZIP of pickles) is never unpickled.
    (tmp_path / "p.pt").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="not a dualgraph file"):
        dg.load(tmp_path / "p.pt")
    # An object that only pickle can hold loads only when asked for.
    buf = io.BytesIO()
    dg.save({"fn": complex(1, 2)}, buf)
    buf.seek(0)
    with pytest.raises(ValueError, match="complex"):
        dg.load(buf)
    buf.seek(0)
    assert dg.load(buf, weights_only=False) == {"fn": complex(1, 2)}


def test_compile_takes_torch_compiles_keywords() -> None:
    def f(x):
        return (x.clip(-0.5, 0.5) * 2).sum()

    x = dg.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    c = dg.compile(f, fullgraph=True, mode="max-autotune", dynamic=False, tiered=False)
    assert_close(c(x), f(x))
    assert c.stats.traces == 1
    with pytest.raises(dg.TraceError, match="run this part eagerly"):
        dg.compile(lambda x: dg.nonzero(x > 0), tiered=False)(x)
    with pytest.raises(dg.TraceError, match="run this part eagerly"):
        dg.compile(lambda x: dg.masked_select(x, x > 0), tiered=False)(x)
