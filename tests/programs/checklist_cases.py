"""The PyTorch surface real programs, tutorials and an op suite were found to use, each
written once for torch and dualgraph (``lib`` is either module) and run to named arrays.
`record_checklist_goldens.py` records torch's (float64 where it computes), and
`test_checklist.py` compares dualgraph's with them.

A case is ``(name, fn(lib) -> dict[str, np.ndarray])``. Random draws come from NumPy
generators seeded per case, so both libraries see the same numbers; parameters are filled
by name (`fill`), so a module starts from the same weights under both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def arr(t: Any) -> np.ndarray:
    """A tensor (or number) as a NumPy array."""
    if hasattr(t, "detach"):
        return t.detach().numpy().copy()
    return np.asarray(t)


def normal(lib: Any, seed: int, *shape: int, grad: bool = True) -> Any:
    x = np.random.default_rng(seed).standard_normal(shape)
    return lib.tensor(x, dtype=lib.float64, requires_grad=grad)


def fill(lib: Any, module: Any, seed: int = 0, scale: float = 0.3) -> Any:
    """``module`` in float64 with every parameter drawn from a generator seeded by its
    name (so both libraries' modules start from the same weights)."""
    module = module.double()
    with lib.no_grad():
        for name, p in module.named_parameters():
            rng = np.random.default_rng([seed, sum(name.encode())])
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * scale))
    return module


def grads(named: dict, **tensors: Any) -> dict:
    """``named`` with ``grad_<name>`` for each tensor that has a gradient."""
    for k, t in tensors.items():
        if t.grad is not None:
            named[f"grad_{k}"] = arr(t.grad)
    return named


def backward_of(lib: Any, y: Any, seed: int) -> None:
    """``y.backward`` under a fixed cotangent."""
    cot = np.random.default_rng(seed).standard_normal(tuple(y.shape))
    (y * lib.tensor(cot, dtype=y.dtype)).sum().backward()


def _values_and_grads(fn: Callable, *shapes: tuple, seed: int = 0) -> Callable:
    """A case of a differentiable function of float64 normal arguments: its value and
    the gradients of its arguments."""
    def case(lib: Any) -> dict:
        xs = [normal(lib, seed + k, *s) for k, s in enumerate(shapes)]
        y = fn(lib, *xs)
        backward_of(lib, y, seed + 100)
        return grads({"y": arr(y)}, **{f"x{k}": x for k, x in enumerate(xs)})
    return case


# ------------------------------------------------------------------- missing-name table
def data_utilities(lib: Any) -> dict:
    data = lib.utils.data
    xs = lib.arange(20, dtype=lib.float64).reshape(10, 2)
    ys = lib.arange(10)
    ds = data.TensorDataset(xs, ys)
    out = {"len": np.array(len(ds)), "item3": arr(ds[3][0])}
    batches = list(data.DataLoader(ds, batch_size=4))
    out["sizes"] = np.array([len(b[1]) for b in batches])
    out["first"] = arr(batches[0][0])
    out["dropped"] = np.array([len(b[1]) for b in data.DataLoader(ds, batch_size=4,
                                                                   drop_last=True)])

    class Squares(data.Dataset):
        def __len__(self) -> int:
            return 5

        def __getitem__(self, i: int) -> Any:
            return lib.tensor([float(i) ** 2]), i

    loader = data.DataLoader(Squares(), batch_size=2,
                             collate_fn=lambda items: [a for a, _ in items])
    out["collated"] = np.concatenate([arr(lib.cat(b)) for b in loader])
    default = next(iter(data.DataLoader(Squares(), batch_size=3)))
    out["default_collate"] = arr(default[0])
    out["default_collate_ints"] = arr(default[1])
    out["sequential"] = np.array(list(data.SequentialSampler(range(4))))
    batch = data.BatchSampler(data.SequentialSampler(range(7)), batch_size=3, drop_last=False)
    out["batch_sampler"] = np.array([len(b) for b in batch])
    split = data.random_split(range(10), [7, 3], generator=lib.Generator().manual_seed(0))
    out["split_sizes"] = np.array([len(s) for s in split])
    return out


