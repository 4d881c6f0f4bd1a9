"""NumPy's BLAS threads under jaxstream (Note [BLAS threads] in backends/blas.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from threadpoolctl import threadpool_info

from jaxstream.backends import blas

_REPORT = (
    "import json, threadpoolctl, jaxstream as js\n"
    "from jaxstream.backends import blas\n"
    "print(json.dumps({'cap': blas.blas_threads(), 'pools': [\n"
    "    lib['num_threads'] for lib in blas._numpy_blas().info()]}))\n"
)


def _fresh_process(**hand_set: str) -> dict:
    """What a new process that imports jaxstream reports: jaxstream's cap and NumPy's pools."""
    env = {k: v for k, v in os.environ.items() if k not in blas.HAND_SET_VARIABLES}
    env.update(hand_set)
    done = subprocess.run(
        [sys.executable, "-c", _REPORT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jaxstream_runs_numpy_blas_on_one_thread():
    report = _fresh_process()
    assert report["cap"] == blas.DEFAULT_THREADS == 1
    assert report["pools"] and all(threads == 1 for threads in report["pools"])


def test_a_pool_sized_by_hand_is_kept():
    report = _fresh_process(OPENBLAS_NUM_THREADS="2")
    assert report["cap"] is None
    assert report["pools"] and all(threads == 2 for threads in report["pools"])


def _numpy_pools() -> list[int]:
    return [lib["num_threads"] for lib in blas._numpy_blas().info()]


def test_the_cap_can_be_changed_and_given_back():
    before, others = blas.blas_threads(), _other_pools()
    try:
        blas.set_blas_threads(2)
        assert blas.blas_threads() == 2 and set(_numpy_pools()) == {2}
        blas.set_blas_threads(None)
        assert blas.blas_threads() is None
        assert _numpy_pools() == blas._NumpyBlas.original
        assert _other_pools() == others  # other libraries' pools are not NumPy's
    finally:
        blas.set_blas_threads(before)


def _other_pools() -> list[tuple[str, int]]:
    mine = {lib.filepath for lib in blas._numpy_blas().lib_controllers}
    return [(i["filepath"], i["num_threads"]) for i in threadpool_info()
            if i["filepath"] not in mine]


@pytest.mark.parametrize("count", [0, -1, 1.5, "2", True])
def test_a_bad_count_is_refused(count):
    before = blas.blas_threads()
    with pytest.raises(ValueError, match="set_blas_threads: expected a positive int or None"):
        blas.set_blas_threads(count)
    assert blas.blas_threads() == before
