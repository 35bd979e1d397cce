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
    (``nans[i]``), as int32 (a row holds fewer than 2**31 scores). Tasks run in parallel; each row is read once,
    in a loop the compiler vectorises (:func:`compare_row`)."""
    for i in prange(true_scores.shape[0]):
        row = flat[starts[i] : starts[i] + width]  # a contiguous slice: no per-element index checks
        greater[i], less[i], nans[i] = compare_row(row, true_scores[i])


# The counting loops below keep every sum in 32 bits by writing it as ``total = np.int32(total + flag)``: numba
# types ``total += np.int32(flag)`` as a 64-bit add, and the compiler then widens each compare's lanes to 64 bits
# (AVX-512: a compare into a mask register, vpmovm2q back to a vector, a 64-bit subtract; AVX2: vpmovsxdq and a
# 64-bit add), half the scores per instruction. tests/engine/test_numba_kernel.py reads the loops' machine code for
# that widening. Each loop runs over one row or block (fewer than 2**31 scores), so 32 bits cannot overflow.


@njit(inline="always")
def compare_row(row, true):  # pragma: no cover - runs compiled
    """(#scores above ``true``, #below, #NaN) of a 1-d array, as int32: one vectorised pass."""
    above = np.int32(0)
    below = np.int32(0)
    nan = np.int32(0)
    for j in range(row.shape[0]):
        score = row[j]
        above = np.int32(above + (score > true))
        below = np.int32(below + (score < true))
        nan = np.int32(nan + (score != score))
    return above, below, nan


@njit(inline="always")
def outside_band(scores, low, high):  # pragma: no cover - runs compiled
    """(#scores above ``high``, #scores below ``low``) of a 1-d array, as int32: one vectorised pass."""
    above = np.int32(0)
    below = np.int32(0)
    for j in range(scores.shape[0]):
        score = scores[j]
        above = np.int32(above + (score > high))
        below = np.int32(below + (score < low))
    return above, below


@njit(inline="always")
def _inside_band(scores, low, high):  # pragma: no cover - runs compiled
    """(the first, the last) index of a score of a 1-d array inside [low, high] or NaN, as int32 (len(scores) and
    -1 when there is none): one vectorised pass."""
    first_inside = np.int32(scores.shape[0])
    last_inside = np.int32(-1)
    for j in range(scores.shape[0]):
        score = scores[j]
        in_band = not (score > high or score < low)
        first_inside = min(first_inside, np.int32(j) if in_band else np.int32(scores.shape[0]))
        last_inside = max(last_inside, np.int32(j) if in_band else np.int32(-1))
    return first_inside, last_inside


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def count_blocks_in_bands(  # pragma: no cover - runs compiled
    buffer, block_offsets, block_firsts, block_widths, tasks, task_rows, low, high, true_columns, positions,
    run_ends, gathers, cursors, pair_values, counts, kept_values, kept, true_values, threads,
):  # fmt: skip
    """Count some GEMM blocks while they are in cache, for the tasks ``tasks``, against each task's band [low,
    high] that should hold its true score (:func:`resolve_bands` checks that it does). Block b is a C-contiguous
    (rows, ``block_widths[b]``) array at ``buffer[block_offsets[b]:]`` holding candidate columns ``block_firsts[b]``
    onwards; the blocks are in increasing column order. ``threads``: how many threads share the tasks.

    Per task i (its row ``task_rows[i]`` of every block): scores above ``high[i]`` lie above the true score, scores
    below ``low[i]`` below it; they are added to ``counts[i, 0]`` / ``counts[i, 1]``. Scores inside the band (or
    NaN) are kept in ``kept_values[i]`` (up to its capacity; ``kept[i]`` counts them all) for the exact comparison
    once the true score is known. The true score is read where ``true_columns[i]`` falls. Where ``gathers[i]``, the
    scores of the task's filtered positions inside the blocks (its sorted run ``positions[cursors[i] :
    run_ends[i]]``) are copied into ``pair_values`` and the cursor moves past them (tasks sharing a run and a query
    row -- a query group -- gather it once)."""
    capacity = kept_values.shape[1]
    num_tasks = tasks.shape[0]
    chunks = max(1, min(num_tasks, threads))
    for chunk in prange(chunks):
        for k in range(chunk * num_tasks // chunks, (chunk + 1) * num_tasks // chunks):
            i = tasks[k]
            low_i = low[i]
            high_i = high[i]
            above = 0
            below = 0
            n = kept[i]
            p = cursors[i]
            end = run_ends[i] if gathers[i] else p
            for b in range(block_offsets.shape[0]):
                width = block_widths[b]
                first = block_firsts[b]
                row = buffer[block_offsets[b] + task_rows[i] * width : block_offsets[b] + (task_rows[i] + 1) * width]
                block_above, block_below = outside_band(row, low_i, high_i)
                above += block_above
                below += block_below
                num_inside = width - block_above - block_below
                if num_inside > 0:  # in 1-2 blocks of a task's row, mostly: find them
                    # (names differ from the inlined functions' locals: numba's inlining inside prange can mix them)
                    first_kept, last_kept = _inside_band(row, low_i, high_i)
                    if num_inside <= 2:  # nearly always: the first and the last are the ones
                        if n < capacity:
                            kept_values[i, n] = row[first_kept]
                        if num_inside == 2 and n + 1 < capacity:
                            kept_values[i, n + 1] = row[last_kept]
                        n += num_inside
                    else:
                        for j in range(first_kept, last_kept + 1):
                            value = row[j]
                            if not (value > high_i or value < low_i):
                                if n < capacity:
                                    kept_values[i, n] = value
                                n += 1
                column = true_columns[i] - first
                if 0 <= column < width:
                    true_values[i] = row[column]
                while p < end and positions[p] < first + width:
                    pair_values[p] = row[positions[p] - first]
                    p += 1
            kept[i] = n
            cursors[i] = p
            counts[i, 0] += above
            counts[i, 1] += below


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def resolve_bands(  # pragma: no cover - runs compiled
    low, high, true_values, kept_values, kept, run_starts, run_ends, pair_values, in_fine, counts, failed
):  # fmt: skip
    """After every block of :func:`count_blocks_in_bands`: add each task's kept scores to its counts (columns 0 / 1:
    above / below its true score) by comparing them with it, and count its filtered pairs' scores (its run
    ``pair_values[run_starts[i] : run_ends[i]]``) above / below it in columns 2 / 3, those with ``in_fine`` in 4 / 5.
    A task fails (``failed[i]``) when its true score lies outside its band or is NaN, or a kept score is NaN, or
    more scores fell inside the band than were kept: its counts are then incomplete, and the caller counts it
    another way."""
    capacity = kept_values.shape[1]
    for i in prange(true_values.shape[0]):
        true = true_values[i]
        n = kept[i]
        if n > capacity or not (low[i] <= true <= high[i]):  # NaN compares False
            failed[i] = True
            continue
        for m in range(n):
            value = kept_values[i, m]
            if value > true:
                counts[i, 0] += 1
            elif value < true:
                counts[i, 1] += 1
            elif value != value:
                failed[i] = True
        above = 0
        below = 0
        fine_above = 0
        fine_below = 0
        for p in range(run_starts[i], run_ends[i]):
            value = pair_values[p]
            is_above = value > true
            is_below = value < true
            above += is_above
            below += is_below
            fine_above += is_above & in_fine[p]
            fine_below += is_below & in_fine[p]
        counts[i, 2] += above
        counts[i, 3] += below
        counts[i, 4] += fine_above
        counts[i, 5] += fine_below
