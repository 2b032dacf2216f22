"""`dg.save` / `dg.load`: the documented zip + JSON format, round trips, refusal of other
files, no unpickling unless asked, and tied weights."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import dualgraph as dg


def _roundtrip(obj, **kwargs):
    buf = io.BytesIO()
    dg.save(obj, buf)
    buf.seek(0)
    return dg.load(buf, **kwargs)


def test_state_dict_round_trip_to_a_path(tmp_path) -> None:
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    path = tmp_path / "net.dg"
    dg.save(net.state_dict(), path)
    loaded = dg.load(path)
    assert isinstance(loaded, OrderedDict) and list(loaded) == list(net.state_dict())
    for k, v in net.state_dict().items():
        assert loaded[k].dtype == v.dtype and not loaded[k].requires_grad
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
    other = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    other.load_state_dict(dg.load(str(path)))
    x = dg.ones(2, 3)
    np.testing.assert_array_equal(other.eval()(x).numpy(), net.eval()(x).numpy())


def test_nested_python_values_round_trip_exactly() -> None:
    obj = {"model": {"w": dg.ones(2, dtype=dg.float64)}, "step": 7, "lr": 0.001,
           "best": float("inf"), "nan": float("nan"), "betas": (0.9, 0.999), "name": "gpt",
           "flags": [True, None], 3: "int key", (1, 2): "tuple key",
           "arr": np.arange(3, dtype=np.int16), "np_scalar": np.float32(1.5),
           "dtype": dg.int64, "device": dg.device("cpu"),
           "ints": dg.tensor([1, 2], dtype=dg.int8), "flag": dg.tensor([True, False])}
    out = _roundtrip(obj)
    assert list(out) == list(obj)
    assert out["step"] == 7 and out["lr"] == 0.001 and out["best"] == float("inf")
    assert np.isnan(out["nan"]) and out["betas"] == (0.9, 0.999) and out["flags"] == [True, None]
    assert out[3] == "int key" and out[(1, 2)] == "tuple key"
    assert out["arr"].dtype == np.int16 and out["np_scalar"] == np.float32(1.5)
    assert type(out["np_scalar"]) is np.float32
    assert out["dtype"] == dg.int64 and out["device"] == dg.device("cpu")
    assert out["ints"].dtype == np.int8 and out["flag"].tolist() == [True, False]
    assert out["model"]["w"].dtype == np.float64


def test_views_and_zero_d_tensors_keep_their_shape() -> None:
    x = dg.arange(6.0).reshape(2, 3)
    out = _roundtrip({"t": x.t(), "s": dg.tensor(3.0), "e": dg.zeros(0, 2)})
    np.testing.assert_array_equal(out["t"].numpy(), x.numpy().T)
    assert out["s"].shape == () and float(out["s"]) == 3.0 and out["e"].shape == (0, 2)


def test_parameters_and_requires_grad_are_kept() -> None:
    p = dg.nn.Parameter(dg.ones(2))
    t = dg.ones(3, requires_grad=True)
    out = _roundtrip([p, t, dg.ones(1)])
    assert isinstance(out[0], dg.nn.Parameter) and out[0].requires_grad
    assert out[1].requires_grad and not isinstance(out[1], dg.nn.Parameter)
    assert not out[2].requires_grad


def test_shared_tensors_are_stored_once_and_stay_shared() -> None:
    w = dg.ones(3)
    buf = io.BytesIO()
    dg.save({"a": w, "b": w, "c": w.detach()}, buf)
    names = zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
    assert names == ["dualgraph.json", "arrays/0.npy"]
    buf.seek(0)
    out = dg.load(buf)
    assert out["a"] is out["b"] and out["c"] is not out["a"]
    out["c"][0] = 5.0  # c shared a's data when saved, so it does after loading
    assert float(out["a"][0]) == 5.0


def test_the_file_format_is_the_documented_one() -> None:
    buf = io.BytesIO()
    dg.save({"w": dg.tensor([1.0, 2.0]), "n": 1}, buf)
    zf = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    manifest = json.loads(zf.read("dualgraph.json"))
    assert manifest["format"] == "dualgraph" and manifest["version"] == 1
    assert manifest["object"] == {"dict": [
        ["w", {"tensor": {"n": 0, "id": 0, "requires_grad": False, "parameter": False}}],
        ["n", 1]]}
    arr = np.lib.format.read_array(io.BytesIO(zf.read("arrays/0.npy")), allow_pickle=False)
    np.testing.assert_array_equal(arr, [1.0, 2.0])


def test_pickled_objects_load_only_when_asked() -> None:
    buf = io.BytesIO()
    dg.save({"cfg": collections_counter(), "w": dg.ones(1)}, buf)
    buf.seek(0)
    with pytest.raises(ValueError, match="pickled object of type collections.Counter"):
        dg.load(buf)
    buf.seek(0)
    with pytest.raises(ValueError, match="weights_only=True"):
        dg.load(buf, weights_only=None)
    buf.seek(0)
    assert dg.load(buf, weights_only=False)["cfg"] == collections_counter()


def collections_counter():
    import collections

    return collections.Counter("abca")


def test_other_files_are_refused(tmp_path) -> None:
    pkl = tmp_path / "x.pt"
    pkl.write_bytes(pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match="is not a dualgraph file"):
        dg.load(pkl)
    torch_like = tmp_path / "ckpt.pt"
    with zipfile.ZipFile(torch_like, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    with pytest.raises(ValueError, match="looks like a PyTorch checkpoint"):
        dg.load(torch_like)
    plain_zip = tmp_path / "a.zip"
    with zipfile.ZipFile(plain_zip, "w") as zf:
        zf.writestr("dualgraph.json", json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="is not a dualgraph file"):
        dg.load(plain_zip)
    future = tmp_path / "future.dg"
    with zipfile.ZipFile(future, "w") as zf:
        zf.writestr("dualgraph.json", json.dumps({"format": "dualgraph", "version": 99}))
    with pytest.raises(ValueError, match="version 99"):
        dg.load(future)


def test_load_map_location() -> None:
    buf = io.BytesIO()
    dg.save(dg.ones(2), buf)
    for loc in ("cpu", dg.device("cpu"), lambda s, loc: s, {"cuda:0": "cpu"}):
        buf.seek(0)
        assert dg.load(buf, map_location=loc).shape == (2,)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="CPU only"):
        dg.load(buf, map_location="cuda")


def test_optimizer_state_dict_round_trips() -> None:
    net = dg.nn.Linear(2, 1)
    opt = dg.optim.Adam(net.parameters(), lr=0.01)
    net(dg.ones(3, 2)).sum().backward()
    opt.step()
    sd = opt.state_dict() if hasattr(opt, "state_dict") else {"state": {0: {"step": 1}}}
    out = _roundtrip(sd)
    assert out.keys() == sd.keys()


class _Tied(dg.nn.Module):
    """nanoGPT's weight tying: the output layer's weight is the embedding's."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = dg.nn.Embedding(5, 3)
        self.lm_head = dg.nn.Linear(3, 5, bias=False)
        self.lm_head.weight = self.wte.weight


