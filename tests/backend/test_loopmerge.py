"""Merging adjacent loop nests (`backend/numba/loopmerge.py`): merged when each iteration
only touches its own cell of what the other nest writes, kept apart otherwise."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend.numba.loopmerge import merge_loops

PARAMS = {"a0", "a1", "a2", "w0", "w1", "o0"}


def nest(target: str, expr: str, n: int = 4, m: int = 3) -> list[str]:
    return [f"    for i0 in range({n}):", f"        for i1 in range({m}):",
            f"            {target}[i0, i1] = {expr}"]


def merged(lines: list[str], tags: dict | None = None) -> tuple[list[str], dict]:
    return merge_loops(lines, tags or {}, PARAMS)


def count_nests(lines: list[str]) -> int:
    return sum(1 for line in lines if line.startswith("    for "))


def test_same_cell_reads_and_writes_merge():
    lines = (["    # %1 = first"] + nest("a1", "a1[i0, i1] * 2") + ["    v1 = a1",
             "    # %2 = second"] + nest("w0", "v1[i0, i1] + a0[i0, i1]"))
    out, tags = merged(lines, {1: "%1", 6: "%2"})
    assert count_nests(out) == 1
    # The rename moves above the merged nest, the second comment into its body, and the
    # source map follows them.
    assert out.index("    v1 = a1") < out.index("    for i0 in range(4):")
    assert out[tags["%2"] - 1].strip() == "# %2 = second"
    assert out[tags["%1"] - 1] == "    # %1 = first"
    ns: dict = {}
    exec("def k(a0, a1, w0):\n" + "\n".join(out), {}, ns)
    a0, a1, w0 = np.arange(12.0).reshape(4, 3), np.ones((4, 3)), np.zeros((4, 3))
    ns["k"](a0, a1, w0)
    np.testing.assert_array_equal(w0, 2 + a0)


def test_a_view_of_a_written_array_keeps_nests_apart():
    lines = nest("a1", "a1[i0, i1] * 2", 3, 3) + ["    v7 = a1.T"] + nest(
        "w0", "v7[i0, i1]", 3, 3)
    assert count_nests(merged(lines)[0]) == 2


def test_another_index_of_a_written_array_keeps_nests_apart():
    lines = nest("a1", "a1[i0, i1] * 2") + nest("w0", "a1[0, i1]")
    assert count_nests(merged(lines)[0]) == 2
    # ... and so does a write over cells the first nest reads elsewhere.
    lines = nest("w0", "a1[i0, 0]") + nest("a1", "a0[i0, i1]")
    assert count_nests(merged(lines)[0]) == 2


def test_different_ranges_jumps_and_shared_scalars_keep_nests_apart():
    assert count_nests(merged(nest("w0", "a0[i0, i1]") + nest(
        "w1", "a0[i0, i1]", 4, 2))[0]) == 2
    jump = nest("w0", "a0[i0, i1]") + ["            continue"]
    assert count_nests(merged(jump + nest("w1", "a0[i0, i1]"))[0]) == 2
    shared = nest("w0", "a0[i0, i1]") + ["            t = a0[i0, i1]"]
    assert count_nests(merged(shared + nest("w1", "t"))[0]) == 2


def test_a_rebinding_between_nests_is_not_moved():
    lines = nest("w0", "a0[i0, i1]") + ["    w1 = a0"] + nest("o0", "a2[i0, i1]")
    assert count_nests(merged(lines)[0]) == 2


def test_adam_step_updates_each_parameter_in_one_nest(tmp_path, monkeypatch):
    """Adam's m, v and parameter updates of one parameter share a nest, and the merged
    step still equals eager for three steps."""
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))

    def make():
        dg.manual_seed(0)
        net = dg.nn.Linear(6, 5)
        opt = dg.optim.Adam(net.parameters(), lr=0.01)
        x = dg.tensor(np.linspace(-1, 1, 24).reshape(4, 6).astype(np.float32))

        def step(x):
            opt.zero_grad()
            loss = (net(x).tanh() ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return net, step, x

    enet, estep, ex = make()
    cnet, cstep, cx = make()
    f = dg.compile(cstep, tiered=False)
    for _ in range(3):
        dg.testing.assert_close(f(cx).item(), estep(ex).item(), rtol=1e-5, atol=0, equal_nan=True,
                                check_dtype=False)
    dg.testing.assert_close(cnet.weight.numpy(), enet.weight.numpy(), rtol=1e-5, atol=1e-7,
                            equal_nan=True, check_dtype=False)
    (entry,) = f.entries()
    source = entry.kernel.source
    # weight (5, 6): one nest writes both moments and the weight itself.
    heads = [k for k, line in enumerate(source.splitlines())
             if line == "    for i0 in range(5):"]
    bodies = ["\n".join(source.splitlines()[k:k + 40]) for k in heads]
    assert any(b.count("# %") >= 2 for b in bodies), source
