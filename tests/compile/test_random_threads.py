"""Compiled random functions called from several threads: each call uses its own key."""

from __future__ import annotations

import threading

import numpy as np

import dualgraph as dg
from dualgraph.compile import callgen, random_state


def test_each_call_uses_the_key_it_drew(monkeypatch):
    """Another thread drawing a key between this call's draw and its kernel's read (made
    to happen here: each draw of the generated call path is followed by another) must not
    change the numbers this call gets."""
    x = dg.zeros(4)
    plain = dg.compile(lambda x: x + dg.rand(4), tiered=False)
    plain(x)
    dg.manual_seed(5)
    first = plain(x).tolist()
    draw = callgen._BUILTINS["refresh_key"]

    def interleaved():
        key = draw()
        random_state.refresh_key()  # another thread's call, between draw and read
        return key

    monkeypatch.setitem(callgen._BUILTINS, "refresh_key", interleaved)
    f = dg.compile(lambda x: x + dg.rand(4), tiered=False)  # generated with the patch
    f(x)
    dg.manual_seed(5)
    assert f(x).tolist() == first


def test_threads_draw_different_numbers():
    f = dg.compile(lambda x: x + dg.rand(64), tiered=False)
    x = dg.zeros(64)
    f(x)
    results: list = []
    lock = threading.Lock()

    def work():
        for _ in range(50):
            r = f(x).numpy().tobytes()
            with lock:
                results.append(r)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 200 and len(set(results)) == 200
    assert np.isfinite(np.frombuffer(results[0], np.float32)).all()