def multinomial(lib: Any) -> dict:
    # Rows with one non-zero weight, and draws without replacement of every category:
    # results that do not depend on the generator.
    probs = lib.tensor([[0.0, 0.0, 3.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    one = lib.multinomial(probs, 5, replacement=True)
    lib.manual_seed(0)
    perm = lib.multinomial(lib.ones(6), 6)
    return {"one": arr(one), "dtype": np.array(str(one.dtype).split(".")[-1]),
            "perm_sorted": np.sort(arr(perm)), "shape": np.array(perm.shape)}


def _linear_steps(lib: Any, make_opt: Callable, steps: int = 4, sched: Callable | None = None,
                  closure_loss: bool = False) -> dict:
    model = fill(lib, lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(),
                                        lib.nn.Linear(4, 1)))
    x, y = normal(lib, 1, 6, 3, grad=False), normal(lib, 2, 6, 1, grad=False)
    opt = make_opt(model)
    s = sched(opt) if sched else None
    losses, lrs = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
        if s is not None:
            s.step(loss.item()) if closure_loss else s.step()
    out = {"losses": np.array(losses), "lrs": np.array(lrs)}
    for name, p in model.named_parameters():
        out[name] = arr(p)
    return out


def adamw_groups(lib: Any) -> dict:
    def make(m: Any) -> Any:
        return lib.optim.AdamW([{"params": m[0].parameters(), "weight_decay": 0.1},
                                {"params": m[2].parameters(), "lr": 0.05}],
                               lr=0.01, betas=(0.8, 0.9))
    return _linear_steps(lib, make)


def devices(lib: Any) -> dict:
    t = lib.zeros(2, 3, device="cpu")
    u = lib.ones(2, device=lib.device("cpu"))
    return {"device": np.array(str(t.device)), "type": np.array(t.device.type),
            "same": np.array(t.device == lib.device("cpu")),
            "cpu": arr(u.cpu()), "to": arr(u.to("cpu")), "is_cuda": np.array(u.is_cuda),
            "cuda": np.array(lib.cuda.is_available()),
            "to_dtype": arr(u.to("cpu", lib.float64)),
            "dtype_after_to": np.array(str(u.to("cpu", lib.float64).dtype).split(".")[-1]),
            "version_cuda": np.array(lib.version.cuda is None),
            "cpu_module": np.array([lib.cpu.is_available(), lib.cpu.device_count() == 1])}


def inference_mode(lib: Any) -> dict:
    w = lib.ones(2, requires_grad=True)
    with lib.inference_mode():
        a = w * 2
        inside = lib.is_inference_mode_enabled()

    @lib.inference_mode()
    def f(v: Any) -> Any:
        return v * 3

    b = f(w)
    return {"a": arr(a), "a_grad": np.array(a.requires_grad), "inside": np.array(inside),
            "b": arr(b), "b_grad": np.array(b.requires_grad),
            "after": np.array(lib.is_inference_mode_enabled())}


def dtype_aliases(lib: Any) -> dict:
    names = ["long", "int", "float", "double", "half", "short", "int8", "uint8", "int16",
             "int32", "int64", "float16", "float32", "float64", "bool"]
    return {n: np.array(str(arr(lib.zeros(1, dtype=getattr(lib, n))).dtype)) for n in names}


def contiguous(lib: Any) -> dict:
    x = lib.arange(6.0).reshape(2, 3).t()
    c = x.contiguous()
    return {"c": arr(c), "was": np.array(x.is_contiguous()), "now": np.array(c.is_contiguous()),
            "view": arr(c.view(6))}


def nn_init(lib: Any) -> dict:
    init = lib.nn.init
    w = lib.empty(30, 40)
    out = {}
    for name, call in [("zeros", lambda: init.zeros_(w)), ("ones", lambda: init.ones_(w)),
                       ("constant", lambda: init.constant_(w, 0.25)),
                       ("eye", lambda: init.eye_(w))]:
        call()
        out[name] = arr(w)
    c = lib.empty(4, 2, 3)
    init.dirac_(c)
    out["dirac"] = arr(c)
    # Random initialisers: the bounds and spread PyTorch's formulas give.
    lib.manual_seed(0)
    for name, call, bound in [
            ("xavier_uniform", lambda: init.xavier_uniform_(w), (6 / 70) ** 0.5),
            ("kaiming_uniform", lambda: init.kaiming_uniform_(w, a=5 ** 0.5), (1 / 40) ** 0.5),
            ("uniform", lambda: init.uniform_(w, -0.5, 0.5), 0.5)]:
        call()
        out[name] = np.array(float(w.abs().max()) <= bound and float(w.abs().max()) > bound * 0.9)
    big = lib.empty(400, 500)
    for name, call, std in [("normal", lambda: init.normal_(big, 0.0, 0.02), 0.02),
                            ("xavier_normal", lambda: init.xavier_normal_(big), (2 / 900) ** 0.5),
                            ("kaiming_normal", lambda: init.kaiming_normal_(big),
                             (2 / 500) ** 0.5),
                            ("trunc_normal", lambda: init.trunc_normal_(big, std=0.02), None)]:
        call()
        if std is not None:
            out[name] = np.array(abs(float(big.std()) / std - 1) < 0.02)
        else:
            out[name] = np.array(float(big.abs().max()) <= 2.0)
    out["gain_relu"] = np.array(init.calculate_gain("relu"))
    out["gain_leaky"] = np.array(init.calculate_gain("leaky_relu", 0.2))
    return out


def clip_grad(lib: Any) -> dict:
    a, b = normal(lib, 1, 3, 4), normal(lib, 2, 5)
    ((a ** 2).sum() * 3 + (b ** 3).sum()).backward()
    total = lib.nn.utils.clip_grad_norm_([a, b], max_norm=1.5)
    c = normal(lib, 3, 4)
    (c * 10).sum().backward()
    lib.nn.utils.clip_grad_value_([c], 0.5)
    inf_total = lib.nn.utils.clip_grad_norm_([c], 0.1, norm_type=float("inf"))
    return {"total": arr(total), "a": arr(a.grad), "b": arr(b.grad), "c": arr(c.grad),
            "inf_total": arr(inf_total)}


# --------------------------------------------------------------- needed by one program
def one_program_names(lib: Any) -> dict:
    a, b = normal(lib, 1, 3, 4), normal(lib, 2, 4, 2)
    y = a.mm(b)
    backward_of(lib, y, 5)
    relu = lib.nn.ReLU(True)
    r = lib.tensor([-1.0, 2.0])
    r2 = relu(r)
    lib.backends.cudnn.benchmark = True
    like = lib.randn_like(a)
    return grads({"mm": arr(y), "relu": arr(r2), "inplace": np.array(r2 is r),
                  "relu_src": arr(r), "like_shape": np.array(like.shape),
                  "like_dtype": np.array(str(arr(like).dtype)),
                  "parallel": np.array(hasattr(lib.nn.parallel, "DistributedDataParallel"))},
                 a=a, b=b)


def adadelta(lib: Any) -> dict:
    return _linear_steps(lib, lambda m: lib.optim.Adadelta(m.parameters(), lr=0.5, rho=0.8))


def step_lr(lib: Any) -> dict:
    return _linear_steps(lib, lambda m: lib.optim.SGD(m.parameters(), lr=0.1), steps=7,
                         sched=lambda o: lib.optim.lr_scheduler.StepLR(o, 2, gamma=0.5))


def _module_case(make: Callable, *inputs: tuple, seed: int = 0, out_index: int | None = None,
                 eval_mode: bool = True) -> Callable:
    """A case of a module filled by `fill`: its output and the gradients of its input
    and of every parameter under a fixed cotangent."""
    def case(lib: Any) -> dict:
        m = fill(lib, make(lib), seed)
        if eval_mode:
            m.eval()
        xs = [normal(lib, seed + 10 + k, *s) for k, s in enumerate(inputs)]
        y = m(*xs)
        if out_index is not None:
            y = y[out_index]
        backward_of(lib, y, seed + 20)
        out = grads({"y": arr(y)}, **{f"x{k}": x for k, x in enumerate(xs)})
        for name, p in m.named_parameters():
            out[f"grad_{name}"] = arr(p.grad)
        return out
    return case


transformer = _module_case(
    lambda lib: lib.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1,
                                   num_decoder_layers=1, dim_feedforward=16, dropout=0.0),
    (5, 2, 8), (3, 2, 8))
encoder = _module_case(
    lambda lib: lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True), num_layers=2, enable_nested_tensor=False),
    (2, 5, 8), seed=1)
