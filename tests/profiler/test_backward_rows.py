"""Profiler rows for backward: one pair per tape node, and the compiled call's two rows."""

from __future__ import annotations

import dualgraph as dg


def _keys(prof) -> list[str]:
    return [e.key for e in prof.key_averages()]


def test_each_backward_node_is_a_pair_of_rows_named_as_pytorch_names_them():
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = dg.nn.Linear(3, 2)
    with dg.profiler.profile() as prof:
        (w(x[None]).tanh() * x.sum()).sum().backward()
    keys = _keys(prof)
    for node in ("SumBackward0", "MulBackward0", "TanhBackward0", "AddmmBackward0"):
        assert node in keys, keys
        assert f"autograd::engine::evaluate_function: {node}" in keys
    outer = next(e for e in prof.events()
                 if e.name == "autograd::engine::evaluate_function: MulBackward0")
    assert [c.name for c in outer.children] == ["MulBackward0"]
    assert outer.cpu_time_total >= outer.children[0].cpu_time_total


def test_a_recorded_backward_shows_its_ops_inside_the_node_row():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with dg.profiler.profile() as prof:
        (x * x).sum().backward(create_graph=True)
    node = next(e for e in prof.events() if e.name == "MulBackward0")
    assert "mul" in [c.name for c in node.children]


def test_no_rows_outside_a_profile():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with dg.profiler.profile() as prof:
        pass
    (x * x).sum().backward()
    assert _keys(prof) == []


def test_compiled_call_and_its_backward_are_rows():
    f = dg.compile(lambda x: (x * x).sum(), tiered=False)
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    f(x)
    with dg.profiler.profile() as prof:
        f(x).backward()
    keys = _keys(prof)
    assert "CompiledFunction" in keys and "CompiledFunctionBackward" in keys, keys
    dg.testing.assert_close(x.grad, dg.tensor([2.0, 4.0]))
    assert f.stats.traces == 1
