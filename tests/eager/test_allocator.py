"""Importing dualgraph sets glibc's allocator thresholds so that a step's freed temporaries
are reused by the next step instead of being faulted in again (`dualgraph.eager.allocator`);
``DUALGRAPH_MALLOC=default`` leaves glibc's defaults. Counted in page faults, not time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dualgraph.eager import allocator

# Eight 2 MiB temporaries a step, all freed at its end, as an eager step's activations are.
_STEPS = r"""
import resource, sys
import numpy as np
if sys.argv[1] == "import":
    import dualgraph
    from dualgraph.eager import allocator
else:  # the module alone, without importing dualgraph (which would tune on import)
    import importlib.util
    spec = importlib.util.spec_from_file_location("allocator", sys.argv[1])
    allocator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(allocator)
    allocator.tune()
def step():
    a = [np.ones(1 << 19, np.float32) for _ in range(8)]
    return sum(float(x[-1]) for x in a)
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(allocator.TUNED[0], resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(env_value: str | None, how: str) -> tuple[bool, int]:
    env = {k: v for k, v in os.environ.items() if k != "DUALGRAPH_MALLOC"}
    if env_value is not None:
        env["DUALGRAPH_MALLOC"] = env_value
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root
    out = subprocess.run([sys.executable, "-c", _STEPS, how], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(not allocator.TUNED[0], reason="glibc only")
def test_freed_temporaries_are_reused_not_faulted_in_again():
    tuned, faults = _faults(None, "import")
    default, default_faults = _faults("default", allocator.__file__)
    assert tuned and not default
    # 20 steps of 8 x 512 pages: glibc's defaults fault most of them in again every step.
    assert default_faults > 20 * 8 * 512 // 2, default_faults
    assert faults < default_faults // 10, (faults, default_faults)
