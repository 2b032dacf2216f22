"""The packed-sequence cases recorded from torch (record_packed_goldens.py) and checked in
test_packed.py: one recurrent layer per case, float64, with lengths that end sequences
at different steps."""

from __future__ import annotations

import numpy as np

T, B, F, H = 5, 4, 3, 6


def cases() -> list[dict]:
    out = []
    for mode in ("LSTM", "GRU", "RNN"):
        for bidirectional in (False, True):
            for enforce_sorted in (True, False):
                for batch_first in (False, True):
                    out.append({"mode": mode, "bidirectional": bidirectional,
                                "enforce_sorted": enforce_sorted, "batch_first": batch_first})
    return out


def name(case: dict) -> str:
    return (f"{case['mode']}-{'bi' if case['bidirectional'] else 'uni'}-"
            f"{'sorted' if case['enforce_sorted'] else 'unsorted'}-"
            f"{'bf' if case['batch_first'] else 'tf'}")


def inputs(case: dict, seed: int) -> dict:
    """The case's input, initial state, lengths and the output cotangent (for backward)."""
    rng = np.random.default_rng(seed)
    directions = 2 if case["bidirectional"] else 1
    lengths = [5, 3, 3, 1] if case["enforce_sorted"] else [3, 5, 1, 3]
    x = rng.standard_normal((B, T, F) if case["batch_first"] else (T, B, F))
    h0 = rng.standard_normal((2 * directions, B, H))
    out_shape = (B, T + 1, directions * H) if case["batch_first"] else (T + 1, B, directions * H)
    return {"x": x, "h0": h0, "c0": 0.5 * h0, "lengths": np.array(lengths),
            "cot": rng.standard_normal(out_shape)}


def run(torch, case: dict, seed: int, weights: dict | None = None) -> dict:
    """Pack, run a 2-layer layer, pad back (to T + 1 steps), backward of
    ``sum(padded * cot) + sum(h_n)``; returns every array a golden keeps."""
    rnn_utils = torch.nn.utils.rnn
    data = inputs(case, seed)
    layer = getattr(torch.nn, case["mode"])(F, H, num_layers=2, batch_first=case["batch_first"],
                                            bidirectional=case["bidirectional"]).double()
    if weights is not None:
        layer.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    x = torch.tensor(data["x"], requires_grad=True)
    h0 = torch.tensor(data["h0"])
    hx = (h0, torch.tensor(data["c0"])) if case["mode"] == "LSTM" else h0
    packed = rnn_utils.pack_padded_sequence(x, data["lengths"].tolist(),
                                            batch_first=case["batch_first"],
                                            enforce_sorted=case["enforce_sorted"])
    out, hn = layer(packed, hx)
    padded, lengths = rnn_utils.pad_packed_sequence(out, batch_first=case["batch_first"],
                                                    total_length=T + 1)
    h_n = hn[0] if case["mode"] == "LSTM" else hn
    ((padded * torch.tensor(data["cot"])).sum() + h_n.sum()).backward()
    result = {"packed_data": packed.data, "batch_sizes": packed.batch_sizes,
              "out_data": out.data, "h_n": h_n, "padded": padded, "lengths": lengths,
              "x_grad": x.grad}
    if case["mode"] == "LSTM":
        result["c_n"] = hn[1]
    if not case["enforce_sorted"]:
        result["sorted_indices"] = packed.sorted_indices
    for k, p in layer.named_parameters():
        result[f"grad.{k}"] = p.grad
    result = {k: np.asarray(v.detach().numpy()) for k, v in result.items()}
    result.update({f"param.{k}": v.detach().numpy() for k, v in layer.state_dict().items()})
    return result