lstm = _module_case(lambda lib: lib.nn.LSTM(3, 4, num_layers=2, bidirectional=True),
                    (5, 2, 3), seed=2, out_index=0)
gru = _module_case(lambda lib: lib.nn.GRU(3, 4, batch_first=True), (2, 5, 3), seed=3,
                   out_index=0)
rnn = _module_case(lambda lib: lib.nn.RNN(3, 4, nonlinearity="relu"), (5, 2, 3), seed=4,
                   out_index=0)


# ------------------------------------------------------------ tutorials and the probe
def module_hooks(lib: Any) -> dict:
    lin = fill(lib, lib.nn.Linear(3, 2))
    seen: dict = {}
    lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    lin.register_forward_hook(lambda m, args, out: out + 1)
    lin.register_full_backward_hook(
        lambda m, gi, go: seen.update(gi=arr(gi[0]), go=arr(go[0])))
    x = normal(lib, 1, 4, 3)
    y = lin(x)
    backward_of(lib, y, 2)
    return grads({"y": arr(y), **seen}, x=x)


def custom_function(lib: Any) -> dict:
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, k: float) -> Any:
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** 3 * k

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 3 * x ** 2 * ctx.k, None

    x = normal(lib, 1, 5)
    y = Cube.apply(x, 0.5)
    backward_of(lib, y, 2)
    return grads({"y": arr(y)}, x=x)


