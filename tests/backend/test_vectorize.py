"""The float32 ``exp``, ``tanh`` and ``sigmoid`` of generated loops vectorize.

A scalar libm call (``expf``, ``tanhf``) in a loop keeps LLVM from vectorizing the whole
loop, and nothing in the results shows it: only the machine code does. These tests read
the optimized LLVM IR (vector types, any target) and, on x86-64, the assembly (packed
instructions), of the W3 workload's kernels and of one loop per function. A float32 sum
adds its values to its float64 lanes as one vector (`kernels.fold_lanes`): the same bits as
the lane loop, checked here too.
"""

from __future__ import annotations

import platform
import re

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.backend.numba.codegen import LANES
from dualgraph.passes import optimize
from dualgraph.trace.autodiff import differentiate
from dualgraph.workloads import chain_data, elementwise_chain

N = 4096
X86 = platform.machine().lower() in ("x86_64", "amd64")
# A packed single-precision division on an SSE, AVX or AVX-512 register. In these loops a
# division only comes from tanh and sigmoid, so it shows that they were vectorized.
PACKED_DIV = re.compile(r"\bv?divps\s+[^\n]*%[xyz]mm")
PACKED_FMA_OR_MUL = re.compile(r"\bv?(fn?madd\d+|mul)ps\s+[^\n]*%[xyz]mm")
LIBM_CALL = re.compile(r"@(expf|tanhf|exp|tanh|llvm\.exp\.f32)\b")


def _compiled(graph):
    """(LLVM IR, assembly, source) of ``graph``'s kernel, compiled in memory for its
    inputs. (In memory, `cache.load` leaves out the FMA contraction of float32 kernels;
    vectorizing does not depend on it.)"""
    kernel = build(graph, use_cache=False)
    arrays = [np.ones(n.shape, n.dtype) for n in graph.inputs]
    sig = kernel.signature(arrays)
    kernel.compile(sig=sig)
    return kernel.fn.inspect_llvm(sig), kernel.fn.inspect_asm(sig), kernel.source


def _w3_graphs():
    x = dg.tensor(chain_data(N), requires_grad=True)
    d = differentiate(dg.trace(elementwise_chain, x))
    return {"forward": optimize(d.forward), "backward": optimize(d.backward)}


@pytest.fixture(scope="module")
def w3():
    return {name: _compiled(g) for name, g in _w3_graphs().items()}


@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid"])
def test_one_loop_per_function_has_vector_code_and_no_libm_call(op):
    fn = getattr(dg, op)
    graph = optimize(dg.trace(lambda t: fn(t * 0.5 + 1.0), dg.ones(N, dtype=dg.float32)))
    llvm, asm, source = _compiled(graph)
    assert f"dgk.{op}_f32(" in source  # the float32 lowering, not np.exp / np.tanh
    assert not LIBM_CALL.search(llvm), LIBM_CALL.search(llvm).group(0)
    assert re.search(r"<\d+ x float>", llvm), "no vector float operation in the kernel"
    if op != "exp":
        assert re.search(r"fdiv (?:[a-z]+ )*<\d+ x float>", llvm), "the division was not vectorized"
    if X86:
        assert PACKED_FMA_OR_MUL.search(asm)
        if op != "exp":
            assert PACKED_DIV.search(asm)


def _vector_divisions(llvm: str) -> tuple[int, int]:
    """(sigmoid's ``1 / (1 + e)``, tanh's ``x p / q``): the vector divisions in ``llvm``,
    told apart by their numerator, a splat of 1.0 or a computed value. (Fast-math flags,
    ``contract``, may stand between an instruction and its type.)"""
    divs = re.findall(r"fdiv (?:[a-z]+ )*<\d+ x float> ([^,]+),", llvm)
    ones = [d for d in divs if "1.000000e+00" in d]
    return len(ones), len(divs) - len(ones)


def test_w3_loops_are_vectorized(w3):
    """W3's forward has a tanh loop and a sigmoid loop feeding the sum; its backward
    recomputes sigmoid. Each of those loops must be vectorized: each has its own kind of
    vector division."""
    sigmoid, tanh = _vector_divisions(w3["forward"][0])
    assert sigmoid >= 1 and tanh >= 1, w3["forward"][2]
    # The sum's values are folded into its float64 lanes as one vector.
    assert "dgk.fold_lanes(" in w3["forward"][2]
    assert re.search(r"fadd (?:[a-z]+ )*<16 x double>", w3["forward"][0])
    sigmoid, tanh = _vector_divisions(w3["backward"][0])
    assert sigmoid >= 1, w3["backward"][2]
    for name, (llvm, asm, source) in w3.items():
        assert "dgk.sigmoid_f32(" in source, name
        assert not LIBM_CALL.search(llvm), (name, LIBM_CALL.search(llvm).group(0))
        if X86:
            assert PACKED_DIV.search(asm) and PACKED_FMA_OR_MUL.search(asm), name


def _lane_sum(v: np.ndarray) -> np.float32:
    """A float32 sum as the generated lane loop adds it: value i into float64 lane i % 16
    in order, the leftover values into lane 0, then the lanes in order."""
    whole = len(v) // LANES * LANES
    # Reducing axis 0 adds the rows one after the other: the order of the lane loop.
    lanes = v[:whole].reshape(-1, LANES).astype(np.float64).sum(axis=0)
    for t in v[whole:]:
        lanes[0] += np.float64(t)
    acc = np.float64(0)
    for lane in lanes:
        acc += lane
    return np.float32(acc)


@pytest.mark.parametrize("n", [64, 100, 1024, 1040, 2047, 5000, 70_001])
def test_float32_sum_folds_lanes_in_the_order_of_the_lane_loop(n):
    """`kernels.fold_lanes` adds a float32 sum's values to its lanes from a buffer, in
    vector registers: the same additions in the same order as the plain lane loop, so
    the same bits, whatever the length's remainders."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * np.float32(1e3)
    graph = optimize(dg.trace(lambda t: (t * t).sum(), dg.tensor(x)))
    kernel = build(graph, use_cache=False)
    assert "dgk.fold_lanes(" in kernel.source
    (got,) = kernel(x)
    assert got.tobytes() == _lane_sum(x * x).tobytes()


def test_fold_lanes_matches_the_writers_lane_count():
    from dualgraph.backend.numba import codegen, kernels

    assert kernels.LANES == codegen.LANES
