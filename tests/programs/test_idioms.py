"""Idioms of public PyTorch programs, written as they are written there, with
``import dualgraph as torch``: each test fails if dualgraph lacks the name or behaves
differently from PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as torch
from dualgraph.testing import assert_close


def repackage_hidden(h):
    """pytorch/examples word_language_model/main.py, as it is."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def test_isinstance_tensor_is_true_for_traced_values() -> None:
    """Inside a compiled function the arguments are traced values; user code asking
    ``isinstance(x, torch.Tensor)`` (or ``torch.is_tensor``) gets True, as in PyTorch."""
    seen = []

    @torch.compile
    def step(h, c, x):
        seen.append((isinstance(x, torch.Tensor), torch.is_tensor(x),
                     isinstance(x, torch.nn.Parameter)))
        h, c = repackage_hidden((h, c))
        return h * x + c

    out = step(torch.ones(2), torch.ones(2), torch.full((2,), 3.0))
    assert out.tolist() == [4.0, 4.0]
    assert seen == [(True, True, False)]
    assert step.stats.traces == 1
    assert isinstance(torch.ones(2)[1:], torch.Tensor)  # a view
    assert not isinstance(2.0, torch.Tensor) and not isinstance(np.ones(2), torch.Tensor)


def test_accelerator_flags_of_a_cpu_tensor() -> None:
    """DCGAN's ``if (input.is_cuda or input.is_xpu) and self.ngpu > 1``."""
    x = torch.ones(2)
    assert (x.is_cuda, x.is_xpu, x.is_mps, x.is_meta, x.is_cpu) == \
        (False, False, False, False, True)


def _biases_step(compiled: bool, as_arguments: bool = False) -> tuple:
    """A step whose two parameters are summed, their gradients clipped; the parameters
    are read from the enclosing scope (as a model's are), or passed as arguments."""
    b_ih = torch.nn.Parameter(torch.zeros(3))
    b_hh = torch.nn.Parameter(torch.zeros(3))

    def step(x, *params):
        p, q = params or (b_ih, b_hh)
        loss = ((p + q) * x).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p, q], 0.5)
        return loss

    fn = torch.compile(step) if compiled else step
    if as_arguments:
        return (lambda x: fn(x, b_ih, b_hh)), (b_ih, b_hh)
    return fn, (b_ih, b_hh)


def test_clipping_gradients_that_share_a_value_in_a_compiled_step() -> None:
    """Two parameters added together get the same gradient value; clip_grad_norm_ scales
    each parameter's .grad in place, once. The compiled step used to scale the shared
    value twice (the word language model's LSTM biases, 1.5e-4 off torch's losses)."""
    results = []
    for compiled in (False, True):
        fn, (b_ih, b_hh) = _biases_step(compiled)
        fn(torch.tensor([1.0, 2.0, 2.0]))
        results.append((b_ih.grad.tolist(), b_hh.grad.tolist()))
    eager, compiled_grads = results
    # |[g, g]| = 3 * sqrt(2): each gradient scaled by 0.5 / (3 * sqrt(2)) once.
    assert_close(eager[0], np.array([1.0, 2.0, 2.0]) * 0.5 / (3 * 2 ** 0.5), rtol=1e-6, atol=0,
                 equal_nan=True, check_dtype=False)
    assert_close(compiled_grads, eager, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


def test_clipping_the_gradients_of_arguments_in_a_compiled_step() -> None:
    """Parameters passed as arguments: ``p.grad`` inside the trace is the argument's
    gradient, so clip_grad_norm_'s in-place ``mul_`` is written back."""
    grads = []
    for compiled in (False, True):
        fn, params = _biases_step(compiled, as_arguments=True)
        fn(torch.tensor([1.0, 2.0, 2.0]))
        grads.append([p.grad.tolist() for p in params])
    assert_close(grads[1], grads[0], rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


def test_legacy_tensor_constructor_of_sizes() -> None:
    """pytorch/examples gcn and gat: ``nn.Parameter(torch.Tensor(n_in, n_out))`` then an
    init; ``torch.Tensor(5)`` is a 1-D float tensor of 5 elements, not the number 5."""
    w = torch.nn.Parameter(torch.Tensor(3, 2))
    torch.nn.init.xavier_uniform_(w)
    assert w.shape == (3, 2) and w.dtype == torch.float32 and w.requires_grad
    assert torch.Tensor(5).shape == (5,) and torch.Tensor().shape == (0,)
    assert torch.Tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="sizes"):
        torch.Tensor(3, 2.5)


def test_spmm_of_dense_matrices_is_mm() -> None:
    """pytorch/examples gcn calls ``torch.spmm(adj, support)``."""
    a = torch.tensor([[1.0, 2.0], [0.0, 1.0]])
    assert torch.spmm(a, torch.eye(2)).tolist() == a.tolist()


def test_inf_and_nan_results_are_silent() -> None:
    """The word language model's mask is ``torch.log(torch.tril(torch.ones(n, n)))``:
    PyTorch gives -inf without a warning, so must dualgraph (no NumPy RuntimeWarning)."""
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mask = torch.log(torch.tril(torch.ones(3, 3)))
        nan = torch.tensor([0.0]) / 0
        with pytest.raises(RuntimeWarning):  # the user's own NumPy calls still warn
            np.log(np.zeros(1))
    assert np.geterr() == before
    assert mask[0, 1].item() == -float("inf") and mask[1, 0].item() == 0.0
    assert np.isnan(nan.item())


def test_dropout2d_of_features_drops_elements() -> None:
    """pytorch/examples mnist_rnn applies ``nn.Dropout2d`` to (N, C) features: PyTorch
    warns and zeroes along the first two dimensions, here element by element."""
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="2-D input"):
        out = torch.nn.Dropout2d(0.5)(torch.ones(64, 32)).numpy()
    assert set(np.unique(out)) == {0.0, 2.0}
    assert not all((row == row[0]).all() for row in out)  # not whole rows
    torch.manual_seed(0)  # 3-D input is (N, C, L): whole (n, c) rows are zeroed
    with pytest.warns(UserWarning, match="3D input"):
        out3 = torch.nn.functional.dropout2d(torch.ones(8, 16, 5), 0.5).numpy()
    assert all(len(set(row)) == 1 for row in out3.reshape(-1, 5))
    assert len(set(out3[:, :, 0].ravel())) == 2