def jacobian_hessian(lib: Any) -> dict:
    x = normal(lib, 1, 3, grad=False)
    f = lambda v: (v ** 2).sum() * v  # noqa: E731
    g = lambda v: (v.sin() * v).sum()  # noqa: E731
    F = lib.autograd.functional
    return {"jac": arr(F.jacobian(f, x)), "hess": arr(F.hessian(g, x))}


def optimizer_state(lib: Any) -> dict:
    w = normal(lib, 1, 3)
    opt = lib.optim.Adam([w], lr=0.1)
    (w ** 2).sum().backward()
    opt.step()
    sd = opt.state_dict()
    v = normal(lib, 2, 2)
    opt.add_param_group({"params": [v], "lr": 0.01})
    opt2 = lib.optim.Adam([normal(lib, 1, 3)], lr=0.5)
    opt2.load_state_dict(sd)
    return {"step": arr(sd["state"][0]["step"]), "exp_avg": arr(sd["state"][0]["exp_avg"]),
            "lr_loaded": np.array(opt2.param_groups[0]["lr"]),
            "groups": np.array(len(opt.param_groups)),
            "group_lr": np.array(opt.param_groups[1]["lr"]),
            "group_betas": np.array(opt.param_groups[1]["betas"])}


sgd_nesterov = lambda lib: _linear_steps(lib, lambda m: lib.optim.SGD(  # noqa: E731
    m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))
rmsprop = lambda lib: _linear_steps(lib, lambda m: lib.optim.RMSprop(  # noqa: E731
    m.parameters(), lr=0.01, momentum=0.5, centered=True))
adagrad = lambda lib: _linear_steps(lib, lambda m: lib.optim.Adagrad(  # noqa: E731
    m.parameters(), lr=0.1, lr_decay=0.01))


def _sched(make: Callable, steps: int = 8, plateau: bool = False) -> Callable:
    return lambda lib: _linear_steps(lib, lambda m: lib.optim.SGD(m.parameters(), lr=0.1),
                                     steps=steps, sched=lambda o: make(lib.optim.lr_scheduler, o),
                                     closure_loss=plateau)


