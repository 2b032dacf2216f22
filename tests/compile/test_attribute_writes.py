"""A compiled function that stores a value it computes on a module's (or an argument
object's) plain attribute leaves the real value there after each call, as eager mode
does, and the next call sees that state."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.errors import TraceError
from dualgraph.testing import assert_close
from dualgraph.trace.tracer import Tracer


class MaskCache(dg.nn.Module):
    """Caches a causal mask on ``self`` the first time (or when the length changes)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = dg.nn.Linear(4, 4)
        self.mask = None

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        if self.mask is None or self.mask.size(0) != len(x):
            self.mask = dg.log(dg.tril(dg.ones(len(x), len(x))))
        return (self.lin(x).sum(-1) + self.mask).softmax(-1)


def _step(model: MaskCache, opt: dg.optim.Optimizer, x: dg.Tensor) -> dg.Tensor:
    opt.zero_grad()
    loss = model(x).square().sum()
    loss.backward()
    opt.step()
    return loss


def _run(compiled: bool) -> tuple:
    dg.manual_seed(0)
    model = MaskCache()
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    fn = dg.compile(lambda x: _step(model, opt, x)) if compiled else \
        (lambda x: _step(model, opt, x))
    xs = [dg.randn(3, 4) for _ in range(3)]
    losses, masks = [], []
    for x in xs:
        losses.append(fn(x).item())
        assert type(model.mask) is dg.Tensor and not isinstance(model.mask, Tracer)
        masks.append(model.mask.numpy().copy())
    return losses, masks, fn


def test_cached_mask_attribute_is_real_after_each_call() -> None:
    eager_losses, eager_masks, _ = _run(False)
    losses, masks, fn = _run(True)
    assert_close(losses, eager_losses, rtol=1e-6, atol=0.0)
    for m, e in zip(masks, eager_masks):
        np.testing.assert_array_equal(m, e)
    # The first call finds no mask and builds it: its trace would serve only calls that
    # find none, so that call runs eagerly; the second traces the branch that finds it,
    # and the third reuses that trace.
    assert fn.stats.traces == 1 and fn.stats.state_filling_calls == 1
    assert fn.stats.tier1_calls + fn.stats.tier0_calls == 2


def test_attribute_of_argument_object_and_argument_itself() -> None:
    class Box:
        pass

    def f(box: Box, x: dg.Tensor) -> dg.Tensor:
        box.double = x * 2
        box.last = x
        return x + 1

    box = Box()
    g = dg.compile(f)
    for k in range(3):
        x = dg.full((2,), float(k))
        g(box, x)
        assert box.last is x
        assert type(box.double) is dg.Tensor
        np.testing.assert_array_equal(box.double.numpy(), [2.0 * k, 2.0 * k])


