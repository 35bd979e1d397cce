"""The numba kernel's compiled loop, in a module of its own: importing kgeval does not import numba, and numba
caches the machine code on disk (``cache=True`` needs a module-level function). Imported on first use only.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from typing import Any

import numba
import numpy as np
from numba import njit, prange

#: the TBB runtime numba's TBB layer links against, as the tbb wheel names it on each platform
_TBB_LIBRARIES = frozenset({"libtbb.so.12", "libtbb.12.dylib", "tbb12.dll"})


def _preload_tbb() -> bool:
    """Load the tbb wheel's runtime library globally, so that numba's TBB layer finds it.

    The wheel installs ``libtbb.so.12`` into ``<environment>/lib``, which the dynamic loader does not search in a
    plain virtual environment: numba's TBB layer then fails to load and numba quietly falls back to another layer.
    Loaded first (by its full path, symbols global), the library satisfies numba's dependency by its soname.
    Returns whether it was loaded.
    """
    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        return False
    for file in files:
        if file.name in _TBB_LIBRARIES:
            try:
                ctypes.CDLL(str(file.locate()), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
                return True
            except OSError:
                continue
    return False


# Threading layer: unless the user chose one (NUMBA_THREADING_LAYER), ask numba for a fork-safe layer -- TBB where the
# tbb package is installed (its library preloaded: a virtual environment keeps it off the loader's path), otherwise
# OpenMP off Linux or numba's own work queue. Numba's default would take GNU OpenMP on Linux, after which every
# fork()ed child that counts (a DataLoader worker, a multiprocessing pool) is killed. The work queue is not
# thread-safe: kgeval._engine.kernels serialises its calls.
_config: Any = numba.config  # its settings are set at import from the environment: not declared to type checkers
if "NUMBA_THREADING_LAYER" not in os.environ and _config.THREADING_LAYER == "default":
    _config.THREADING_LAYER = "forksafe"  # read when numba first starts its threads
if _config.THREADING_LAYER in ("forksafe", "tbb"):
    _preload_tbb()


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def count_rows(flat, starts, width, true_scores, greater, less, nans):  # pragma: no cover - runs compiled
    """For each task i, compare the ``width`` scores ``flat[starts[i] : starts[i] + width]`` with
    ``true_scores[i]`` and write how many lie above (``greater[i]``), below (``less[i]``) and are NaN
    (``nans[i]``), as int32 (a row holds fewer than 2**31 scores; int32 sums vectorise twice as wide as int64).
    Tasks run in parallel; each row is read once, in a loop the compiler vectorises."""
    for i in prange(true_scores.shape[0]):
        true = true_scores[i]
        row = flat[starts[i] : starts[i] + width]  # a contiguous slice: no per-element index checks
        above = np.int32(0)
        below = np.int32(0)
        nan = np.int32(0)
        for j in range(row.shape[0]):
            score = row[j]
            above += np.int32(score > true)
            below += np.int32(score < true)
            nan += np.int32(score != score)
        greater[i] = above
        less[i] = below
        nans[i] = nan