SCHEDULERS = {
    "multistep": _sched(lambda s, o: s.MultiStepLR(o, [2, 5], gamma=0.3)),
    "exponential": _sched(lambda s, o: s.ExponentialLR(o, 0.9)),
    "cosine": _sched(lambda s, o: s.CosineAnnealingLR(o, T_max=5, eta_min=0.01)),
    "lambda": _sched(lambda s, o: s.LambdaLR(o, lambda e: 1 / (1 + e))),
    "onecycle": _sched(lambda s, o: s.OneCycleLR(o, max_lr=0.5, total_steps=10)),
    "plateau": _sched(lambda s, o: s.ReduceLROnPlateau(o, factor=0.5, patience=0,
                                                       threshold=0.5), plateau=True),
}


def losses_and_layers(lib: Any) -> dict:
    F = lib.nn.functional
    x, t = normal(lib, 1, 4, 3), lib.tensor(np.random.default_rng(2).random((4, 3)))
    pw = lib.tensor([0.5, 2.0, 3.0], dtype=lib.float64)
    loss = F.binary_cross_entropy_with_logits(x, t, pos_weight=pw)
    g = F.glu(x.repeat(1, 2) * 0.5, dim=1)
    ps = F.pixel_shuffle(normal(lib, 3, 1, 8, 2, 3, grad=False), 2)
    total = loss + (g * normal(lib, 4, 4, 3, grad=False)).sum()
    total.backward()
    return {"loss": arr(loss), "glu": arr(g), "shuffle": arr(ps), "grad_x": arr(x.grad)}


def tensor_odds(lib: Any) -> dict:
    s = lib.zeros(2, 1, 3)
    s.squeeze_()
    p = lib.nn.Parameter(lib.ones(3))
    p.data = lib.arange(3.0)
    i8 = lib.tensor([100, -100, 7], dtype=lib.int8)
    u8 = lib.tensor([200, 100, 7], dtype=lib.uint8)
    buf = lib.empty(3)
    lib.add(lib.ones(3), lib.arange(3.0), out=buf)
    m = lib.empty(2)
    lib.mul(lib.tensor([2.0, 3.0]), 4, out=m)
    return {"squeezed": np.array(s.shape), "param": arr(p),
            "param_is_leaf": np.array(p.is_leaf), "i8_sum": arr(i8 + i8),
            "u8_sum": arr(u8 + u8), "u8_dtype": np.array(str(arr(u8 + 1).dtype)),
            "i8_mul": arr(i8 * 3), "out": arr(buf), "out_mul": arr(m)}


