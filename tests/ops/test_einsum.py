"""``dg.einsum`` (dualgraph/ops/einsum.py): a table of equations against ``np.einsum``,
gradients, the ops it lowers to, and PyTorch's errors. (PyTorch's own values for a table
of equations are in the goldens, ``einsum_table``.)"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck

R = np.random.default_rng(12)


def _a(*shape: int) -> np.ndarray:
    return R.uniform(-1, 1, shape)


# (equation, operand shapes)
TABLE = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,kj->ik", [(2, 3), (4, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bkj->bki", [(2, 3, 4), (2, 5, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("bhqk,bhkd->bqhd", [(2, 2, 3, 5), (2, 2, 5, 4)]),
    ("i,i->", [(4,), (4,)]),
    ("i,i", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,j", [(3,), (4,)]),
    ("ij->ji", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("iji->ij", [(3, 2, 3)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,j->i", [(2, 3), (3,)]),
    ("i,ij->j", [(2,), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ab,bc,ca->", [(2, 3), (3, 4), (4, 2)]),
    ("bij,bjk,k->bi", [(2, 3, 4), (2, 4, 5), (5,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(3, 4), (2, 4, 5)]),
    ("...i,...j->...ij", [(2, 3), (1, 4)]),
    ("...,...", [(2, 3), (3,)]),
    ("i...->...", [(2, 3, 4)]),
    ("ij,kl->ijkl", [(2, 3), (2, 2)]),
    ("ijk,ikl,ilm->ijm", [(2, 2, 3), (2, 3, 2), (2, 2, 3)]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ij,ij,j->", [(2, 3), (2, 3), (3,)]),
    ("aB,Bc->ac", [(2, 3), (3, 2)]),
    (" ij , jk -> ik ", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 0), (0, 4)]),
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),  # batch label broadcast from size 1
]


@pytest.mark.parametrize(("eq", "shapes"), TABLE, ids=[t[0].replace(" ", "_") for t in TABLE])
def test_forward_matches_numpy(eq, shapes):
    arrays = [_a(*s) for s in shapes]
    out = dg.einsum(eq, *[dg.tensor(a) for a in arrays])
    expected = np.einsum(eq.replace(" ", ""), *arrays) if "1, 3, 4" not in str(shapes) else \
        np.einsum(eq, np.broadcast_to(arrays[0], (2, 3, 4)), arrays[1])
    assert out.shape == np.shape(expected)
    dg.testing.assert_close(out.numpy(), expected, rtol=1e-12, atol=1e-12, equal_nan=True,
                            check_dtype=False)


@pytest.mark.parametrize(("eq", "shapes"), [t for t in TABLE if 0 not in sum(t[1], ())],
                         ids=[t[0].replace(" ", "_") for t in TABLE if 0 not in sum(t[1], ())])
def test_gradient_matches_finite_differences(eq, shapes):
    assert gradcheck(lambda *xs: dg.einsum(eq, *xs), *[_a(*s) for s in shapes])


def test_ellipsis_dims_left_out_of_the_output_are_summed():
    # PyTorch sums them (NumPy refuses the equation).
    a, b = _a(2, 3, 4), _a(2, 3, 4)
    out = dg.einsum("b...,b...->b", dg.tensor(a), dg.tensor(b))
    dg.testing.assert_close(out.numpy(), (a * b).sum((1, 2)), rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)


def test_list_form_and_int_operands():
    a, b = _a(2, 3), _a(3, 4)
    dg.testing.assert_close(dg.einsum("ij,jk", [dg.tensor(a), dg.tensor(b)]).numpy(), a @ b,
                            rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    k = dg.tensor(np.arange(6).reshape(2, 3))
    out = dg.einsum("ij,kj->ik", k, k)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.numpy(), k.numpy() @ k.numpy().T)


def _ops(graph) -> list[str]:
    return [n.op for n in graph.nodes]


def test_contractions_lower_to_one_matmul():
    # Attention-style contractions: permutes and reshapes around a single (batched) matmul,
    # so the compiled code calls BLAS; an outer product is a broadcast multiply (fusible).
    g = dg.trace(lambda q, k: dg.einsum("bhqd,bhkd->bhqk", q, k),
                 dg.tensor(_a(2, 2, 3, 4)), dg.tensor(_a(2, 2, 5, 4)))
    assert _ops(g).count("matmul") == 1
    g = dg.trace(lambda a, b: dg.einsum("ij,jk->ik", a, b), dg.tensor(_a(2, 3)),
                 dg.tensor(_a(3, 4)))
    assert _ops(g) == ["matmul"]
    g = dg.trace(lambda a, b: dg.einsum("i,j->ij", a, b), dg.tensor(_a(3)), dg.tensor(_a(4)))
    assert "matmul" not in _ops(g) and "mul" in _ops(g)
    g = dg.trace(lambda s: dg.einsum("ii->i", s), dg.tensor(_a(3, 3)))
    assert _ops(g) == ["diagonal"]


def test_compiled_matches_eager_and_is_one_kernel():
    a, b, c = _a(2, 3, 4), _a(2, 4, 5), _a(5)

    def f(a, b, c):
        return dg.einsum("bij,bjk,k->bi", a, b, c), dg.einsum("bii->b", a[:, :, :3])

    cf = dg.compile(f)
    ta = [dg.tensor(x) for x in (a, b, c)]
    for got, want in zip(cf(*ta), f(*ta)):
        dg.testing.assert_close(got.numpy(), want.numpy(), rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)
    assert cf.stats.traces == 1


@pytest.mark.parametrize(("eq", "shapes", "error", "match"), [
    ("ij,jk->ik", [(2, 3), (4, 5)], RuntimeError, "subscript j has size 4 for operand 1"),
    ("ij->ijk", [(2, 3)], RuntimeError, "output subscript k does not appear"),
    ("ij->ii", [(2, 3)], RuntimeError, "appears more than once"),
    ("ijk", [(2, 3)], RuntimeError, "number of subscripts"),
    ("ij,jk", [(2, 3)], RuntimeError, "fewer operands"),
    ("ij", [(2, 3), (3, 4)], RuntimeError, "more operands"),
    ("ii", [(2, 3)], RuntimeError, "repeated"),
    ("i1", [(2, 3)], RuntimeError, "invalid subscript"),
    ("......", [(2, 3)], RuntimeError, "more than one ellipsis"),
])
def test_errors(eq, shapes, error, match):
    with pytest.raises(error, match=match):
        dg.einsum(eq, *[dg.tensor(_a(*s)) for s in shapes])
