"""The library's C routines are cached on disk under a key that covers the source of
every module they compile in, not only the file that defines them: an edit to an
inlined helper (`kernels.exp_f32`, `row_simd.lane_sum`) builds them again."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys

from dualgraph.backend.numba import blas, recurrent_kernels, row_kernels


def test_each_family_is_keyed_on_every_module_it_compiles_in():
    assert row_kernels.ROUTINES.modules == (
        "dualgraph.backend.numba.row_kernels", "dualgraph.backend.numba.raw",
        "dualgraph.backend.numba.row_simd", "dualgraph.backend.numba.kernels")
    assert "dualgraph.backend.numba.kernels" in recurrent_kernels.ROUTINES.modules
    assert blas.ROUTINES.modules == ("dualgraph.backend.numba.blas",
                                     "dualgraph.backend.numba.raw")
    assert blas.GEMM_ROUTINES.modules == blas.ROUTINES.modules
    digest = hashlib.sha256()
    for name in row_kernels.ROUTINES.modules:
        with open(importlib.util.find_spec(name).origin, "rb") as f:
            digest.update(f.read())
    assert row_kernels.ROUTINES.source_key() == digest.hexdigest()[:24]


# Builds (or loads) one row routine; argv[1], when given, stands for an edit of a module
# the family compiles in. Prints whether the C function came from the disk cache and
# the cache class of a helper it calls.
_BUILD = """
import sys
from dualgraph.backend.numba import row_kernels
if len(sys.argv) > 1:
    row_kernels.ROUTINES._key = sys.argv[1]
row_kernels.need("float64", "layer_norm_weight_grad")
fn = row_kernels.ROUTINES._built[("layer_norm_weight_grad", "float64")]
print(fn.cache_hits, type(row_kernels._stats._cache).__name__)
"""


def test_a_changed_source_key_builds_the_routine_again(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))

    def build(*argv: str) -> str:
        return subprocess.run([sys.executable, "-c", _BUILD, *argv], env=env, check=True,
                              capture_output=True, text=True).stdout.split()

    assert build() == ["0", "KeyedCache"]  # an empty cache: compiled, then saved
    assert build() == ["1", "KeyedCache"]  # loaded
    assert build("edited")[0] == "0"  # the same file, another key: compiled again