# ------------------------------------------------------------------ op-suite misses
def op_suite(lib: Any) -> dict:
    F = lib.nn.functional
    x = normal(lib, 1, 2, 3, 4, 4, 5)
    out = {}
    ys = {
        "clip": x.clip(-0.5, 0.7),
        "clip_min": x.clip(min=0.1),
        "conv3d": F.conv3d(x, normal(lib, 2, 4, 3, 2, 2, 2), normal(lib, 3, 4), padding=1,
                           stride=(1, 2, 1)),
        "conv_t3d": F.conv_transpose3d(x, normal(lib, 4, 3, 2, 2, 3, 2), stride=2,
                                       output_padding=1),
        "avg_pool3d": F.avg_pool3d(x, 2, stride=1, padding=1, count_include_pad=False),
        "trilinear": F.interpolate(x, size=(3, 5, 6), mode="trilinear"),
        "trilinear_ac": F.interpolate(x, scale_factor=1.5, mode="trilinear", align_corners=True),
        "nearest5d": F.interpolate(x, size=(3, 7, 5), mode="nearest"),
        "nearest_exact": F.interpolate(x[0], size=(5, 7), mode="nearest-exact"),
        "nearest_exact5d": F.interpolate(x, scale_factor=(1.5, 0.5, 2), mode="nearest-exact"),
    }
    q, k, v = normal(lib, 5, 1, 4, 3, 2), normal(lib, 6, 1, 2, 5, 2), normal(lib, 7, 1, 2, 5, 2)
    ys["sdpa_gqa"] = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
    total = sum((y * lib.tensor(np.random.default_rng(i).standard_normal(tuple(y.shape))))
                .sum() for i, y in enumerate(ys.values()))
    total.backward()
    for name, y in ys.items():
        out[name] = arr(y)
    out.update(grad_x=arr(x.grad), grad_q=arr(q.grad), grad_k=arr(k.grad))
    # max_unpool2d puts the pooled values back where max_pool2d found them.
    p = normal(lib, 8, 1, 2, 4, 6)
    pooled, idx = F.max_pool2d(p, 2, return_indices=True)
    un = F.max_unpool2d(pooled, idx, 2)
    backward_of(lib, un, 9)
    out.update(unpool=arr(un), indices=arr(idx), grad_unpool=arr(p.grad))
    base = lib.ones(3, 4, dtype=lib.float64)
    src = lib.arange(12, dtype=lib.float64).reshape(3, 4) + 1
    index = lib.tensor([[0, 1, 2, 0], [2, 0, 0, 1], [1, 2, 1, 2]])
    out["scatter_add"] = arr(base.scatter(0, index, src, reduce="add"))
    out["scatter_mul"] = arr(base.scatter(0, index, src, reduce="multiply"))
    out["scatter_value_add"] = arr(base.scatter(1, index[:, :2], 2.5, reduce="add"))
    i = lib.tensor([1, -8, 255, 3])
    out["shl"] = arr(lib.bitwise_left_shift(i, 2))
    out["shr"] = arr(lib.bitwise_right_shift(i, lib.tensor([1, 2, 3, 0])))
    out["shl_op"] = arr(i << 1)
    out["shr_i8"] = arr(lib.bitwise_right_shift(lib.tensor([-128, 64], dtype=lib.int8), 3))
    return out


# ------------------------------------------------------------- names added since
def integer_and_float_bits(lib: Any) -> dict:
    a = lib.tensor([12, -18, 0, 7, 0, -4, 9])
    b = lib.tensor([8, 24, 5, 0, 0, 6, -6])
    x = lib.tensor([0.0, -0.0, 1.0, 8.0, -3.5, float("inf"), float("nan"), 1e-40, 0.75,
                    3e38, -2.0 ** -149])
    m, e = lib.frexp(x)
    f = normal(lib, 1, 6)
    fm, fe = lib.frexp(f)
    backward_of(lib, fm, 2)
    u = lib.tensor([1.0, 0.0, 2.0, 3.0, float("nan"), 5.0], dtype=lib.float64,
                   requires_grad=True)
    v = lib.tensor([2.0, 0.0, 2.0, 1.0, 1.0, -float("inf")], dtype=lib.float64,
                   requires_grad=True)
    n = lib.nextafter(u, v)
    backward_of(lib, n, 3)
    out32 = lib.nextafter(lib.tensor([1.0, 0.0, -1.0]), lib.tensor([2.0, -1.0, 0.0]))
    return grads({"gcd": arr(lib.gcd(a, b)), "lcm": arr(lib.lcm(a, b)),
                  "gcd_i32": arr(lib.gcd(a.int(), lib.tensor(6, dtype=lib.int32))),
                  "lcm_method": arr(a.lcm(b)), "mantissa": arr(m), "exponent": arr(e),
                  "frexp_f": arr(fm), "frexp_e": arr(fe), "nextafter": arr(n),
                  "nextafter32": arr(out32)}, f=f, u=u, v=v)


def constructors(lib: Any) -> dict:
    import array

    buf = array.array("f", [1.5, 2.5, 3.5, 4.5])
    t = lib.frombuffer(buf, dtype=lib.float32, count=2, offset=4)
    t.add_(1.0)  # shares the buffer's memory
    s = lib.empty_strided((2, 3), (1, 2), dtype=lib.float64)
    s.fill_(2.0)
    return {"range": arr(lib.range(1, 4)), "range_step": arr(lib.range(0, 1, 0.3)),
            "range_int": arr(lib.range(1, 4, dtype=lib.int64)),
            "range_down": arr(lib.range(3, 0, -1.5)),
            "frombuffer": arr(t), "buffer": np.array(buf.tolist()),
            "frombuffer_int": arr(lib.frombuffer(bytearray(b"\x01\x00\x02\x00"),
                                                 dtype=lib.int16)),
            "strided": np.array(s.stride()), "strided_shape": np.array(s.shape),
            "strided_values": arr(s)}


