"""Variable-length sequences for the recurrent layers, as ``torch.nn.utils.rnn``:
`PackedSequence`, `pack_padded_sequence`, `pad_packed_sequence`, `pad_sequence`,
`pack_sequence`, `unpad_sequence` and `unpack_sequence`.

A packed sequence holds the steps of a batch of sequences sorted by decreasing length,
time-major: ``data`` is the rows of step 0 (one per sequence), then of step 1 (one per
sequence still running), and so on; ``batch_sizes[t]`` counts the rows of step ``t``.
The batch sizes decide which rows packing and padding gather, so they are concrete values
even inside ``dg.compile``; the lengths a sequence is packed with must be concrete too (an
argument of a compiled call is: the call is keyed on its values).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from ...eager.creation import full
from ...eager.tensor import Tensor, tensor
from ...errors import EagerOnlyError
from ...modes import current_trace
from ...ops import shape as S
from ...ops.mixin import TensorOps


class PackedSequence(NamedTuple):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)`` as PyTorch's: ``data``
    (total steps, *features), ``batch_sizes`` an int64 tensor (one count per time step),
    ``sorted_indices`` the batch order packing used (``None`` when the input was sorted)
    and ``unsorted_indices`` its inverse."""

    data: Any
    batch_sizes: Any
    sorted_indices: Any = None
    unsorted_indices: Any = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data`` converted as ``Tensor.to`` does; the indices stay int64."""
        return self._replace(data=self.data.to(*args, **kwargs))

    def cpu(self) -> PackedSequence:
        return self

    def double(self) -> PackedSequence:
        return self._replace(data=self.data.double())

    def float(self) -> PackedSequence:  # noqa: A003 - PyTorch's name
        return self._replace(data=self.data.float())

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def _concrete_lengths(lengths: Any) -> np.ndarray:
    if isinstance(lengths, TensorOps) and not isinstance(lengths, Tensor):
        # An argument of a compiled call: the call is keyed on its values, as torch
        # guards a tensor it reads with ``.tolist()``.
        trace = current_trace()
        values = trace.argument_values(lengths) if trace is not None else None
        if values is None:
            # Computed inside the function, the batch sizes would decide the graph's
            # shape from values a graph cannot read: dg.compile runs such a call eagerly
            # (with a warning), as it runs a call that draws Python random numbers.
            raise EagerOnlyError(
                "pack_padded_sequence: `lengths` must be concrete (a list or an eager tensor), "
                "not a tensor computed inside the compiled function: the packed batch "
                "sizes depend on its values. dg.compile runs the call eagerly; to compile "
                "it, pass the lengths as an argument (one trace per distinct lengths) or "
                "compute them outside the compiled function.")
        lengths = values
    arr = np.asarray(lengths.numpy() if isinstance(lengths, Tensor) else lengths)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor or a list of "
                           f"ints, but got {arr.ndim}D {arr.dtype} values")
    return arr.astype(np.int64)


def batch_sizes_of(lengths: np.ndarray) -> np.ndarray:
    """``batch_sizes[t]``: how many of the (decreasingly sorted) lengths exceed ``t``."""
    steps = np.arange(int(lengths.max()) if lengths.size else 0)
    return (lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)


def _invert(perm: np.ndarray) -> np.ndarray:
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv


def pack_padded_sequence(input: Any, lengths: Any, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (time, batch, *) (``batch_first``: (batch, time, *)) whose
    sequence ``b`` has ``lengths[b]`` valid steps. With ``enforce_sorted`` the lengths must
    be decreasing; otherwise the batch is sorted here and the order kept in the result."""
    lens = _concrete_lengths(lengths)
    batch_dim = 0 if batch_first else 1
    if not isinstance(input, TensorOps):
        raise TypeError(f"pack_padded_sequence: input must be a tensor, got "
                        f"{type(input).__name__}")
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: input must have a time and a batch dim, "
                         f"got shape {tuple(input.shape)}")
    if lens.size != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lens.size} (batch_size={input.shape[batch_dim]})")
    if lens.size and lens.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if lens.size and lens.max() > input.shape[1 - batch_dim]:
        raise RuntimeError(f"pack_padded_sequence: a length ({int(lens.max())}) exceeds the "
                           f"input's {input.shape[1 - batch_dim]} time steps")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
    else:
        order = np.argsort(-lens, kind="stable").astype(np.int64)
        lens = lens[order]
        sorted_indices, unsorted_indices = tensor(order), tensor(_invert(order))
    x = input if sorted_indices is None else input.index_select(batch_dim, sorted_indices)
    if batch_first:
        x = S.transpose(x, 0, 1)
    sizes = batch_sizes_of(lens)
    data = pack_rows(x[:len(sizes)], sizes.tolist())
    return PackedSequence(data, tensor(sizes), sorted_indices, unsorted_indices)


