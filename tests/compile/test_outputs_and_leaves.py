"""A compiled function returning dicts, and a value computed under ``no_grad`` made a leaf
inside the trace (no gradient flows past it, as eagerly)."""

from __future__ import annotations

import dualgraph as dg
from dualgraph.testing import assert_close


def test_dict_outputs_keep_their_structure() -> None:
    def f(x):
        return {"double": x * 2, "stats": (x.sum(), {"max": x.max()})}

    g = dg.compile(f)
    for k in range(2):
        x = dg.arange(4.0) + k
        got, want = g(x), f(x)
        assert list(got) == ["double", "stats"]
        assert_close(got["double"], want["double"])
        assert_close(got["stats"][0], want["stats"][0])
        assert_close(got["stats"][1]["max"], want["stats"][1]["max"])
    assert g.stats.traces == 1


def test_a_no_grad_value_made_a_leaf_passes_no_gradient_on() -> None:
    dg.manual_seed(0)
    stem, head = dg.nn.Linear(3, 4), dg.nn.Linear(4, 1)

    def step(x):
        with dg.no_grad():
            h = stem(x)
        h = h.requires_grad_()
        head(h).sum().backward()
        return h.grad

    x = dg.ones(2, 3)
    want = step(x)
    assert stem.weight.grad is None and stem.bias.grad is None
    head.zero_grad()
    got = dg.compile(step)(x)
    assert_close(got, want)
    assert stem.weight.grad is None and stem.bias.grad is None