def kl_div_top_level(lib: Any) -> dict:
    x0 = normal(lib, 1, 3, 4)
    x = lib.log_softmax(x0, 1)
    t = lib.softmax(normal(lib, 2, 3, 4, grad=False), 1)
    y = (lib.kl_div(x, t) * 2 + lib.kl_div(x, t, 1)
         + lib.kl_div(x, t.log(), 2, log_target=True)).sum()
    y.backward()
    return {"y": arr(y), "none": arr(lib.kl_div(x, t)), "grad": arr(x0.grad)}


def reductions_out(lib: Any) -> dict:
    x = normal(lib, 1, 3, 4, grad=False)
    out = {}
    for name, call in [
            ("sum", lambda o: lib.sum(x, 1, out=o)), ("mean", lambda o: lib.mean(x, 0, out=o)),
            ("prod", lambda o: lib.prod(x, 1, out=o)), ("amax", lambda o: lib.amax(x, 1, out=o)),
            ("logsumexp", lambda o: lib.logsumexp(x, 1, out=o)),
            ("std", lambda o: lib.std(x, 1, out=o)), ("cumsum", lambda o: lib.cumsum(x, 1, out=o)),
            ("norm", lambda o: lib.norm(x, dim=1, out=o))]:
        o = lib.empty(0, dtype=lib.float64)
        r = call(o)
        out[name] = arr(o)
        out[name + "_same"] = np.array(r is o)
    i = lib.empty(0, dtype=lib.int64)
    lib.argmax(x, 1, out=i)
    out["argmax"] = arr(i)
    values, indices = lib.empty(0, dtype=lib.float64), lib.empty(0, dtype=lib.int64)
    r = lib.max(x, 1, out=(values, indices))
    out.update(max_values=arr(values), max_indices=arr(indices),
               max_named=np.array(r.values is values))
    sv, si = lib.empty(0, dtype=lib.float64), lib.empty(0, dtype=lib.int64)
    lib.sort(x, 1, descending=True, out=(sv, si))
    out.update(sort_values=arr(sv), sort_indices=arr(si))
    return out


def global_module_hooks(lib: Any) -> dict:
    from importlib import import_module

    M = import_module(lib.__name__ + ".nn.modules.module")
    log: list = []
    net = fill(lib, lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2)))
    net[0].register_forward_hook(lambda m, a, o: log.append(f"own {type(m).__name__}"))
    handles = [
        M.register_module_forward_pre_hook(lambda m, a: log.append(f"pre {type(m).__name__}")),
        M.register_module_forward_hook(
            lambda m, a, o: o * 2 if isinstance(m, lib.nn.Linear) else None),
        M.register_module_full_backward_hook(
            lambda m, gi, go: log.append(f"bw {type(m).__name__}")),
        M.register_module_full_backward_pre_hook(
            lambda m, go: log.append(f"bwpre {type(m).__name__}")),
    ]
    x = normal(lib, 1, 2, 3)
    y = net(x)
    backward_of(lib, y, 2)
    for h in handles:
        h.remove()
    after = net(x)
    seen: list = []
    regs = [M.register_module_parameter_registration_hook(
                lambda m, n, p: seen.append(f"p {n}")),
            M.register_module_module_registration_hook(lambda m, n, s: seen.append(f"m {n}")),
            M.register_module_buffer_registration_hook(lambda m, n, b: seen.append(f"b {n}"))]
    lib.nn.BatchNorm1d(2)
    lib.nn.Sequential(lib.nn.Linear(1, 1))
    for h in regs:
        h.remove()
    lib.nn.Linear(1, 1)
    return grads({"y": arr(y), "after": arr(after), "log": np.array(log),
                  "registered": np.array(seen)}, x=x)


