"""`dg.compiler`: ``disable`` runs a function eagerly (the compiled call falls back, with
the same answers) and ``is_compiling`` tells traced code apart."""

from __future__ import annotations

import pytest

import dualgraph as dg
from dualgraph.testing import assert_close


def test_disable_makes_the_compiled_call_run_eagerly() -> None:
    seen = []

    @dg.compiler.disable
    def log(x):
        seen.append(float(x.sum()))
        return x

    def f(x):
        return log(x * 2) + 1

    g = dg.compile(f)
    with pytest.warns(RuntimeWarning, match="marked dg.compiler.disable"):
        out = g(dg.ones(3))
    assert_close(out, dg.full((3,), 3.0))
    assert seen == [6.0]
    assert g.stats.traces == 0  # the signature runs eagerly from now on
    with pytest.raises(dg.EagerOnlyError, match="dg.compiler.disable"):
        dg.compile(f, fullgraph=True)(dg.ones(3))
    assert dg.compiler.disable(log) is log
    assert dg.compiler.disable(reason="logging")(lambda: 5)() == 5


def test_is_compiling_inside_a_trace() -> None:
    def f(x):
        return x + (1.0 if dg.compiler.is_compiling() else 0.0)

    assert not dg.compiler.is_compiling()
    assert_close(dg.compile(f)(dg.zeros(2)), dg.ones(2))
    assert_close(f(dg.zeros(2)), dg.zeros(2))


def test_dynamo_settings_and_markers_are_accepted() -> None:
    import dualgraph._dynamo as dynamo

    assert dynamo is dg._dynamo and dynamo.config.suppress_errors is False
    assert dynamo.config.cache_size_limit == 8
    with dynamo.config.patch(suppress_errors=True, cache_size_limit=64):
        assert dynamo.config.suppress_errors and dynamo.config.cache_size_limit == 64
    assert dynamo.config.suppress_errors is False
    dynamo.config.suppress_errors = True
    assert dynamo.config.suppress_errors
    dynamo.config.suppress_errors = False
    with pytest.raises(AttributeError, match="no_such_setting does not exist"):
        dynamo.config.no_such_setting = 1
    dynamo.reset()
    assert dynamo.disable is dg.compiler.disable

    def f(x):
        dynamo.mark_dynamic(x, 0)
        dynamo.graph_break()
        return x + (1.0 if dynamo.is_compiling() else 0.0)

    g = dg.compile(f)
    assert_close(g(dg.zeros(2)), dg.ones(2))
    assert g.stats.traces == 1
