"""The library's C routines (`backend/numba/library`) build one routine and dtype at a
time, when a kernel first calls it: a kernel's header names exactly the units its code
calls, and a program that calls one routine builds no other."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from dualgraph.backend.numba import library


def test_a_kernel_header_registers_exactly_the_units_its_code_calls():
    body = textwrap.dedent("""\
        def k(x, y, out, t):
            dgw.row_softmax_float32(x, out, 1, 0, 0.0)
            dgw.row_layer_norm_backward_float64(x, x, x, out, 1, 2, 1e-5)
            dgb.conv_im2col_float32(x, y, t)
            dgr.rnn_forward_float64(False, False, False, 0, 0, x, x, x, t, x, x, x, x, x, y)
        """)
    assert library.needed_by(body) == [
        ("row", "softmax", "float32"), ("row", "layer_norm_grads", "float64"),
        ("rnn", "forward", "float64"), ("conv", "im2col", "float32")]
    header = "from dualgraph.backend.numba import blas as dgb\n"
    lines = library.needed_lines(body, header)
    # The families the header does not import are imported; blas (dgb) is not again.
    assert "import row_kernels as dgw\n" in lines
    assert "import recurrent_kernels as dgr\n" in lines
    assert "as dgb" not in lines
    assert "dglib.need_units([('row', 'softmax', 'float32'), " in lines
    assert library.needed_lines("def k(x):\n    return x\n", header) == ""


_ONE_ROUTINE = """
import numpy as np
import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.backend.numba import blas, recurrent_kernels, row_kernels

f = dg.compile(lambda x: F.softmax(x, -1), tiered=False)
x = np.random.default_rng(0).standard_normal((3, 1500))
got = f(dg.tensor(x)).numpy()
dg.testing.assert_close(got, F.softmax(dg.tensor(x), -1).numpy(), rtol=1e-12, atol=0)
print(sorted(row_kernels.ROUTINES.built()), sorted(recurrent_kernels.ROUTINES.built()),
      sorted(blas.ROUTINES.built()))
"""


def test_a_program_builds_only_the_routines_and_dtype_it_calls(tmp_path):
    # A fresh process: this one may have built other units already.
    env = dict(os.environ, DUALGRAPH_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _ONE_ROUTINE], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.split("\n")[-2] == "[('softmax', 'float64')] [] []"


def test_a_unit_being_built_elsewhere_is_waited_for_not_built_again():
    # flock is per open file, so a second holder in this process stands for another
    # process: it gets the unit's lock only once the builder lets it go.
    import threading

    order = []
    building = threading.Event()

    def builder():
        with library._unit_lock("dualgraph_test_unit"):
            building.set()
            order.append("built")

    def needer():
        building.wait()
        with library._unit_lock("dualgraph_test_unit"):
            order.append("loaded")

    with library._unit_lock("dualgraph_test_unit"):
        threads = [threading.Thread(target=f) for f in (builder, needer)]
        for t in threads:
            t.start()
        assert order == []  # both wait while the unit is held
    for t in threads:
        t.join(timeout=30)
    assert order == ["built", "loaded"]


def test_a_cold_compile_queues_the_missing_units_first():
    from dualgraph.backend.numba import row_kernels

    units = [("row", "softmax", "float32"), ("row", "layer_norm", "float64")]
    built = row_kernels.ROUTINES.built()
    assert library.missing(units) == [u for u in units if (u[1], u[2]) not in built]