# Packing and padding are each one gather (``index_select`` of rows), whatever the number
# of steps: the graph, and its gradient (a scatter-add), stay the same size at every length.


def pack_rows(x: Any, sizes: list[int]) -> Any:
    """The packed ``data`` (sum(sizes), *) of a padded (T, B, *) tensor in the packed
    (sorted) batch order: the first ``sizes[t]`` rows of each step ``t``."""
    t_len, batch = x.shape[0], x.shape[1]
    rows = np.concatenate([t * batch + np.arange(b) for t, b in enumerate(sizes)]
                          or [np.zeros(0, np.int64)]).astype(np.int64)
    flat = S.reshape(x, (t_len * batch,) + tuple(x.shape[2:]))
    return flat.index_select(0, tensor(rows))


def pad_rows(data: Any, sizes: list[int], total_length: int | None = None,
             padding_value: float = 0.0) -> Any:
    """The padded (T, B, *) tensor (T = ``total_length`` or the longest sequence) in the
    packed batch order from packed ``data``; rows past a sequence's end hold
    ``padding_value``."""
    batch = sizes[0] if sizes else 0
    t_len = len(sizes) if total_length is None else total_length
    feat = tuple(data.shape[1:])
    ends = np.cumsum([0] + list(sizes))
    pad = int(ends[-1])  # the padding row, appended after the data
    index = np.full((t_len, batch), pad, np.int64)
    for t, b in enumerate(sizes):
        index[t, :b] = ends[t] + np.arange(b)
    source = S.concatenate((data, full((1,) + feat, padding_value, dtype=data.dtype)))
    return S.reshape(source.index_select(0, tensor(index.reshape(-1))), (t_len, batch) + feat)


def packed_sizes(sequence: PackedSequence) -> list[int]:
    """``batch_sizes`` as a list of ints (they must be concrete)."""
    b = sequence.batch_sizes
    if isinstance(b, TensorOps) and not isinstance(b, Tensor):
        raise TypeError("PackedSequence.batch_sizes must be concrete: build the packed "
                        "sequence inside the compiled function, or outside it and pass its "
                        "data")
    return [int(v) for v in np.asarray(b.numpy() if isinstance(b, Tensor) else b)]


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None,
                        ) -> tuple[Any, Any]:
    """The inverse of `pack_padded_sequence`: ``(padded, lengths)`` with the batch in its
    original order, padded with ``padding_value`` to the longest sequence (or to
    ``total_length``); ``lengths`` is an int64 tensor."""
    sizes = packed_sizes(sequence)
    batch = sizes[0] if sizes else 0
    if total_length is not None:
        if total_length < len(sizes):
            raise ValueError(f"Expected total_length to be at least the length of the "
                             f"longest sequence in input, but got total_length="
                             f"{total_length} and max sequence length being {len(sizes)}")
    padded = pad_rows(sequence.data, sizes, total_length or len(sizes), padding_value)
    lengths = (np.asarray(sizes)[None, :] > np.arange(batch)[:, None]).sum(axis=1)
    if sequence.unsorted_indices is not None:
        unsorted = sequence.unsorted_indices
        padded = padded.index_select(1, unsorted)
        lengths = lengths[np.asarray(unsorted.numpy())]
    if batch_first:
        padded = S.transpose(padded, 0, 1)
    return padded, tensor(lengths.astype(np.int64))


def pad_sequence(sequences: Iterable[Any], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Any:
    """Stack tensors of shapes (L_i, *) into (max L, batch, *) (``batch_first``: (batch,
    max L, *)), padding each with ``padding_value`` on ``padding_side``."""
    seqs = list(sequences)
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in seqs)
    out = []
    for s in seqs:
        extra = longest - s.shape[0]
        if extra:
            pad = full((extra,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype)
            s = S.concatenate((s, pad) if padding_side == "right" else (pad, s))
        out.append(s)
    return S.stack(out, 0 if batch_first else 1)


def pack_sequence(sequences: Iterable[Any], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors (decreasing lengths unless ``enforce_sorted`` is
    False)."""
    seqs = list(sequences)
    lengths = [s.shape[0] for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Any, lengths: Any, batch_first: bool = False) -> list:
    """The list of sequences ``padded[:lengths[b], b]`` (the inverse of `pad_sequence`)."""
    lens = _concrete_lengths(lengths)
    if not batch_first:
        padded_sequences = S.transpose(padded_sequences, 0, 1)
    return [padded_sequences[b, :int(n)] for b, n in enumerate(lens)]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences a packed sequence holds (the inverse of `pack_sequence`)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence",
           "pad_sequence", "unpack_sequence", "unpad_sequence"]
