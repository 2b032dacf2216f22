"""The distance to the machine's limits: bytes and flops per kernel on kernels whose counts
are known by hand (a copy, an axpy, a GEMM), the share of the limit from a measured time,
and the per-machine measurement, kept in the cache directory."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import passes as P

C = importlib.import_module("dualgraph.compare")  # the module: dg.compare is the function

N = 4096
LIMITS = C.MachineLimits(10e9, {"float32": 100e9, "float64": 50e9}, "test")


def _costs(fn, *args) -> list:
    return C.kernel_costs(P.optimize(dg.trace(fn, *args)))


def test_copy_moves_its_bytes_twice_and_computes_nothing():
    x = dg.randn(N)
    (k,) = _costs(lambda x: x.flip(0), x)
    assert (k.what, k.bytes, k.flops) == ("flip", 2 * 4 * N, 0)
    (k,) = _costs(lambda a, b: dg.cat([a, b]), x, dg.randn(N))  # read N + N, write 2N
    assert (k.bytes, k.flops) == (4 * (N + N + 2 * N), 0)


def test_axpy_reads_two_arrays_writes_one_and_does_two_flops_each():
    x, y = dg.randn(N), dg.randn(N)
    (k,) = _costs(lambda x, y: 2.0 * x + y, x, y)
    assert k.what == "fused elementwise: mul -> add"
    assert (k.bytes, k.flops, k.dtype) == (3 * 4 * N, 2 * N, "float32")


def test_gemm_is_two_m_n_k_flops_over_its_three_matrices():
    m, k_, n = 64, 32, 16
    a = dg.randn(m, k_).to(dg.float64)
    b = dg.randn(k_, n).to(dg.float64)
    (k,) = _costs(lambda a, b: a @ b, a, b)
    assert (k.what, k.flops, k.dtype) == ("matmul", 2 * m * n * k_, "float64")
    assert k.bytes == 8 * (m * k_ + k_ * n + m * n)


def test_a_broadcast_input_counts_what_is_stored():
    x, row = dg.randn(64, 128), dg.randn(128)
    (k,) = _costs(lambda x, r: x * r, x, row)
    assert k.bytes == 4 * (64 * 128 + 128 + 64 * 128) and k.flops == 64 * 128


def test_views_are_not_kernels():
    x = dg.randn(8, 4)
    assert _costs(lambda x: x.T.reshape(32), x) == []


def test_bound_and_share_from_the_limits():
    k = C.KernelCost("forward", 0, "axpy", "float32", bytes=12_000_000, flops=2_000_000)
    C._judge(k, LIMITS)
    # 12 MB at 10 GB/s: 1.2 ms; 2 MFLOP at 100 GFLOP/s: 20 us. Memory-bound.
    assert k.bound == "memory" and k.ideal == pytest.approx(1.2e-3) and k.share is None
    k.time = 2.4e-3
    C._judge(k, LIMITS)
    assert k.share == pytest.approx(0.5)
    g = C.KernelCost("forward", 1, "matmul", "float64", bytes=8_000, flops=2 * 512 ** 3)
    g.time = 2 * 512 ** 3 / 25e9
    C._judge(g, LIMITS)
    assert g.bound == "compute" and g.share == pytest.approx(0.5)  # 25 of 50 GFLOP/s
    lines = C.roofline_lines([k, g], C.asdict(LIMITS), call_time=10e-3)
    assert "50% of memory bandwidth" in lines[2] and "12.0 MB" in lines[2]
    assert "50% of float64 GEMM peak" in lines[3]
    assert "10.0 GB/s" in lines[0]


def test_timed_kernels_get_a_share_of_their_measured_time():
    x, y = dg.randn(1 << 16), dg.randn(1 << 16)
    g = P.optimize(dg.trace(lambda x, y: 2.0 * x + y, x, y))
    (k,) = C.kernel_roofline([(g, "forward")], LIMITS, budget=0.02)
    assert k.time is not None and k.time > 0
    assert k.share == pytest.approx(k.bytes / LIMITS.bandwidth / k.time)


def test_compare_reports_each_kernel(monkeypatch):
    monkeypatch.setattr(C, "machine_limits", lambda refresh=False: LIMITS)
    x = dg.randn(N, requires_grad=True)
    r = dg.compare(lambda x: (dg.tanh(x) * x).sum(), x, repeats=6, budget=0.1)
    assert r.limits["bandwidth"] == LIMITS.bandwidth and r.roofline
    timed = [k for k in r.roofline if k["time"] is not None]
    assert timed and all(k["share"] == pytest.approx(k["ideal"] / k["time"]) for k in timed)
    text = str(r)
    assert "distance to the machine's limits" in text and "of memory bandwidth" in text
    assert json.loads(r.to_json())["roofline"] == r.roofline


def test_limits_are_measured_once_per_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(C, "_LIMITS", None)
    calls = []

    def measure(repeats: int = 5) -> C.MachineLimits:
        calls.append(1)
        return C.MachineLimits(9e9, {"float32": 80e9, "float64": 40e9}, C._machine_key())

    monkeypatch.setattr(C, "measure_limits", measure)
    assert C.machine_limits().bandwidth == 9e9 and len(calls) == 1
    monkeypatch.setattr(C, "_LIMITS", None)  # a new process: read back from the file
    assert C.machine_limits().gemm_peak["float32"] == 80e9 and len(calls) == 1
    (tmp_path / C.LIMITS_FILE).write_text("{not json")  # damaged: measured again
    monkeypatch.setattr(C, "_LIMITS", None)
    assert C.machine_limits().bandwidth == 9e9 and len(calls) == 2
    data = json.loads((tmp_path / C.LIMITS_FILE).read_text())
    data["key"] = "another machine"
    (tmp_path / C.LIMITS_FILE).write_text(json.dumps(data))
    monkeypatch.setattr(C, "_LIMITS", None)
    C.machine_limits()
    assert len(calls) == 3


def test_busy_measurements_are_retaken_and_the_best_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    figures = iter([3e9, 8e9, 5e9, 99e9])

    def measure(repeats: int = 5) -> C.MachineLimits:
        return C.MachineLimits(next(figures), {"float32": 1e9, "float64": 1e9},
                               C._machine_key(), cpu_share=0.3)

    monkeypatch.setattr(C, "measure_limits", measure)
    seen = []
    for _ in range(C.BUSY_REMEASURES + 1):  # a new process each time
        monkeypatch.setattr(C, "_LIMITS", None)
        seen.append(C.machine_limits().bandwidth)
    assert seen == [3e9, 8e9, 8e9, 8e9]  # the best of three, then no more measuring


def test_measure_limits_gives_plausible_figures():
    lim = C.measure_limits(repeats=2)
    assert 1e8 < lim.bandwidth < 1e12
    assert all(1e8 < v < 1e13 for v in lim.gemm_peak.values())
    assert lim.key == C._machine_key()


def test_explain_shows_bytes_and_flops_per_kernel():
    x, y = dg.randn(N), dg.randn(N)
    e = dg.explain(lambda x, y: 2.0 * x + y, x, y)
    (k,) = e.kernel_costs
    assert (k.bytes, k.flops) == (3 * 4 * N, 2 * N)
    assert "== kernels: bytes moved and flops" in str(e)
    assert np.isfinite(k.bytes)
