"""The tape node of a compiled scalar loss whose gradients are fresh is a
`PrecomputedBackward` whose hand-out is written out for its count of leaves and version
checks (`compiled_node.handing_node_type`): that path runs on a plain ``backward()``, and
its answers, errors and fall-backs are eager mode's."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager.compiled_node import (
    PrecomputedBackward,
    attach_gradients,
    handing_node_type,
    inline_node_type,
)

from .._support.profiling import python_calls


def _loss3(x, y, w, c):
    return x * y + w * c + y ** 2


F3 = dg.compile(_loss3, tiered=False)  # one kernel serves every test of the file


def _leaves() -> tuple:
    x, y, w = (dg.tensor(np.float32(v), requires_grad=True) for v in (2.0, 3.0, -1.5))
    return x, y, w, dg.tensor(np.float32(0.5))


def _frames(fn) -> set:
    """The file names of the Python frames ``fn()`` runs."""
    return {file for file, _ in python_calls(fn)}


def test_the_node_has_the_written_out_hand_out_and_it_runs() -> None:
    x, y, w, c = _leaves()
    z = F3(x, y, w, c)
    node = z.grad_fn
    assert isinstance(node, PrecomputedBackward)
    assert type(node).__name__ == "PrecomputedBackward"
    assert type(node).hand_out is not PrecomputedBackward.hand_out
    # The call path's node: the hand-out of three leaves, its fixed fields in its class.
    assert type(node) is inline_node_type(3, len(node._checks), (), z.numpy().dtype)
    assert type(node).__mro__[1] is handing_node_type(3, len(node._checks))
    assert (node.attrs, node.shape, node.dtype) == ({}, (), np.float32)
    assert "<dg hand-out of 3 leaves>" in _frames(z.backward)
    assert F3.stats.traces == 1
    x2, y2, w2, c2 = _leaves()
    _loss3(x2, y2, w2, c2).backward()
    for got, want in ((x, x2), (y, y2), (w, w2)):
        dg.testing.assert_close(got.grad, want.grad)
    assert c.grad is None
    # `dg.explain` shows what the plain backward() runs, after the call path.
    assert "# def hand_out(self, retain_graph):" in str(dg.explain(F3, x, y, w, c))


def _accumulated(f, x, y, w, c):
    f(x, y, w, c).backward()
    f(x, y, w, c).backward()


def _retained(f, x, y, w, c):
    z = f(x, y, w, c)
    z.backward(retain_graph=True)
    z.backward()


def _hooked(f, x, y, w, c):
    w.register_hook(lambda g: g * 3.0)
    f(x, y, w, c).backward()


def _grad_set_before(f, x, y, w, c):
    y.grad = dg.tensor(np.float32(10.0))
    f(x, y, w, c).backward()


def _non_leaf(f, x, y, w, c):
    f(x * 2.0, y, w, c).backward()


SCENARIOS = {"accumulated": _accumulated, "retain_graph twice": _retained,
             "hook on a leaf": _hooked, "a .grad set before": _grad_set_before,
             "an input that is not a leaf": _non_leaf}


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_every_case_gives_eager_modes_gradients(kind: str) -> None:
    use = SCENARIOS[kind]
    got, want = _leaves(), _leaves()
    use(F3, *got)
    use(_loss3, *want)
    for g, e in zip(got[:3], want[:3]):
        dg.testing.assert_close(g.grad, e.grad)
    # No two leaves and no two steps share a gradient's array.
    arrays = [t.grad.numpy() for t in got[:3]]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def test_a_leaf_gone_before_backward_is_skipped() -> None:
    x, y, _, c = _leaves()
    # ``w``'s value is in no gradient, so the node keeps no reference to it.
    z = F3(x, y, dg.tensor(np.float32(-1.5), requires_grad=True), c)
    assert z.grad_fn.inputs[2]._var() is None
    z.backward()
    x2, y2, w2, c2 = _leaves()
    _loss3(x2, y2, w2, c2).backward()
    dg.testing.assert_close(x.grad, x2.grad)
    dg.testing.assert_close(y.grad, y2.grad)


def test_an_input_changed_in_place_raises_as_eager_mode_does() -> None:
    x, y, w, c = _leaves()
    z = F3(x, y, w, c)
    with dg.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
    assert x.grad is None and y.grad is None and w.grad is None


def test_a_second_backward_without_retain_graph_raises() -> None:
    x, y, w, c = _leaves()
    z = F3(x, y, w, c)
    z.backward()
    with pytest.raises(RuntimeError):
        z.backward()


def _slots(obj) -> dict:
    """Every slot ``obj`` has a value in, by name."""
    names = {n for cls in type(obj).__mro__ for n in getattr(cls, "__slots__", ())}
    return {n: getattr(obj, n) for n in sorted(names - {"__weakref__"}) if hasattr(obj, n)}


def test_the_call_path_builds_the_loss_and_node_as_attach_gradients_does() -> None:
    x, y, w, c = _leaves()
    z = F3(x, y, w, c)
    node = z.grad_fn
    made = attach_gradients(node.inputs, node._saved, z._data, node._checks, type(node))
    assert type(made) is type(z) and type(made.grad_fn) is type(node)
    want, got = _slots(made.grad_fn), _slots(node)
    assert want.keys() == got.keys()
    assert got.pop("uid") < want.pop("uid")
    for name in want:
        assert got[name] == want[name] or got[name] is want[name], name
    want, got = _slots(made), _slots(z)
    assert want.keys() == got.keys()
    assert want.pop("grad_fn") is made.grad_fn and got.pop("grad_fn") is node
    for name in want:
        assert got[name] is want[name] or got[name] == want[name], name