class _Layer(torch.nn.Linear):
    """pytorch/examples mnist_forward_forward's layer, as it subclasses Linear."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)


def test_layers_take_device_and_dtype_keywords() -> None:
    """``nn.Conv2d(..., device=device, dtype=...)``: the device is checked, the
    floating-point parameters and buffers are made in the dtype (integer buffers stay)."""
    nn = torch.nn
    makers = [lambda **k: nn.Linear(3, 4, **k), lambda **k: nn.Conv1d(3, 4, 3, **k),
              lambda **k: nn.Conv2d(3, 4, 3, **k), lambda **k: nn.ConvTranspose2d(3, 4, 3, **k),
              lambda **k: nn.LayerNorm(4, **k), lambda **k: nn.GroupNorm(2, 4, **k),
              lambda **k: nn.BatchNorm1d(4, **k), lambda **k: nn.BatchNorm2d(4, **k),
              lambda **k: nn.InstanceNorm2d(4, affine=True, **k),
              lambda **k: nn.MultiheadAttention(4, 2, **k), lambda **k: _Layer(3, 4, **k)]
    for make in makers:
        m = make(device=torch.device("cpu"), dtype=torch.float64)
        tensors = list(m.parameters()) + list(m.buffers())
        assert tensors and all(t.dtype == torch.float64 for t in tensors
                               if t.dtype.kind == "f"), m
        assert next(make(device="cpu").parameters()).dtype == torch.float32
        with pytest.raises(RuntimeError, match="'cuda'"):
            make(device="cuda")
    assert nn.BatchNorm2d(4, dtype=torch.float64).num_batches_tracked.dtype == torch.int64
    layer = _Layer(3, 2, True, "cpu", torch.float64)
    assert layer(torch.ones(1, 3, dtype=torch.float64)).dtype == torch.float64


def test_randint_of_high_with_size_keyword() -> None:
    """pytorch/examples mnist_forward_forward: ``torch.randint(9, size=(1,))``."""
    torch.manual_seed(0)
    draws = torch.cat([torch.randint(3, size=(1,)) for _ in range(60)])
    assert draws.dtype == torch.int64 and set(draws.tolist()) == {0, 1, 2}


def test_factories_take_the_size_keyword() -> None:
    """pytorch/examples gat: ``nn.Parameter(torch.empty(size=(n_in, n_out)))``."""
    for make in (torch.zeros, torch.ones, torch.empty, torch.rand, torch.randn):
        assert make(size=(2, 3)).shape == (2, 3) and make(size=[4]).shape == (4,)
    assert torch.ones(size=(2,), dtype=torch.float64).dtype == torch.float64
    with pytest.raises(TypeError, match="multiple values"):
        torch.zeros(2, size=(2,))


def test_max_and_min_of_two_tensors_are_elementwise() -> None:
    """PPO's clipped objective ``-torch.min(surr1, surr2)``: a tensor second argument is
    PyTorch's ``max(input, other)``, with the gradient going to the chosen side."""
    a = torch.tensor([1.0, 3.0], requires_grad=True)
    b = torch.tensor([2.0, 2.0])
    assert torch.max(a, b).tolist() == [2.0, 3.0] and a.min(b).tolist() == [1.0, 2.0]
    torch.min(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 0.0]
    assert torch.max(a, 0).indices.item() == 1  # an int is still a dim

    @torch.compile
    def clipped(x, y):
        return torch.min(x, y) + torch.max(x, y)

    assert clipped(torch.tensor([1.0, 5.0]), torch.tensor([2.0, 2.0])).tolist() == [3.0, 7.0]


def test_autograd_variable_of_old_tutorials() -> None:
    x = torch.autograd.Variable(torch.ones(2), requires_grad=True)
    (x * 3).sum().backward()
    assert x.requires_grad and x.grad.tolist() == [3.0, 3.0]
    assert not torch.autograd.Variable(torch.ones(2)).requires_grad


