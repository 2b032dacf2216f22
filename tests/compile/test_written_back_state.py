"""What a compiled call leaves behind equals what eager mode leaves: the tensors it writes
back (a module attribute, the loss it returns, optimizer state, parameters changed in
place) have eager's requires_grad, leafness, history (None or not), dtype and version."""

from __future__ import annotations

import pytest

import dualgraph as dg

nn = dg.nn
F = nn.functional


def _meta(t: dg.Tensor | None) -> tuple | None:
    if t is None:
        return None
    return (tuple(t.shape), str(t.dtype), t.requires_grad, t.is_leaf, t.grad_fn is None,
            t._version[0])


class LossHolder(nn.Module):
    """Stores its loss on ``self`` as it passes the input through (style transfer's
    ContentLoss); no ``loss`` attribute until the first forward."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        y = self.lin(x)
        self.loss = F.mse_loss(y, x)
        return y


def _holder_run(compiled: bool) -> tuple:
    dg.manual_seed(0)
    m = LossHolder()
    opt = dg.optim.Adam(m.parameters(), lr=0.1)

    def step(x: dg.Tensor) -> dg.Tensor:
        opt.zero_grad()
        m(x)
        m.loss.backward()
        opt.step()
        return m.loss

    f = dg.compile(step) if compiled else step
    rows = []
    for k in range(3):
        r = f(dg.full((2, 3), float(k)))
        rows.append((float(r), r is m.loss, _meta(r), _meta(m.loss)))
        for p in m.parameters():
            rows.append((_meta(p), _meta(p.grad), *(_meta(v) if isinstance(v, dg.Tensor)
                                                     else v for v in opt.state[p].values())))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        m.loss.backward()
    return rows, f


def test_written_back_attribute_loss_and_state_equal_eager() -> None:
    eager, _ = _holder_run(False)
    compiled, f = _holder_run(True)
    for e, c in zip(eager, compiled):
        dg.testing.assert_close(c[0] if isinstance(c[0], float) else 0.0,
                                e[0] if isinstance(e[0], float) else 0.0, rtol=1e-5, atol=1e-6)
        assert c[1:] == e[1:]
    # The attribute did not exist before the first call, and requires grad after each:
    # neither its creation nor its flag makes the next call trace again.
    assert f.stats.traces == 1
    loss_meta = compiled[0][3]
    assert loss_meta[2:5] == (True, False, False)  # requires grad, not a leaf, has history


def test_attribute_absence_read_by_hasattr_is_guarded() -> None:
    class Cache(nn.Module):
        def forward(self, x: dg.Tensor) -> dg.Tensor:
            if not hasattr(self, "scale"):
                self.scale = x.sum().detach()
                return x
            return x * self.scale

    def run(compiled: bool) -> list:
        m = Cache()
        f = dg.compile(m) if compiled else m
        return [f(dg.full((2,), 2.0)).tolist() for _ in range(3)], f

    eager, _ = run(False)
    compiled, f = run(True)
    assert compiled == eager == [[2.0, 2.0], [8.0, 8.0], [8.0, 8.0]]
    # The first call fills the attribute, so it runs eagerly; the second call traces.
    assert f.stats.traces == 1 and f.stats.state_filling_calls == 1
