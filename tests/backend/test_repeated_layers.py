"""A model's repeated layers compile once: the parts of a split training step follow the
layers, so a deeper model adds parts but no new functions.

`partition.repeats` finds the runs of the step's graph that repeat back to back (each
block's forward, its backward, the optimizer's update of each block's parameters) and
cuts every repetition as the first, so they print the same code, which the kernel cache
compiles once. These tests count functions and compiles, never time.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import partition as P
from dualgraph.backend.numba import cache
from dualgraph.ir.graph import Node

from .._support.compiled import cross_entropy_step

WIDTH, HIDDEN, BATCH = 24, 40, 20
# Small parts, so that small blocks are parts of their own without the compile time of a
# large model.
SEGMENT_LINES = "60"


def _model(n_blocks: int, adam: bool = True):
    """Blocks of two residual MLPs between an input and an output layer, with an Adam
    (or plain SGD) step: in-place updates of every parameter and its state. Seeded."""
    nn = dg.nn

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(WIDTH, HIDDEN)
            self.proj = nn.Linear(HIDDEN, WIDTH)

        def forward(self, x):
            return x + self.proj(dg.relu(self.fc(x)))

    class Block(nn.Module):  # two residual sublayers, as a transformer block has
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = Mlp(), Mlp()

        def forward(self, x):
            return self.second(self.first(x))

    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, WIDTH), *[Block() for _ in range(n_blocks)],
                        nn.Linear(WIDTH, 5))
    opt = (dg.optim.Adam(net.parameters(), lr=1e-2) if adam else
           dg.optim.SGD(net.parameters(), lr=1e-2))
    return net, cross_entropy_step(net, opt)


def _data():
    rng = np.random.default_rng(3)
    return (dg.tensor(rng.standard_normal((BATCH, 12)).astype(np.float32)),
            dg.tensor(rng.integers(0, 5, BATCH)))


def _kernel(compiled):
    (entry,) = compiled.entries()
    return entry.kernel


def _codes(kernel) -> list[str]:
    return [p.code for p in kernel.parts]


def _built(monkeypatch, n_blocks: int):
    """The kernel `dg.compile` builds for the Adam step of ``n_blocks`` blocks, taken
    before anything compiles."""
    import dualgraph.backend.numba as backend

    built = []
    real = backend.build

    class TakenError(Exception):
        pass

    def take(*args, **kwargs):
        built.append(real(*args, **kwargs))
        raise TakenError

    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", SEGMENT_LINES)
    monkeypatch.setattr(backend, "build", take)
    _, step = _model(n_blocks)
    with pytest.raises(TakenError):
        dg.compile(step, tiered=False)(*_data())
    monkeypatch.setattr(backend, "build", real)
    return built[0]


def test_deeper_models_print_the_functions_of_two_blocks(monkeypatch):
    kernels = {n: _built(monkeypatch, n) for n in (2, 3, 4)}
    parts = [len(kernels[n].parts) for n in (2, 3, 4)]
    assert parts[0] > 2 and parts[0] < parts[1] < parts[2]
    # Each block's forward, backward and parameter updates are parts of their own,
    # identical in every block ...
    assert len(set(_codes(kernels[2]))) < len(kernels[2].parts)
    # ... so deeper models print no function two blocks do not.
    assert set(_codes(kernels[3])) == set(_codes(kernels[2]))
    assert set(_codes(kernels[4])) == set(_codes(kernels[2]))


@pytest.fixture
def cold(tmp_path, monkeypatch):
    """An empty kernel cache, one compile process, small parts."""
    monkeypatch.setenv("DUALGRAPH_COMPILE_JOBS", "1")
    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", SEGMENT_LINES)
    with cache.isolated(str(tmp_path)):
        yield


def test_four_blocks_compile_nothing_after_two_and_equal_eager(cold):
    x, t = _data()
    kernels = {}
    for n in (2, 4):
        net_e, step_e = _model(n, adam=False)
        net_c, step_c = _model(n, adam=False)
        compiled = dg.compile(step_c, tiered=False)
        for _ in range(2):
            le, lc = step_e(x, t), compiled(x, t)
            dg.testing.assert_close(lc.numpy(), le.numpy(), rtol=1e-5, atol=1e-6)
        for pe, pc in zip(net_e.parameters(), net_c.parameters()):
            dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-4, atol=1e-6)
        kernels[n] = _kernel(compiled)
    two, four = kernels[2], kernels[4]
    assert len(four.parts) > len(two.parts) > 2
    # Every part of the four-block step was compiled by the two-block step.
    assert four.shared_parts == len(four.parts)


def test_repeats_finds_back_to_back_runs_at_their_shortest_period():
    toks = [9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 7, 4, 4]
    runs = P.repeats(toks, [10] * len(toks), target=20)
    assert runs[0] == (1, 3, 3)  # the most weight saved: two periods of 30
    assert (11, 1, 2) in runs  # saves 10, at least target // 2
    assert not any(p == 6 for _, p, _ in runs)  # a multiple of a run's period


def test_token_keys_see_literal_sizes_and_which_large_sizes_are_equal():
    def node(shape):
        x = Node("input", (), {}, shape, np.dtype(np.float32))
        return Node("neg", (x,), {}, shape, np.dtype(np.float32))

    # Sizes above `keep` are read from the arrays: any size, as long as equal sizes
    # stay equal (a square weight prints one size variable, a rectangular one two).
    assert P.tokens([node((40, 40)), node((64, 64)), node((40, 64))], keep=16) == [0, 0, 1]
    # Sizes up to `keep` are literals in the code.
    assert P.tokens([node((8, 40)), node((12, 40))], keep=16) == [0, 1]
