"""An optimizer's parameter updates, in a step split into parts, are one part per
parameter, and every parameter shares that part's function at any size and rank (each
part loops over flat arrays): the update compiles once, whatever the number and shapes
of the parameters."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph import nn, optim

from .._support.compiled import cross_entropy_step


def _step(opt_name: str):
    dg.manual_seed(0)
    # Three layers, so three weight shapes and three bias shapes (sizes above the ones
    # generated code prints as literals).
    net = nn.Sequential(nn.Linear(24, 40), nn.Tanh(), nn.Linear(40, 32), nn.Tanh(),
                        nn.Linear(32, 20))
    opt = (optim.Adam(net.parameters(), lr=1e-2) if opt_name == "adam" else
           optim.SGD(net.parameters(), lr=1e-2, momentum=0.9))
    return net, cross_entropy_step(net, opt)


def test_updates_compile_once_for_all_parameters_and_equal_eager(monkeypatch):
    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", "80")
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((18, 24)).astype(np.float32))
    t = dg.tensor(rng.integers(0, 20, 18))
    for opt_name in ("adam", "sgd"):
        net_e, step_e = _step(opt_name)
        net_c, step_c = _step(opt_name)
        compiled = dg.compile(step_c, tiered=False)
        for _ in range(3):
            le, lc = step_e(x, t), compiled(x, t)
            dg.testing.assert_close(lc.numpy(), le.numpy(), rtol=1e-5, atol=1e-6)
        for pe, pc in zip(net_e.parameters(), net_c.parameters()):
            dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-4, atol=1e-6)
        (entry,) = compiled.entries()
        kernel = entry.kernel
        params = list(net_c.parameters())
        # The parts writing a parameter in place: one per parameter, one function
        # (weights and biases alike), compiled once.
        updating = [p for p in kernel.parts
                    if any(d[0] == "in" for d in _dests(kernel, p))]
        assert len(updating) == len(params), opt_name
        functions = {id(p.fn) for p in updating}
        assert len(functions) == 1, opt_name
        assert sum(len(p.fn.overloads) for p in {id(p.fn): p for p in updating}.values()) == 1


def _dests(kernel, part):
    return kernel.plan.segments[kernel.parts.index(part)].dests
