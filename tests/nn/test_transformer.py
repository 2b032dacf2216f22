"""Transformer layers: values and gradients against PyTorch's (goldens recorded from torch,
tests/goldens/record_seq.py), finite differences, masks, errors, and a compiled training
step against the eager one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck
from tests.goldens.seq_cases import TRANSFORMER_CASES, run

GOLDENS = Path(__file__).resolve().parents[1] / "goldens"

_DATA = np.load(GOLDENS / "transformer.npz")


def _golden(case: str) -> dict[str, np.ndarray]:
    prefix = case + "/"
    return {k[len(prefix):]: _DATA[k] for k in _DATA.files if k.startswith(prefix)}


@pytest.mark.parametrize("case", sorted(TRANSFORMER_CASES))
def test_matches_torch(case: str) -> None:
    kind, args, kwargs, call = TRANSFORMER_CASES[case]
    module = getattr(dg.nn, kind)(*args, **kwargs).double()
    golden = _golden(case)
    names = [k[len("param."):] for k in golden if k.startswith("param.")]
    assert list(module.state_dict()) == names
    module.load_state_dict({n: dg.tensor(golden["param." + n]) for n in names})
    inputs = {k[len("input."):]: v for k, v in golden.items() if k.startswith("input.")}
    proj = {k: v for k, v in golden.items() if k.startswith("proj.")}
    got = run(dg, module, call, inputs, proj)
    expected = {k for k in golden if k.startswith(("out.", "grad."))}
    assert expected == {k for k in got if k.startswith(("out.", "grad."))}
    for key in sorted(expected):
        dg.testing.assert_close(got[key], golden[key], rtol=1e-9, atol=1e-11, equal_nan=True,
                                check_dtype=False, msg=key)


def test_square_subsequent_mask() -> None:
    m = dg.nn.Transformer.generate_square_subsequent_mask(3)
    assert m.dtype == np.float32
    expected = np.array([[0, -math.inf, -math.inf], [0, 0, -math.inf], [0, 0, 0]], np.float32)
    np.testing.assert_array_equal(m.numpy(), expected)
    assert dg.nn.Transformer.generate_square_subsequent_mask(2, dtype=dg.float64).dtype == \
        np.float64


def test_init_and_structure() -> None:
    dg.manual_seed(0)
    model = dg.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                              dim_feedforward=16)
    assert len(model.encoder.layers) == 2 and len(model.decoder.layers) == 1
    layers = model.encoder.layers
    # Deep copies: the two layers hold different parameters.
    assert layers[0].linear1.weight is not layers[1].linear1.weight
    w = layers[0].self_attn.in_proj_weight.numpy()
    assert np.abs(w).max() <= math.sqrt(6 / (8 + 24))  # Xavier uniform on (3E, E)
    assert np.all(layers[0].linear1.bias.numpy() != 0)  # biases keep Linear's init
    assert model.encoder.norm is not None and model.decoder.norm is not None
    layer = dg.nn.TransformerEncoderLayer(8, 2, 16, activation=dg.nn.GELU())
    assert isinstance(layer.activation, dg.nn.GELU)
    assert dg.nn.TransformerDecoderLayer(8, 2, 16, dtype=dg.float64).linear1.weight.dtype == \
        np.float64


def test_gradients_match_finite_differences() -> None:
    dg.manual_seed(1)
    layer = dg.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, norm_first=True).double()
    mask = dg.nn.Transformer.generate_square_subsequent_mask(2, dtype=dg.float64)
    tgt = dg.randn(2, 1, 4, dtype=dg.float64)
    memory = dg.randn(3, 1, 4, dtype=dg.float64)
    assert gradcheck(lambda t, m: layer(t, m, tgt_mask=mask), tgt, memory)


def test_dropout_only_in_training() -> None:
    dg.manual_seed(2)
    layer = dg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = dg.randn(4, 2, 8)
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())
    layer.train()
    assert not np.allclose(layer(x).numpy(), layer(x).numpy())


def test_errors() -> None:
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        dg.nn.TransformerEncoderLayer(8, 2, activation="tanh")
    model = dg.nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model(dg.randn(5, 2, 8), dg.randn(3, 1, 8))
    with pytest.raises(RuntimeError, match="feature number of src and tgt must be equal"):
        model(dg.randn(5, 2, 8), dg.randn(3, 2, 4))
    with pytest.raises(RuntimeError, match="CPU only"):
        dg.nn.Transformer.generate_square_subsequent_mask(3, device="cuda")


@pytest.mark.slow  # a cold compile of this step took 20 minutes on a loaded machine
def test_compiled_training_step_equals_eager() -> None:
    """A causal encoder layer's training step, compiled (one trace) and eager, from the same
    weights: losses and updated parameters agree within B3's float32 tolerance."""
    rng = np.random.default_rng(3)
    x = dg.tensor(rng.standard_normal((3, 2, 4)).astype(np.float32))
    y = dg.tensor(rng.standard_normal((3, 2, 4)).astype(np.float32))
    mask = dg.nn.Transformer.generate_square_subsequent_mask(3)
    results = []
    for compiled in (False, True):
        dg.manual_seed(0)
        layer = dg.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0)
        opt = dg.optim.SGD(layer.parameters(), lr=0.1)

        def step(x, y, layer=layer, opt=opt):
            opt.zero_grad()
            loss = ((layer(x, src_mask=mask) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = dg.compile(step) if compiled else step
        losses = [fn(x, y).item() for _ in range(2)]
        if compiled:
            assert fn.stats.traces == 1
        results.append((losses, [p.numpy().copy() for p in layer.parameters()]))
    (eager_losses, eager_params), (comp_losses, comp_params) = results
    dg.testing.assert_close(comp_losses, eager_losses, rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    for a, b in zip(comp_params, eager_params):
        dg.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True, check_dtype=False)