def load_from_state_dict_override(lib: Any) -> dict:
    class Renamed(lib.nn.Linear):
        """Loads checkpoints that call its weight ``w``."""

        def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
            old = prefix + "w"
            if old in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(old)
            super()._load_from_state_dict(state_dict, prefix, *args)

    src = fill(lib, lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.Tanh()))
    sd = {("0.w" if k == "0.weight" else k): v for k, v in src.state_dict().items()}
    dst = lib.nn.Sequential(Renamed(3, 2), lib.nn.Tanh()).double()
    result = dst.load_state_dict(sd)
    x = normal(lib, 1, 4, 3, grad=False)
    return {"y": arr(dst(x)), "want": arr(src(x)), "missing": np.array(len(result.missing_keys)),
            "unexpected": np.array(len(result.unexpected_keys))}


def _sampled(mode: str, padding: str, corners: bool, seed: int) -> Callable:
    def fn(lib: Any, x: Any, g: Any) -> Any:
        return lib.nn.functional.grid_sample(x, g * 1.4, mode=mode, padding_mode=padding,
                                             align_corners=corners)
    return _values_and_grads(fn, (2, 3, 5, 6), (2, 4, 3, 2), seed=seed)


def _resized(seed: int, shape: tuple, **kw: Any) -> Callable:
    return _values_and_grads(lambda lib, x: lib.nn.functional.interpolate(x, **kw), shape,
                             seed=seed)


RESAMPLING = {
    "grid_sample_bicubic": _sampled("bicubic", "zeros", False, 10),
    "grid_sample_bicubic_border": _sampled("bicubic", "border", True, 11),
    "grid_sample_bicubic_reflection": _sampled("bicubic", "reflection", False, 12),
    "area_5d": _resized(13, (2, 3, 5, 6, 7), size=(2, 3, 5), mode="area"),
    "area_5d_scale": _resized(14, (1, 2, 4, 5, 3), scale_factor=(0.5, 0.7, 1.5), mode="area"),
    "antialias_bilinear": _resized(15, (2, 2, 8, 11), size=(3, 4), mode="bilinear",
                                   antialias=True),
    "antialias_bilinear_scale": _resized(16, (1, 2, 9, 7), scale_factor=(0.3, 1.6),
                                         mode="bilinear", antialias=True),
    "antialias_bicubic": _resized(17, (2, 2, 8, 11), size=(5, 4), mode="bicubic",
                                  antialias=True),
    "antialias_bicubic_corners": _resized(18, (1, 2, 9, 10), scale_factor=0.4,
                                          mode="bicubic", antialias=True, align_corners=True),
}


CASES: list[tuple[str, Callable]] = [
    ("data_utilities", data_utilities),
    ("multinomial", multinomial),
    ("adamw_groups", adamw_groups),
    ("devices", devices),
    ("inference_mode", inference_mode),
    ("dtype_aliases", dtype_aliases),
    ("contiguous", contiguous),
    ("nn_init", nn_init),
    ("clip_grad", clip_grad),
    ("one_program_names", one_program_names),
    ("adadelta", adadelta),
    ("step_lr", step_lr),
    ("transformer", transformer),
    ("transformer_encoder", encoder),
    ("lstm", lstm),
    ("gru", gru),
    ("rnn", rnn),
    ("module_hooks", module_hooks),
    ("custom_function", custom_function),
    ("jacobian_hessian", jacobian_hessian),
    ("optimizer_state", optimizer_state),
    ("sgd_nesterov", sgd_nesterov),
    ("rmsprop", rmsprop),
    ("adagrad", adagrad),
    *((f"scheduler_{k}", v) for k, v in SCHEDULERS.items()),
    ("losses_and_layers", losses_and_layers),
    ("tensor_odds", tensor_odds),
    ("op_suite", op_suite),
    ("integer_and_float_bits", integer_and_float_bits),
    ("constructors", constructors),
    ("kl_div_top_level", kl_div_top_level),
    ("reductions_out", reductions_out),
    ("global_module_hooks", global_module_hooks),
    ("load_from_state_dict_override", load_from_state_dict_override),
    *RESAMPLING.items(),
]
