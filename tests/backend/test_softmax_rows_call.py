"""A softmax whose rows sit under more than one loop (attention's batch x heads x queries)
is a call of the row routine at any size; rows of a matrix keep their loops below
`norm.MIN_ELEMENTS`. The call writes the bits the loops wrote, forward and backward."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba.lowerings import norm
from dualgraph.nn import functional as F

from .test_row_kernels import _lowered


def _calls(op: str, shape: tuple, axis: int) -> list[str]:
    arrays = [np.zeros(shape, np.float32)] * (2 if op.endswith("backward") else 1)
    _, block = _lowered(op, arrays, {"axis": axis})
    return [s.fn for s in block.stmts if isinstance(s, kir.LibCall)]


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax_backward",
                                "log_softmax_backward"])
def test_rows_under_two_loops_are_a_call_at_any_size(op):
    kind = "row_softmax_backward" if op.endswith("backward") else "row_softmax"
    # 2 x 2 x 3 rows of 5: 60 elements, far under MIN_ELEMENTS
    assert _calls(op, (2, 2, 3, 5), 3) == [kind]
    assert _calls(op, (2, 3, 5), 1) == [kind]
    # Rows of a matrix, and a size-1 dim that is no loop: the loops stay.
    assert _calls(op, (12, 5), 1) == []
    assert _calls(op, (1, 12, 5), 2) == []
    assert norm.MIN_ELEMENTS > 60


def _attention(q, k, g):
    w = F.softmax(q @ k.transpose(-2, -1), -1)
    lw = F.log_softmax(q @ k.transpose(-2, -1), -1)
    return (w * g).sum() + (lw * g).sum()


def _step(fn, arrays):
    ts = [dg.tensor(a, requires_grad=i < 2) for i, a in enumerate(arrays)]
    loss = fn(*ts)
    loss.backward()
    return [loss.numpy(), ts[0].grad.numpy(), ts[1].grad.numpy()]


def test_call_writes_the_loops_bits(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    arrays = [(rng.standard_normal((2, 3, 6, 4)) * 2).astype(np.float32) for _ in range(2)]
    arrays.append(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "call"))
    called = _step(dg.compile(_attention, tiered=False), arrays)
    sources = "".join(p.read_text() for p in (tmp_path / "call").rglob("*.py"))
    assert "dgw.row_softmax_float32(" in sources
    assert "dgw.row_softmax_backward_float32(" in sources
    monkeypatch.setattr(norm, "_softmax_least", lambda node: norm.MIN_ELEMENTS)
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "loops"))
    looped = _step(dg.compile(_attention, tiered=False), arrays)
    sources = "".join(p.read_text() for p in (tmp_path / "loops").rglob("*.py"))
    assert "dgw.row_softmax" not in sources
    for a, b in zip(called, looped):
        np.testing.assert_array_equal(a, b)
    eager = _step(_attention, arrays)
    for a, b in zip(called, eager):
        dg.testing.assert_close(a, b, rtol=2e-5, atol=2e-5)
