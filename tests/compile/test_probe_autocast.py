"""Autocast is a per-thread state, and every compiled call (tier 0 and tier 1 alike) rounds
its products as the autocast region it is called in says, as the eager call does."""

from __future__ import annotations

import threading

import numpy as np

import dualgraph as dg
from dualgraph.compile import tiered as tiering

from .conftest import TIMEOUT

# 1 + 2**-9 is not a bfloat16 value: rounded (autocast) the product of a row of ones is 3.0,
# unrounded it is 3.005859375.
_B = np.full((3, 1), 1.0 + 2.0 ** -9, np.float32)
_ROUNDED = np.full((2, 1), 3.0, np.float32)
_EXACT = np.full((2, 1), 3.0 * (1.0 + 2.0 ** -9), np.float32)


def _product(a, b):
    return a @ b


def test_autocast_region_is_per_thread_for_eager_and_compiled_calls():
    f = dg.compile(_product)
    a, b = dg.ones(2, 3), dg.tensor(_B)
    got: dict = {}
    entered, checked = threading.Event(), threading.Event()

    def inside():
        with dg.autocast("cpu"):
            got["flag"] = dg.is_autocast_cpu_enabled()
            got["compiled"] = f(a, b)
            got["eager"] = _product(a, b)
            entered.set()
            checked.wait(TIMEOUT)
            got["compiled again"] = f(a, b)  # after the other thread's call outside

    t = threading.Thread(target=inside)
    t.start()
    try:
        assert entered.wait(TIMEOUT)
        # The other thread is inside its region now; this one is not.
        assert not dg.is_autocast_cpu_enabled()
        outside_compiled, outside_eager = f(a, b), _product(a, b)
    finally:
        checked.set()
        t.join(TIMEOUT)
    assert got["flag"]
    dg.testing.assert_close(got["compiled"], _ROUNDED)
    dg.testing.assert_close(got["eager"], _ROUNDED)
    dg.testing.assert_close(got["compiled again"], _ROUNDED)
    dg.testing.assert_close(outside_compiled, _EXACT)
    dg.testing.assert_close(outside_eager, _EXACT)
    assert f.stats.traces == 2  # one entry per autocast state, each reused


def test_one_autocast_instance_entered_by_two_threads():
    region = dg.autocast("cpu")
    a, b = dg.ones(2, 3), dg.tensor(_B)
    got: dict = {}
    entered, left = threading.Event(), threading.Event()

    def inside():
        with region:
            entered.set()
            left.wait(TIMEOUT)
            got["still inside"] = dg.is_autocast_cpu_enabled()
        got["after"] = dg.is_autocast_cpu_enabled()

    t = threading.Thread(target=inside)
    t.start()
    assert entered.wait(TIMEOUT)
    with region:  # this thread's exit restores this thread's state only
        dg.testing.assert_close(a @ b, _ROUNDED)
    left.set()
    t.join(TIMEOUT)
    assert not dg.is_autocast_cpu_enabled()
    assert got == {"still inside": True, "after": False}


def _shifted_product(a, b):
    # Not `_product`'s graph: its kernels are not already loaded in this process.
    return a @ b - 1.0


def test_tier0_and_tier1_follow_each_calls_autocast_state(tiered, private_cache):
    f = dg.compile(_shifted_product, tiered=True)
    a, b = dg.ones(2, 3), dg.tensor(_B)
    # Tier 0: the first call of each state answers before its kernels exist.
    with dg.autocast("cpu"):
        dg.testing.assert_close(f(a, b), _ROUNDED - 1)
    dg.testing.assert_close(f(a, b), _EXACT - 1)
    tier0 = f.stats.tier0_calls
    assert tiering.wait(f, TIMEOUT), f.stats.tier_failure
    for _ in range(2):  # tier 1, alternating the state
        with dg.autocast("cpu"):
            dg.testing.assert_close(f(a, b), _ROUNDED - 1)
        dg.testing.assert_close(f(a, b), _EXACT - 1)
    assert (tier0, f.stats.tier1_calls) == (2, 4)
    assert f.stats.traces == 2