def test_state_dict_keeps_both_names_of_a_tied_weight_like_torch() -> None:
    m = _Tied()
    sd = m.state_dict()
    assert list(sd) == ["wte.weight", "lm_head.weight"]
    np.testing.assert_array_equal(sd["wte.weight"].numpy(), sd["lm_head.weight"].numpy())
    assert len(list(m.parameters())) == 1  # parameters() still lists it once
    fresh = _Tied()
    assert fresh.load_state_dict(_roundtrip(sd)) == ([], [])  # strict loading works
    np.testing.assert_array_equal(fresh.lm_head.weight.numpy(), m.wte.weight.numpy())
    assert fresh.lm_head.weight is fresh.wte.weight
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "lm_head.weight"'):
        fresh.load_state_dict({"wte.weight": sd["wte.weight"]})


def test_save_refuses_what_cannot_be_pickled() -> None:
    with pytest.raises(TypeError, match="cannot save an object of type"):
        dg.save({"f": lambda: 1}, io.BytesIO())


def test_a_whole_model_is_pickled_and_loads_only_when_asked(tmp_path) -> None:
    """``torch.save(model, path)``: the module object is pickled into the file; loading it
    needs ``weights_only=False``, as in PyTorch 2.6 and later."""
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU())
    dg.save(net, tmp_path / "net.pt")
    with pytest.raises(ValueError, match="dualgraph.nn.modules.container.Sequential"):
        dg.load(tmp_path / "net.pt")
    back = dg.load(tmp_path / "net.pt", weights_only=False)
    x = dg.ones(4, 2)
    np.testing.assert_array_equal(back(x).numpy(), net(x).numpy())
    assert back[0].weight.requires_grad and isinstance(back[0].weight, dg.nn.Parameter)


def test_safe_globals_allow_only_the_named_classes_under_weights_only() -> None:
    import argparse

    buf = io.BytesIO()
    dg.save({"args": argparse.Namespace(lr=0.1, sizes=[1, 2]), "w": dg.ones(2)}, buf)
    buf.seek(0)
    with pytest.raises(ValueError, match="global argparse.Namespace is not allowed"):
        dg.load(buf)
    buf.seek(0)
    with dg.serialization.safe_globals([argparse.Namespace]):
        assert argparse.Namespace in dg.serialization.get_safe_globals()
        out = dg.load(buf)
    assert out["args"] == argparse.Namespace(lr=0.1, sizes=[1, 2])
    assert argparse.Namespace not in dg.serialization.get_safe_globals()
    buf.seek(0)
    dg.serialization.add_safe_globals([argparse.Namespace])
    try:
        assert dg.load(buf)["args"].lr == 0.1
        # A class the object needs beyond the allowed ones is still refused.
        buf2 = io.BytesIO()
        dg.save({"args": argparse.Namespace(c=collections_counter())}, buf2)
        buf2.seek(0)
        with pytest.raises(ValueError, match="collections.Counter is not allowed"):
            dg.load(buf2)
    finally:
        dg.serialization.clear_safe_globals()