def test_autograd_variable_of_a_traced_value() -> None:
    """TRPO's KL to the old policy, ``Variable(mean1.data)``, and its ``Variable(v)`` of an
    argument, inside a compiled function: a tensor outside autograd, as eagerly."""
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))

    @torch.compile
    def f(x):
        y = w * torch.autograd.Variable(x)
        loss = (y * torch.autograd.Variable(y.data)).sum()
        loss.backward()
        return loss

    assert f(torch.tensor([3.0, 4.0])).item() == 73.0
    assert w.grad.tolist() == [9.0, 32.0] and f.stats.traces == 1  # x * y: y held constant


def test_autograd_grad_of_a_parameters_generator_in_a_compiled_function() -> None:
    """TRPO's Fisher-vector product: ``autograd.grad(kl, model.parameters(),
    create_graph=True)`` (a generator, as eagerly) and a second ``grad`` of the product."""
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    x = torch.tensor(np.random.default_rng(0).standard_normal((4, 3)), dtype=torch.float32)

    def fvp(v):
        kl = (net(x) ** 3).mean()
        grads = torch.autograd.grad(kl, net.parameters(), create_graph=True)
        flat = torch.cat([g.view(-1) for g in grads])
        grads = torch.autograd.grad((flat * v).sum(), net.parameters())
        return torch.cat([g.contiguous().view(-1) for g in grads]).data + 0.1 * v

    v = torch.arange(8.0) / 8
    compiled = torch.compile(fvp)
    for _ in range(2):
        torch.testing.assert_close(compiled(v), fvp(v), rtol=1e-6, atol=1e-7)
    assert compiled.stats.traces == 1


def test_new_factories_of_a_traced_value() -> None:
    """pytorch/examples legacy snli: ``h0 = c0 = inputs.new_zeros(state_shape)`` in the
    encoder's forward, inside a compiled step."""

    @torch.compile
    def f(x):
        h0 = x.new_zeros((2, 3))
        return x + h0 + x.new_ones(2, 3) + x.new_full((2, 3), 2.0) + x.new_tensor([1.0, 0, 0])

    out = f(torch.ones(2, 3, dtype=torch.float64))
    assert out.dtype == torch.float64 and out.tolist() == [[5.0, 4.0, 4.0]] * 2


def test_set_detect_anomaly_as_a_call_and_a_block() -> None:
    x = torch.tensor([0.0, 1.0], requires_grad=True)

    def nan_backward():
        (torch.sqrt(x) * 0).sum().backward()  # 0 * inf: a nan gradient

    with torch.autograd.set_detect_anomaly(True):
        with pytest.raises(RuntimeError, match="nan"):
            nan_backward()
    nan_backward()  # the block restored the mode: no error
    torch.autograd.set_detect_anomaly(True)
    try:
        with pytest.raises(RuntimeError, match="nan"):
            nan_backward()
    finally:
        torch.autograd.set_detect_anomaly(False)
    nan_backward()


def test_add_with_the_scale_first_of_old_tutorials() -> None:
    """pytorch/tutorials' first char-RNN classifier updates its parameters with
    ``p.data.add_(-learning_rate, p.grad.data)``: PyTorch's deprecated
    ``add_(Number alpha, Tensor other)``, still accepted with a warning. Eager and in a
    compiled step, as ``sub_`` too."""

    def update(p, g):
        p.data.add_(-0.5, g)
        p.sub_(2.0, g)
        return p

    for fn in (update, torch.compile(update)):
        p = torch.tensor([1.0, 2.0, 3.0])
        with pytest.warns(UserWarning, match=r"add_\(Number alpha, Tensor other\)"):
            out = fn(p, torch.tensor([2.0, 0.0, -2.0]))
        assert out.tolist() == [-4.0, 2.0, 8.0] and p.tolist() == [-4.0, 2.0, 8.0]


def test_writes_through_data_of_a_traced_value() -> None:
    """``x.data.add_(...)`` of an argument or an intermediate inside a compiled function
    changes the value itself, as it does eagerly (``.data`` is a detached alias); through
    the ``.data`` of a value that requires grad the signature runs eagerly (the compiled
    call could not keep its autograd history), with the same results."""

    def step(p, g):
        q = p * 2
        q.data.add_(g, alpha=-0.5)
        p[0].data.mul_(10)
        return q, q.data * 3

    def grad_step(x):
        y = x * 2
        y.data.add_(1.0)
        (y.data * 3 + y * y).sum().backward()
        return y

    results = []
    for compiled in (False, True):
        p = torch.tensor([1.0, 2.0])
        q, r = (torch.compile(step) if compiled else step)(p, torch.tensor([2.0, 2.0]))
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = (torch.compile(grad_step) if compiled else grad_step)(x)
        assert compiled == any(".data of a value that requires grad" in str(w.message)
                               for w in caught)
        results.append([p.tolist(), q.tolist(), r.tolist(), y.tolist(), x.grad.tolist()])
    assert results[0] == results[1] == [[10.0, 2.0], [1.0, 3.0], [3.0, 9.0], [3.0, 5.0],
                                        [12.0, 20.0]]
