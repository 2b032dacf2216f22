"""Recurrent and transformer layers checked against PyTorch: the cases and one runner that
works with either library (``lib`` is ``torch`` or ``dualgraph``).

`record_seq.py` runs every case in PyTorch (float64) and writes its initial weights,
inputs, outputs and gradients to ``rnn.npz`` / ``transformer.npz``; `tests/nn/test_rnn.py`
and `tests/nn/test_transformer.py` load the same weights and inputs into dualgraph and
compare, so the tests need no torch.

A case is ``(module, args, kwargs, call)``; ``call`` names the inputs by shape:
``x`` the input, ``h`` / ``hc`` an initial state (a tensor, an ``(h, c)`` pair), masks by
name. The loss is a fixed random projection of every output, so each output's gradient
reaches the parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

RNN_CASES: dict[str, tuple] = {
    "rnn_tanh": ("RNN", (3, 4), {}, {"x": (5, 2, 3)}),
    "rnn_relu_2layer_bidir_h0": ("RNN", (3, 4, 2), {"nonlinearity": "relu",
                                                    "bidirectional": True},
                                 {"x": (5, 2, 3), "h": (4, 2, 4)}),
    "rnn_positional_nonlinearity": ("RNN", (3, 4, 1, "relu", False), {}, {"x": (4, 2, 3)}),
    "rnn_unbatched_h0": ("RNN", (3, 4), {}, {"x": (5, 3), "h": (1, 4)}),
    "gru": ("GRU", (3, 4), {}, {"x": (5, 2, 3), "h": (1, 2, 4)}),
    "gru_2layer_batch_first": ("GRU", (3, 4, 2), {"batch_first": True}, {"x": (2, 5, 3)}),
    "gru_bidir_nobias": ("GRU", (3, 4), {"bidirectional": True, "bias": False},
                         {"x": (5, 2, 3)}),
    "gru_unbatched": ("GRU", (3, 4, 2), {}, {"x": (5, 3)}),
    "lstm": ("LSTM", (3, 4), {}, {"x": (5, 2, 3), "hc": ((1, 2, 4), (1, 2, 4))}),
    "lstm_2layer_bidir_batch_first": ("LSTM", (3, 4, 2), {"bidirectional": True,
                                                          "batch_first": True},
                                      {"x": (2, 5, 3)}),
    "lstm_proj": ("LSTM", (3, 5, 2), {"proj_size": 2, "bidirectional": True},
                  {"x": (4, 2, 3), "hc": ((4, 2, 2), (4, 2, 5))}),
    "lstm_nobias": ("LSTM", (3, 4), {"bias": False}, {"x": (5, 2, 3)}),
    "lstm_unbatched_hc": ("LSTM", (3, 4), {}, {"x": (5, 3), "hc": ((1, 4), (1, 4))}),
    "rnncell_tanh": ("RNNCell", (3, 4), {}, {"x": (2, 3), "h": (2, 4)}),
    "rnncell_relu_unbatched": ("RNNCell", (3, 4), {"nonlinearity": "relu"}, {"x": (3,)}),
    "lstmcell": ("LSTMCell", (3, 4), {}, {"x": (2, 3), "hc": ((2, 4), (2, 4))}),
    "lstmcell_unbatched": ("LSTMCell", (3, 4), {}, {"x": (3,)}),
    "grucell": ("GRUCell", (3, 4), {}, {"x": (2, 3), "h": (2, 4)}),
    "grucell_nobias_unbatched": ("GRUCell", (3, 4), {"bias": False}, {"x": (3,), "h": (4,)}),
}

_TR = {"d_model": 8, "nhead": 2, "dim_feedforward": 16, "dropout": 0.0}
_CAUSAL_5 = np.triu(np.full((5, 5), -np.inf), 1)
_CAUSAL_3 = np.triu(np.full((3, 3), -np.inf), 1)

TRANSFORMER_CASES: dict[str, tuple] = {
    "encoder_layer": ("TransformerEncoderLayer", (), _TR, {"src": (5, 2, 8)}),
    "encoder_layer_norm_first_gelu_masks": (
        "TransformerEncoderLayer", (), {**_TR, "norm_first": True, "activation": "gelu"},
        {"src": (5, 2, 8), "src_mask": _CAUSAL_5, "src_key_padding_mask": "pad_2x5"}),
    "encoder_layer_batch_first_bool_mask": (
        "TransformerEncoderLayer", (), {**_TR, "batch_first": True},
        {"src": (2, 5, 8), "src_mask": np.triu(np.ones((5, 5), bool), 1)}),
    "encoder_layer_unbatched": ("TransformerEncoderLayer", (), _TR, {"src": (5, 8)}),
    "decoder_layer": ("TransformerDecoderLayer", (), _TR,
                      {"tgt": (3, 2, 8), "memory": (5, 2, 8), "tgt_mask": _CAUSAL_3}),
    "decoder_layer_norm_first_padding": (
        "TransformerDecoderLayer", (), {**_TR, "norm_first": True},
        {"tgt": (3, 2, 8), "memory": (5, 2, 8), "memory_key_padding_mask": "pad_2x5"}),
    "transformer": ("Transformer", (), {**_TR, "num_encoder_layers": 2, "num_decoder_layers": 2},
                    {"src": (5, 2, 8), "tgt": (3, 2, 8), "tgt_mask": _CAUSAL_3,
                     "src_key_padding_mask": "pad_2x5"}),
    "transformer_batch_first_norm_first": (
        "Transformer", (), {**_TR, "num_encoder_layers": 1, "num_decoder_layers": 1,
                            "batch_first": True, "norm_first": True},
        {"src": (2, 5, 8), "tgt": (2, 3, 8), "tgt_mask": _CAUSAL_3}),
}

# The positional inputs of each module, in order; every other name is a keyword.
_POSITIONAL = {"x": 0, "h": 1, "hc": 1, "src": 0, "tgt": 0, "memory": 1}


def make_inputs(call: dict, rng: np.random.Generator) -> dict[str, Any]:
    """NumPy inputs for a case's ``call``: float64 normal samples for shapes, masks as
    given, ``pad_2x5`` a key padding mask hiding the last two keys of the first sequence."""
    out: dict[str, Any] = {}
    for name, spec in call.items():
        if isinstance(spec, np.ndarray):
            out[name] = spec
        elif spec == "pad_2x5":
            mask = np.zeros((2, 5), bool)
            mask[0, -2:] = True
            out[name] = mask
        elif name == "hc":
            out["h"] = rng.standard_normal(spec[0])
            out["c"] = rng.standard_normal(spec[1])
        else:
            out[name] = rng.standard_normal(spec)
    return out


def run(lib: Any, module: Any, call: dict, arrays: dict[str, np.ndarray],
        projections: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Run ``module`` on the inputs in ``arrays``, back-propagate a random projection of its
    outputs (the ``projections``; made here and returned when None), and return the
    outputs, the projections and the gradients of the float inputs and of every
    parameter (``grad.<name>``)."""
    tensors = {}
    for name, a in arrays.items():
        grad = a.dtype.kind == "f" and not name.endswith("mask")
        tensors[name] = lib.tensor(a, requires_grad=grad)
    pos: list = [None, None]
    kw = {}
    for name in call:
        if name == "hc":
            pos[1] = (tensors["h"], tensors["c"])
        elif name == "tgt" and "src" in call:  # Transformer(src, tgt)
            pos[1] = tensors[name]
        elif name in _POSITIONAL:
            pos[_POSITIONAL[name]] = tensors[name]
        else:
            kw[name] = tensors[name]
    while pos and pos[-1] is None:
        pos.pop()
    result = module(*pos, **kw)
    outs = _flatten(result)
    if projections is None:
        rng = np.random.default_rng(1)
        projections = {f"proj.{i}": rng.standard_normal(tuple(o.shape))
                       for i, o in enumerate(outs)}
    loss = None
    for i, o in enumerate(outs):
        term = (o * lib.tensor(projections[f"proj.{i}"])).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    record = dict(projections)
    for i, o in enumerate(outs):
        record[f"out.{i}"] = o.detach().numpy()
    for name, t in tensors.items():
        if t.requires_grad:
            record[f"grad.input.{name}"] = t.grad.numpy()
    for name, p in module.named_parameters():
        record[f"grad.{name}"] = p.grad.numpy()
    return record


def _flatten(result: Any) -> list:
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _flatten(r)]
    return [result]
