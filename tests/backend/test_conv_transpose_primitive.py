"""A transposed convolution is one `conv2d_input` node (the convolution's input gradient
with the input as the output gradient): the library's per-sample routine forward, the
convolution and its weight gradient backward. The two convolution gradients share one
shape rule."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.errors import ShapeError
from dualgraph.ops import conv as C
from dualgraph.testing import assert_close

# (stride, padding, output_padding, dilation, groups)
GEOMETRIES = [
    ((2, 2), (1, 1), (1, 1), (1, 1), 1),
    ((2, 3), (1, 2), (1, 2), (1, 2), 1),
    ((2, 2), (0, 0), (1, 1), (2, 2), 2),
    ((3, 3), (2, 2), (2, 2), (1, 1), 1),
]


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, geometry: tuple) -> np.ndarray:
    """Every input element scattering ``x * w`` over its window, by plain loops."""
    (sh, sw), (ph, pw), (oph, opw), (dh, dw), groups = geometry
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    full = np.zeros((n, cog * groups, oh + 2 * ph + sh * dh * 4, ow + 2 * pw + sw * dw * 4))
    cin_g = cin // groups
    for ci in range(cin):
        g = ci // cin_g
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for c in range(kw):
                        full[:, g * cog:(g + 1) * cog, i * sh + a * dh, j * sw + c * dw] += (
                            x[:, ci, i, j, None] * w[ci, :, a, c])
    return (full[:, :, ph:ph + oh, pw:pw + ow] + b[:, None, None]).astype(x.dtype)


def _operands(geometry: tuple, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    groups = geometry[4]
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 4)).astype(np.float32)
    b = rng.standard_normal((3 * groups,)).astype(np.float32)
    return x, w, b


def _kw(geometry: tuple) -> dict:
    stride, padding, output_padding, dilation, groups = geometry
    return {"stride": stride, "padding": padding, "output_padding": output_padding,
            "dilation": dilation, "groups": groups}


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_eager_values_are_the_scatter_of_the_input(geometry):
    x, w, b = _operands(geometry, 0)
    y = F.conv_transpose2d(dg.tensor(x), dg.tensor(w), dg.tensor(b), **_kw(geometry))
    assert_close(y, _reference(x, w, b, geometry), rtol=1e-5, atol=1e-5)


def test_one_convolution_gradient_node_and_its_gradients():
    x = dg.ones((1, 2, 3, 3), requires_grad=True)
    w = dg.ones((2, 3, 2, 2), requires_grad=True)
    y = F.conv_transpose2d(x, w, stride=2)
    assert y.grad_fn.name() == "ConvolutionBackwardBackward0"
    (y * y).sum().backward()
    # At stride 2 the 2x2 windows do not overlap: every output is 2 (two input channels
    # of ones), each input element reaches 2*2*3 of them, each weight 3*3 per channel.
    assert_close(x.grad, np.full((1, 2, 3, 3), 2 * 2 * 12, np.float32))
    assert_close(w.grad, np.full((2, 3, 2, 2), 2 * 2 * 9, np.float32))


def test_compiled_values_and_gradients_equal_eager():
    """One compiled function over two geometries (one grouped, dilated, with
    output_padding): values and the gradients of input, weight and bias."""
    ga, gb = GEOMETRIES[1], GEOMETRIES[2]
    ops = [_operands(ga, 1), _operands(gb, 2)]

    def f(x1, w1, b1, x2, w2, b2):
        y1 = F.conv_transpose2d(x1, w1, b1, **_kw(ga))
        y2 = F.conv_transpose2d(x2, w2, b2, **_kw(gb))
        return (y1 * y1).sum() + (y2 * y2 * y2).sum(), y1, y2

    def run(fn):
        ts = [dg.tensor(a, requires_grad=True) for pair in ops for a in pair]
        loss, y1, y2 = fn(*ts)
        loss.backward()
        return [loss, y1, y2] + [t.grad for t in ts]

    eager, compiled = run(f), run(dg.compile(f, tiered=False))
    # float32 sums of up to 48 products, in the per-sample routine's order compiled.
    for a, e in zip(compiled, eager):
        assert_close(a, e, rtol=1e-4, atol=1e-4)


def test_the_gradients_share_one_shape_rule():
    g, w = dg.ones((1, 2, 3, 3)), dg.ones((2, 3, 2, 2))
    assert tuple(C.conv2d_input(g, w, (4, 4)).shape) == (1, 3, 4, 4)
    assert tuple(C.conv2d_weight(dg.ones((1, 3, 4, 4)), g, (2, 2)).shape) == (2, 3, 2, 2)
    with pytest.raises(ShapeError, match="conv2d_input: 1 inputs of spatial size"):
        C.conv2d_input(g, w, (5, 5))
    with pytest.raises(ShapeError, match="conv2d_weight: 1 inputs of spatial size"):
        C.conv2d_weight(dg.ones((1, 3, 5, 5)), g, (2, 2))
    with pytest.raises(ShapeError, match="expected 4-D operands"):
        C.conv2d_weight(dg.ones((3, 4, 4)), g, (2, 2))
    with pytest.raises(ShapeError, match="does not fit an output gradient"):
        C.conv2d_input(g, dg.ones((3, 3, 2, 2)), (4, 4))
    with pytest.raises(ShapeError, match="groups=2 must divide"):
        C.conv2d_weight(dg.ones((1, 3, 4, 4)), g, (2, 2), groups=2)
