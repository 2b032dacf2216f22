"""What follows the default dtype, written the same way for torch and dualgraph: ``run(t)``
sets ``t.set_default_dtype(t.float64)`` and returns the dtype name of each expression (and
restores float32). Recorded from torch by record_default_dtype_goldens.py."""

from __future__ import annotations


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def expressions(t) -> dict:
    lin = t.nn.Linear(3, 2)
    conv = t.nn.Conv2d(1, 2, 3)
    return {
        "tensor_float": t.tensor([1.0, 2.0]),
        "tensor_scalar": t.tensor(1.5),
        "tensor_int": t.tensor([1, 2]),
        "zeros": t.zeros(2),
        "ones": t.ones(2, 3),
        "full": t.full((2,), 1.5),
        "randn": t.randn(3),
        "rand": t.rand(3),
        "arange_float": t.arange(0.5, 3.0),
        "arange_int": t.arange(3),
        "linspace": t.linspace(0, 1, 5),
        "eye": t.eye(2),
        "empty": t.empty(2),
        "int_times_float": t.tensor([1, 2]) * 2.5,
        "int_div": t.tensor([1, 2]) / 2,
        "int_exp": t.exp(t.tensor([1, 2])),
        "int_mean": t.tensor([1.0, 2.0]).long().float().double(),
        "linear_weight": lin.weight,
        "linear_out": lin(t.ones(1, 3)),
        "conv_weight": conv.weight,
        "layernorm_weight": t.nn.LayerNorm(3).weight,
        "batchnorm_running_mean": t.nn.BatchNorm1d(3).running_mean,
        "embedding_weight": t.nn.Embedding(4, 2).weight,
        "float32_explicit": t.zeros(2, dtype=t.float32),
        "float32_stays": t.zeros(2, dtype=t.float32) * 2.5,
    }


def run(t) -> dict:
    before = _name(t.get_default_dtype())
    t.set_default_dtype(t.float64)
    try:
        out = {k: _name(v.dtype) for k, v in expressions(t).items()}
        out["get_default_dtype"] = _name(t.get_default_dtype())
        for name, x in (("repr_f64", t.tensor([1.5])), ("repr_f32", t.ones(1, dtype=t.float32))):
            out[name] = repr(x).replace("torch.", "").replace("dg.", "")
        t.set_default_tensor_type("torch.FloatTensor")
        out["after_tensor_type"] = _name(t.get_default_dtype())
        t.set_default_tensor_type(t.DoubleTensor)
        out["after_double_tensor_type"] = _name(t.zeros(1).dtype)
    finally:
        t.set_default_dtype(t.float32)
    out["before"] = before
    out["restored"] = _name(t.zeros(1).dtype)
    return out
