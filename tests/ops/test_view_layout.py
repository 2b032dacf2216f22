"""`Tensor.view` follows PyTorch's layout rule: a view exists when the new shape splits
and merges dimensions laid out as contiguous blocks, else RuntimeError (reshape copies),
eagerly and compiled. Checked against PyTorch's answers over a few hundred layouts."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops.layout import VIEW_ERROR, view_strides

from .view_cases import build

GOLDENS = json.loads(pathlib.Path(__file__).with_name("view_goldens.json").read_text())


def _view(x, shape):
    try:
        return x.view(*shape).numpy().ravel().tolist()
    except RuntimeError as e:
        assert str(e) == VIEW_ERROR
        return None


def test_eager_view_matches_torch_over_recorded_layouts():
    raised = 0
    for case in GOLDENS:
        x = build(dg, case["base"], case["ops"])
        got = _view(x, case["shape"])
        assert got == case["torch"], case
        raised += got is None
    assert 0 < raised < len(GOLDENS)


def test_view_strides_rule():
    # A transpose merges no further; its own transposed shape views.
    assert view_strides((4, 3), (1, 4), (12,)) is None
    assert view_strides((4, 3), (1, 4), (4, 3)) == (1, 4)
    # Splitting a strided dimension keeps its stride; size-1 dimensions are free.
    assert view_strides((2, 4), (8, 1), (2, 2, 2)) == (8, 2, 1)
    assert view_strides((3, 1, 2), (2, 7, 1), (1, 6)) is not None
    assert view_strides((3, 2), (4, 1), (6,)) is None


def _transposed(x):
    return x.t().view(-1)


def _split_transposed(x):
    return (x.t() * 2).view(x.shape[1], x.shape[0])


def _sliced(x):
    return x[:, :2].view(-1)


def _stepped(x):
    return x[::2].view(2, 2, 2) + 1


def _contiguous_transposed(x):
    return x.t().contiguous().view(-1) * 2


def _argument(x):
    return x.view(-1) * 1


@pytest.mark.parametrize("fn, raises", [(_transposed, True), (_split_transposed, False),
                                        (_sliced, True), (_stepped, False),
                                        (_contiguous_transposed, False)])
def test_compiled_view_raises_or_views_as_eager(fn, raises):
    x = dg.arange(16.0).reshape(4, 4)
    want = _view_call(fn, x)
    assert (want is None) == raises
    assert _view_call(dg.compile(fn), x) == want


def test_compiled_view_of_an_argument_follows_its_layout():
    f = dg.compile(_argument)
    x = dg.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(f(x).numpy(), np.arange(12.0))
    # The same signature with a transposed argument: its layout is guarded, so the call
    # traces again and raises as eager mode does.
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        f(x.t().contiguous().t())
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        _argument(x.t().contiguous().t())


def _view_call(fn, x):
    try:
        return fn(x).numpy().tolist()
    except RuntimeError as e:
        assert str(e) == VIEW_ERROR
        return None


@pytest.mark.parametrize("shape,sizes", [((5,), (8, 1)), ((2, 3), (4, 1, 1)), ((1, 3), (3, 1)),
                                         ((2, 3), (2, 2))])
def test_repeat_gives_a_contiguous_tensor_that_views(shape, sizes):
    # torch's repeat always makes a fresh tensor (strides recorded from torch 2.13: the
    # C-order strides of the result); a repeat along a new leading dim is a reshape NumPy
    # could leave as a zero-stride view of the broadcast.
    x = dg.arange(float(np.prod(shape))).reshape(shape)
    r = x.repeat(*sizes)
    out = tuple(a * b for a, b in zip(sizes, (1,) * (len(sizes) - len(shape)) + shape))
    assert r.is_contiguous() and r.shape == out
    dg.testing.assert_close(r.view(-1), dg.tensor(np.tile(x.numpy(), sizes).ravel()))
    f = dg.compile(lambda t: t.repeat(*sizes).view(-1) * 2)
    dg.testing.assert_close(f(x), r.view(-1) * 2)
