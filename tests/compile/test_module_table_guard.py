"""The generated call path's guard on a module's submodule table: a leaf module's empty
table costs no call, and a leaf given a submodule, or a container whose submodules change,
retraces as before."""

from __future__ import annotations

import dualgraph as dg


class Scale(dg.nn.Module):
    """A leaf until a submodule is given to it; ``forward`` runs whatever children it has."""

    def __init__(self) -> None:
        super().__init__()
        self.w = dg.nn.Parameter(dg.tensor([2.0, -3.0]))

    def forward(self, x):
        out = x * self.w
        for m in self.children():
            out = m(out)
        return out


def test_submodule_tables_changed_between_calls_retrace() -> None:
    leaf = Scale()
    seq = dg.nn.Sequential(Scale())
    f = dg.compile(lambda x: seq(leaf(x)), tiered=False)
    x = dg.tensor([0.5, 1.0])
    steps = [lambda: None,
             lambda: setattr(leaf, "act", dg.nn.Tanh()),      # the leaf is a leaf no more
             lambda: seq.append(dg.nn.ReLU()),                # a container grows
             lambda: delattr(leaf, "act"),                    # a leaf again
             lambda: seq.__setitem__(1, dg.nn.Tanh())]        # a container's item replaced
    for k, change in enumerate(steps):
        change()
        for _ in range(2):
            dg.testing.assert_close(f(x), seq(leaf(x)), msg=f"step {k}")
    # Every change makes a combination not seen before: one trace each.
    assert f.stats.traces == 5, f.stats.retrace_reasons
    assert f.stats.cache_hits == 5  # the second call after each change
