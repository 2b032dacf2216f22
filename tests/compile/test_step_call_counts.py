"""Every call a small compiled step makes, Python functions and C functions alike, counted
with ``sys.setprofile`` (it counts calls, it never times them): for the benchmark's W1
and W2-tiny steps they are the cost of a step."""

from __future__ import annotations

import collections

import numpy as np

import dualgraph as dg

from .._support.profiling import python_calls


def _calls(fn) -> collections.Counter:
    """Every Python frame and C function call ``fn()`` makes, by name."""
    return collections.Counter(name for _, name in python_calls(fn, c_calls=True))


def test_a_scalar_training_step_makes_at_most_15_calls() -> None:
    f = dg.compile(lambda x, y: x * y + y ** 2, tiered=False)
    x = dg.tensor(np.float32(2.0), requires_grad=True)
    y = dg.tensor(np.float32(3.0), requires_grad=True)

    def step():  # the benchmark's W1 step
        x.grad = None
        y.grad = None
        z = f(x, y)
        z.backward()
        return z, x.grad, y.grad

    for _ in range(3):
        step()
    calls = _calls(step)
    # The step itself; the two `.grad` setters (the getters run in C);
    # the compiled call (`__call__`, the generated path, the kernel's compiled entry,
    # three `np.empty`; the path builds the loss tensor and its tape node itself: the
    # node's inputs and version pairs are tuple displays, the outputs' 0-d views
    # subscripts); `backward` with the hand-out, which gives the leaves their `.grad`
    # itself (four `object.__new__`: three tensors and the node).
    assert sum(calls.values()) <= 15, calls
    # Nothing generic per call: no list of outputs, no mode lookup, no accumulation
    # helper, no argument count, no type test of an exact Tensor, no list built per input.
    assert not {"new_outputs", "run", "current_trace", "accumulate_array", "len",
                "isinstance", "id", "set.add", "list.append", "ndarray.reshape",
                "grad", "_make", "_set_new_grads", "attrgetter",
                "attach_gradients"} & set(calls), calls
    assert (x.grad.item(), y.grad.item()) == (3.0, 8.0)


def test_a_whole_training_step_makes_at_most_18_calls() -> None:
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = dg.nn.MSELoss()

    @dg.compile(tiered=False)
    def train(x, t):  # the benchmark's W2-tiny step
        opt.zero_grad()
        out = loss_fn(net(x), t)
        out.backward()
        opt.step()
        return out

    x, t = dg.ones(10, 2), dg.zeros(10, 1)
    for _ in range(3):
        train(x, t)
    calls = _calls(lambda: train(x, t))
    # The lambda, `__call__`, the generated path, the Numba function, five `np.empty`
    # (the loss, four gradients) and five tensors (the four gradients set in one call),
    # the work arrays' pool (`pop` and `append`); the loss's 0-d view is a subscript.
    # The module guards read nothing: no module changed.
    assert sum(calls.values()) <= 18, calls
    assert not {"dict.get", "OrderedDict.get", "OrderedDict.items", "len",
                "isinstance", "ndarray.reshape"} & set(calls), calls
    assert "_make" not in calls, calls  # the loss's and the gradients' tensors are built inline
    assert train.stats.traces == 1
