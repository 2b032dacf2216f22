"""CPU-only devices as a CPU build of PyTorch has them, and PyTorch's dtype aliases."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def test_device_class_parses_compares_and_prints_like_torch() -> None:
    d = dg.device("cpu")
    assert (d.type, d.index) == ("cpu", None)
    assert d == dg.device("cpu") and hash(d) == hash(dg.device("cpu"))
    assert d != dg.device("cpu:0") and dg.device("cpu", 0) == dg.device("cpu:0")
    assert d != "cpu"  # torch.device never equals a string
    assert repr(d) == "device(type='cpu')" and str(dg.device("cpu:0")) == "cpu:0"
    assert dg.device("cuda", 1).index == 1 and dg.device(dg.device("mps")).type == "mps"
    assert {dg.device("cpu"): 1}[dg.device("cpu")] == 1


@pytest.mark.parametrize("bad, match", [("foo", "Expected one of cpu"),
                                        ("cuda:x", "Invalid device string"),
                                        (0, "accelerator")])
def test_bad_device_strings_raise_runtime_error(bad, match) -> None:
    with pytest.raises(RuntimeError, match=match):
        dg.device(bad)


def test_tensor_device_and_cuda_flags() -> None:
    x = dg.ones(2, 3)
    assert x.device == dg.device("cpu") and x.device.type == "cpu"
    assert x.is_cuda is False and x.is_cpu and x.get_device() == -1
    assert x.cpu() is x and x.to("cpu") is x and x.to(dg.device("cpu")) is x
    assert x.to("cpu", dg.float64).dtype == np.float64
    assert x.to(device="cpu", dtype=dg.int64).dtype == np.int64


@pytest.mark.parametrize("call", [
    lambda: dg.ones(2).to("cuda"), lambda: dg.ones(2).cuda(), lambda: dg.ones(2).to("mps"),
    lambda: dg.ones(2).to(dg.device("cuda", 0)), lambda: dg.zeros(2, device="cuda"),
    lambda: dg.tensor([1.0], device="cuda:1"), lambda: dg.randn(2, device="mps"),
    lambda: dg.arange(3, device="xla"), lambda: dg.nn.Linear(2, 2).to("cuda"),
    lambda: dg.nn.Linear(2, 2).cuda(), lambda: dg.ones(2).cuda(1),
])
def test_any_other_device_raises_naming_it(call) -> None:
    with pytest.raises(RuntimeError, match=r"device '(cuda|mps|xla)(:\d)?' is not available"):
        call()


FACTORIES = [
    lambda d: dg.zeros(2, 3, device=d), lambda d: dg.ones((2,), device=d),
    lambda d: dg.full((2,), 1.5, device=d), lambda d: dg.arange(4, device=d),
    lambda d: dg.tensor([1, 2], device=d), lambda d: dg.randn(2, device=d),
    lambda d: dg.rand(2, device=d), lambda d: dg.empty(2, device=d),
    lambda d: dg.eye(2, device=d), lambda d: dg.linspace(0, 1, 3, device=d),
    lambda d: dg.zeros_like(dg.ones(2), device=d), lambda d: dg.ones_like(dg.ones(2), device=d),
    lambda d: dg.full_like(dg.ones(2), 3, device=d),
    lambda d: dg.empty_like(dg.ones(2), device=d), lambda d: dg.randn_like(dg.ones(2), device=d),
    lambda d: dg.rand_like(dg.ones(2), device=d),
    lambda d: dg.randint(0, 5, (3,), device=d), lambda d: dg.randperm(4, device=d),
    lambda d: dg.randint_like(dg.ones(2), 5, device=d),
]


@pytest.mark.parametrize("make", FACTORIES)
@pytest.mark.parametrize("dev", ["cpu", dg.device("cpu"), None, "cpu:0"])
def test_every_factory_takes_device(make, dev) -> None:
    assert make(dev).device == dg.device("cpu")


@pytest.mark.parametrize("make", FACTORIES)
def test_every_factory_refuses_cuda(make) -> None:
    with pytest.raises(RuntimeError, match="CPU only"):
        make("cuda")


def test_factories_accept_torch_memory_keywords_and_refuse_unknown_ones() -> None:
    assert dg.zeros(2, pin_memory=False, layout=None).shape == (2,)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        dg.ones(2, colour=1)


def test_cuda_namespace_answers_as_without_gpu() -> None:
    assert dg.cuda.is_available() is False and dg.cuda.device_count() == 0
    dg.cuda.manual_seed(0)
    dg.cuda.manual_seed_all(0)
    dg.cuda.empty_cache()
    with pytest.raises(RuntimeError, match="no CUDA device"):
        dg.cuda.current_device()
    with pytest.raises(TypeError):
        dg.cuda.manual_seed("x")


def test_backends_flags_are_settable_and_accelerators_absent() -> None:
    old = dg.backends.cudnn.benchmark
    dg.backends.cudnn.benchmark = True
    dg.backends.cudnn.deterministic = True
    dg.backends.cuda.matmul.allow_tf32 = True
    assert dg.backends.cudnn.benchmark is True
    dg.backends.cudnn.benchmark = old
    assert dg.backends.cudnn.enabled is True and dg.backends.cudnn.is_available() is False
    assert dg.backends.mps.is_available() is False and dg.backends.mps.is_built() is False
    with dg.backends.cudnn.flags(enabled=False):
        assert dg.backends.cudnn.enabled is False
    assert dg.backends.cudnn.enabled is True


def test_backends_and_cuda_amp_are_modules_like_torchs() -> None:
    """``import torch.backends.cudnn as cudnn`` (DCGAN) and ``from torch.cuda.amp import
    GradScaler`` need real submodules."""
    import importlib

    cudnn = importlib.import_module("dualgraph.backends.cudnn")
    cudnn.benchmark = True
    assert dg.backends.cudnn.benchmark is True
    cudnn.benchmark = False
    amp = importlib.import_module("dualgraph.cuda.amp")
    assert amp.GradScaler is dg.amp.GradScaler and issubclass(amp.autocast, dg.amp.autocast)
    assert dg.backends.cuda.is_built() is False and dg.backends.cpu.get_cpu_capability()


def test_accelerator_namespace() -> None:
    assert dg.accelerator.is_available() is False
    assert dg.accelerator.device_count() == 0
    assert dg.accelerator.current_accelerator() is None


def test_nn_parallel_runs_the_module_and_refuses_devices() -> None:
    lin = dg.nn.Linear(3, 2)
    dp = dg.nn.DataParallel(lin)
    x = dg.ones(4, 3)
    np.testing.assert_array_equal(dp(x).numpy(), lin(x).numpy())
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    assert dg.nn.parallel.data_parallel(lin, x).shape == (4, 2)
    with pytest.raises(RuntimeError, match="CPU only"):
        dg.nn.parallel.DataParallel(lin, device_ids=[0])
    with pytest.raises(RuntimeError, match="process group"):
        dg.nn.parallel.DistributedDataParallel(lin)


ALIASES = {"long": np.int64, "int": np.int32, "short": np.int16, "int8": np.int8,
           "int16": np.int16, "uint8": np.uint8, "float": np.float32, "double": np.float64,
           "half": np.float16, "bool": np.bool_, "int32": np.int32, "int64": np.int64,
           "float32": np.float32, "float64": np.float64, "float16": np.float16}


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_dtype_aliases_name_torchs_dtypes(name) -> None:
    dt = getattr(dg, name)
    assert dt == np.dtype(ALIASES[name])
    assert dg.zeros(2, dtype=dt).dtype == dt
    assert dg.tensor([1, 0], dtype=dt).dtype == dt
    assert isinstance(dt, dg.dtype)


def test_default_dtype_and_is_tensor() -> None:
    assert dg.get_default_dtype() == dg.float32
    assert dg.is_tensor(dg.ones(1)) and not dg.is_tensor(np.ones(1))


def test_device_plumbing_inside_a_compiled_function() -> None:
    """A compiled step that builds tensors on ``x.device`` and moves values with
    ``.to(device)`` / ``.cpu()`` traces once and matches eager."""
    def f(x):
        dev = x.device
        y = dg.ones(x.shape, device=dev) * 2 + dg.zeros(x.shape, device="cpu")
        z = (x * y).to(dev).cpu().contiguous()
        assert not x.is_cuda
        return (z + dg.full(x.shape, 0.5, device=dg.device("cpu"))).sum()

    x = dg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    g = dg.compile(f)
    dg.testing.assert_close(g(x).numpy(), f(x).numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(g(x).numpy(), f(x).numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    assert g.stats.traces == 1 and g.stats.kernels >= 1


def test_mixed_precision_tools_are_disabled_as_without_cuda() -> None:
    with pytest.warns(UserWarning, match="Disabling"):
        scaler = dg.cuda.amp.GradScaler(enabled=True)
    assert not scaler.is_enabled()
    lin = dg.nn.Linear(2, 1)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)
    loss = lin(dg.ones(3, 2)).sum()
    assert scaler.scale(loss) is loss
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    before = lin.weight.numpy().copy()
    scaler.step(opt)
    scaler.update()
    assert not np.array_equal(lin.weight.numpy(), before)
    assert not dg.amp.GradScaler("cuda", enabled=False).is_enabled()
    with pytest.warns(UserWarning, match="Disabling autocast"):
        with dg.amp.autocast(device_type="cuda", dtype=dg.float16):
            assert (dg.ones(2) * 2).dtype == np.float32


def test_distributed_is_absent() -> None:
    assert not dg.distributed.is_available() and not dg.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="process group"):
        dg.distributed.init_process_group(backend="gloo")


def test_bfloat16_is_a_name_that_refuses_use() -> None:
    table = {"float32": dg.float32, "bfloat16": dg.bfloat16, "float16": dg.float16}
    assert table["float32"] == np.float32 and repr(dg.bfloat16) == "dg.bfloat16"
    with pytest.raises(TypeError, match="NumPy has no bfloat16"):
        dg.zeros(2, dtype=dg.bfloat16)
    with pytest.raises(TypeError, match="NumPy has no bfloat16"):
        dg.ones(2).to(dg.bfloat16)


def test_integer_tensors_index_python_and_numpy_sequences() -> None:
    data = np.arange(10)
    i = dg.randint(0, 5, (3,))[0]
    np.testing.assert_array_equal(data[i:i + 3], data[int(i):int(i) + 3])
    assert [10, 20, 30][dg.tensor(1)] == 20 and range(5)[dg.tensor([4])] == 4
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [1, 2][dg.tensor(1.0)]
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [1, 2][dg.tensor([0, 1])]


def test_mps_namespace_answers_as_without_apple_gpu() -> None:
    """``device = "mps" if torch.mps.is_available() else "cpu"`` picks the CPU."""
    assert dg.mps.is_available() is False and dg.mps.device_count() == 0
    dg.mps.manual_seed(0)
    dg.mps.empty_cache()
    dg.mps.synchronize()
    with pytest.raises(TypeError):
        dg.mps.manual_seed("x")


def test_autograd_profiler_is_the_profiler() -> None:
    import importlib

    prof_mod = importlib.import_module("dualgraph.autograd.profiler")
    assert prof_mod.profile is dg.profiler.profile
    assert prof_mod.record_function is dg.profiler.record_function
    with dg.autograd.profiler.profile() as prof:
        (dg.ones(3) * 2).sum()
    assert "mul" in {e.key for e in prof.key_averages()}
    with pytest.raises(RuntimeError, match="CUDA"):
        dg.autograd.profiler.profile(use_cuda=True)
