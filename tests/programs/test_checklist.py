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
from dualgraph.testing import assert_close, gradcheck

from .._support.recording import case_arrays
from .checklist_cases import CASES

GOLD = np.load(Path(__file__).with_name("checklist_goldens.npz"))
NAMES = [name for name, _ in CASES]


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_matches_torch(i: int) -> None:
    name, fn = CASES[i]
    want = case_arrays(GOLD, name)
    dg.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations torch also warns of
        got = fn(dg)
    assert sorted(got) == sorted(want), name
    for k, v in want.items():
        g = np.asarray(got[k])
        if v.dtype.kind in "fc":
            assert_close(g, v, rtol=1e-9, atol=1e-11, equal_nan=True, msg=f"{name}: {k}")
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
        dg.compile(lambda x: dg.nonzero(x > 0), fullgraph=True, tiered=False)(x)
    with pytest.warns(RuntimeWarning, match="run this part eagerly"):
        dg.compile(lambda x: dg.masked_select(x, x > 0), tiered=False)(x)


F = dg.nn.functional
_RNG = np.random.default_rng(7)
# Points away from the kinks finite differences cannot see across (powers of two for
# frexp; whole pixels for the samplers).
_AWAY = np.array([0.3, -1.3, 2.7, 5.1, -11.0, 0.9])
_GRID = _RNG.uniform(-1.2, 1.2, (1, 3, 2, 2))


@pytest.mark.parametrize("fn, shapes", [
    (lambda x: dg.frexp(x * 0 + dg.tensor(_AWAY) * (1 + x * 1e-3)).mantissa, [(6,)]),
    (lambda x, t: dg.kl_div(dg.log_softmax(x, 1), dg.softmax(t, 1), 1)
     + dg.kl_div(x, t, 2, log_target=True), [(2, 3), (2, 3)]),
    (lambda x, g: F.grid_sample(x, g * 0.01 + dg.tensor(_GRID), mode="bicubic",
                                padding_mode="reflection"), [(1, 2, 4, 5), (1, 3, 2, 2)]),
    (lambda x: F.interpolate(x, size=(2, 2, 3), mode="area"), [(1, 2, 3, 4, 5)]),
    (lambda x: F.interpolate(x, scale_factor=0.4, mode="bicubic", antialias=True),
     [(1, 1, 7, 8)]),
    (lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True,
                             align_corners=True), [(1, 2, 6, 9)]),
], ids=["frexp", "kl_div", "grid_sample-bicubic", "area-5d", "antialias-bicubic",
        "antialias-bilinear"])
def test_new_gradients_match_finite_differences(fn, shapes) -> None:
    args = [dg.tensor(_RNG.standard_normal(s), requires_grad=True) for s in shapes]
    assert gradcheck(fn, *args, atol=1e-6, rtol=1e-5)


def test_new_names_compile_as_eager() -> None:
    def f(x, g, a, b):
        m, e = dg.frexp(x)
        lg = dg.log_softmax(x, 1)
        return (dg.gcd(a, b), dg.lcm(a, b), dg.nextafter(x, g[0, :, :, 0]), m * 3, e,
                dg.kl_div(lg, dg.softmax(g[0, :, :, 1], 1), 1),
                F.interpolate(x[None, None, None].expand(1, 1, 2, 3, 4), size=(1, 2, 2),
                              mode="area"),
                F.interpolate(x[None, None], size=(2, 3), mode="bilinear", antialias=True))

    c = dg.compile(f, tiered=False)
    x = dg.tensor(np.linspace(-2.3, 3.1, 12, dtype=np.float32).reshape(3, 4),
                  requires_grad=True)
    g = dg.tensor(np.linspace(-1.1, 0.9, 24, dtype=np.float32).reshape(1, 3, 4, 2),
                  requires_grad=True)
    a, b = dg.tensor([12, -18, 0, 7]), dg.tensor([8, 24, 5, 0])
    eager, compiled = f(x, g, a, b), c(x, g, a, b)
    for e, k in zip(eager, compiled):
        assert_close(k, e, rtol=1e-6, atol=1e-6)
    floats = [k for k in range(len(eager)) if eager[k].requires_grad]
    weights = [dg.tensor(_RNG.standard_normal(tuple(eager[k].shape)).astype(np.float32))
               for k in floats]
    ge = dg.grad(sum((eager[k] * w).sum() for k, w in zip(floats, weights)), (x, g))
    gc = dg.grad(sum((compiled[k] * w).sum() for k, w in zip(floats, weights)), (x, g))
    for p, q in zip(gc, ge):
        assert_close(p, q, rtol=1e-5, atol=1e-5)
    assert c.stats.traces == 1


def test_global_hooks_retrace_a_compiled_module() -> None:
    from dualgraph.nn.modules import module as M

    lin = dg.nn.Linear(3, 2)
    c = dg.compile(lin, tiered=False)
    x = dg.ones(4, 3)
    plain = c(x)
    handle = M.register_module_forward_hook(lambda m, args, out: out * 2)
    try:
        assert_close(c(x), plain * 2)
        assert_close(lin(x), plain * 2)
    finally:
        handle.remove()
    assert_close(c(x), plain)
    assert c.stats.traces == 2  # one without the hook, one with; removing it hits the first


def test_out_on_reductions_is_not_differentiable() -> None:
    x = dg.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        dg.sum(x, 1, out=dg.empty(2))
    with pytest.raises(TypeError, match="tuple of 2 Tensors"):
        dg.max(x.detach(), 1, out=dg.empty(2))
    with dg.no_grad():
        o = dg.empty(2)
        assert dg.mean(x, 1, out=o) is o


# Slow: bicubic sampling with its backward (the taps' gather and scatter, their masks and
# the cubic weights) was over a minute of cold Numba compile on the loaded test machine;
# the ops it is made of compile in bilinear sampling's tests.
@pytest.mark.slow
def test_bicubic_grid_sample_compiles_as_eager() -> None:
    def f(x, g):
        return F.grid_sample(x, g, mode="bicubic", padding_mode="border")

    c = dg.compile(f, tiered=False)
    x = dg.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(1, 2, 3, 4),
                  requires_grad=True)
    g = dg.tensor(np.linspace(-1.3, 1.2, 24, dtype=np.float32).reshape(1, 3, 4, 2),
                  requires_grad=True)
    e, k = f(x, g), c(x, g)
    assert_close(k, e, rtol=1e-6, atol=1e-6)
    for p, q in zip(dg.grad((k * k).sum(), (x, g)), dg.grad((e * e).sum(), (x, g))):
        assert_close(p, q, rtol=1e-5, atol=1e-5)
    assert c.stats.traces == 1


def test_out_on_reductions_inside_a_compiled_function() -> None:
    def f(x, o, v, i):
        dg.sum(x, 1, out=o)
        dg.max(x, 1, out=(v, i))
        return o * 2

    c = dg.compile(f, tiered=False)
    x = dg.tensor(_RNG.standard_normal((3, 4)))
    bufs = [(dg.empty(3, dtype=dg.float64), dg.empty(3, dtype=dg.float64),
             dg.empty(3, dtype=dg.int64)) for _ in range(2)]
    assert_close(c(x, *bufs[0]), f(x, *bufs[1]))
    for a, b in zip(*bufs):
        assert_close(a, b)
    assert_close(bufs[0][0], x.sum(1))
    assert c.stats.traces == 1