def test_attribute_requiring_grad_is_refused_clearly() -> None:
    class Keep(dg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = dg.nn.Linear(2, 2)
            self.h = None

        def forward(self, x: dg.Tensor) -> dg.Tensor:
            self.h = self.lin(x)
            return self.h.sum()

    m = Keep()
    with pytest.raises(TraceError, match=r"Keep\.h .*detach"):
        dg.compile(m)(dg.ones(2))
    assert m.h is None


def test_tensor_attribute_rebound_outside_is_read_anew() -> None:
    class Offset(dg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.h = dg.ones(2)

        def forward(self, x: dg.Tensor) -> dg.Tensor:
            return (self.h + x).sum()

    m = Offset()
    f = dg.compile(m)
    assert f(dg.ones(2)).item() == 4.0
    m.h = dg.full((2,), 10.0)
    assert f(dg.ones(2)).item() == m(dg.ones(2)).item() == 22.0
    assert f.stats.traces == 1  # the attribute's tensor is an input, read at each call
    m.h = dg.full((1,), 3.0)  # another shape: the trace does not hold
    assert f(dg.ones(2)).item() == m(dg.ones(2)).item() == 8.0
    assert f.stats.traces == 2
    assert f.stats.retrace_reasons[-1] == ("Offset.h is a (1,) float32 tensor (traced with "
                                           "(2,) float32)")


class _ImagePool:
    """CycleGAN's image pool: keeps the images it is given, up to its size."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.images: list = []

    def query(self, image: dg.Tensor) -> dg.Tensor:
        image = image.detach()
        if len(self.images) < self.size:
            self.images.append(image)
        return image


def test_append_to_a_held_list_runs_eagerly_with_the_list_intact() -> None:
    # A compiled call would not repeat the append; the list must not keep a tracer, nor
    # lose what it held (it was put back as None).
    pool = _ImagePool(3)
    w = dg.tensor([1.0, 2.0], requires_grad=True)

    def step(x):
        return (pool.query(x * w) * 2).sum()

    f = dg.compile(step)
    with pytest.warns(RuntimeWarning, match=r"stores a value it computes in the list or "
                                            r"dict _ImagePool\.images \(history\.append"):
        outs = [f(dg.tensor([1.0, float(i)])) for i in range(4)]
    assert [float(o) for o in outs] == [2.0, 6.0, 10.0, 14.0]
    assert f.stats.traces == 0
    assert [t.tolist() for t in pool.images] == [[1.0, 0.0], [1.0, 2.0], [1.0, 4.0]]
    pool.images = []
    with pytest.raises(dg.EagerOnlyError, match="_ImagePool.images"):
        dg.compile(step, strict=True)(dg.tensor([1.0, 1.0]))
    assert pool.images == []


def test_forward_hook_keeping_features_in_a_dict_leaves_real_tensors_there() -> None:
    # A feature extractor's hook (``features["last"] = out.detach()``) reached only
    # through the model's hook table: each call leaves that call's features, one trace.
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU())
    features: dict = {}

    def keep(module, inputs, out):
        features["last"] = out.detach()

    net[0].register_forward_hook(keep)
    f = dg.compile(lambda x: net(x).sum())
    for i in range(3):
        x = dg.tensor([[1.0, float(i)]])
        out = f(x)
        assert not isinstance(features["last"], Tracer)
        assert_close(features["last"], net[0](x).detach())
        assert_close(out, net(x).sum())
    assert f.stats.traces == 1


def test_forward_hook_appending_to_a_list_runs_eagerly_with_the_list_as_eager_leaves_it() -> None:
    net = dg.nn.Linear(2, 1)
    seen: list = []
    net.register_forward_hook(lambda module, inputs, out: seen.append(out.detach()))
    f = dg.compile(lambda x: net(x).sum())
    with pytest.warns(RuntimeWarning, match=r"stores a value it computes in the list or "
                                            r"dict 'seen' \(of the hook .*<lambda>\)"):
        for i in range(2):
            f(dg.tensor([[1.0, float(i)]]))
    assert f.stats.traces == 0
    assert [t.tolist() for t in seen] == [net(dg.tensor([[1.0, float(i)]])).tolist()
                                          for i in range(2)]


def test_tensor_kept_in_a_dict_the_function_names_is_written_back() -> None:
    # ``state["h"] = state["h"] * 0.5 + x`` in a dict a closure names follows the rules a
    # hook's dict does: each call leaves that call's tensor there, one trace; a key that
    # is not a string (``log[0]``) cannot be written back, so that signature runs eagerly.
    def run(wrap):
        state = {"h": dg.zeros(2)}
        log: dict = {}

        def step(x, keep=False):
            state["h"] = state["h"] * 0.5 + x
            if keep:
                log[0] = state["h"] * 1
            return state["h"].sum()

        f = wrap(step)
        outs = [f(dg.full((2,), float(k))).item() for k in (1, 2, 3)]
        assert not isinstance(state["h"], Tracer)
        return f, outs, state["h"].tolist(), step, log

    f, outs, h, step, _ = run(dg.compile)
    _, e_outs, e_h, _, _ = run(lambda fn: fn)
    assert outs == e_outs and h == e_h
    assert f.stats.traces == 1 and f.stats.cache_hits == 2
    with pytest.warns(RuntimeWarning, match=r"stores a value it computes in the list or "
                                            r"dict 'log'"):
        f(dg.ones(2), True)
    assert f.stats.traces == 1
