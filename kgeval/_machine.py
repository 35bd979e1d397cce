"""What kgeval reads about the CPU it runs on: the size of its last-level cache, from which the eager kernel's chunk
is derived (kgeval._engine.kernels; also the blocks in which an inductive PyKEEN model's interaction is applied,
kgeval.adapters.pykeen), so that the chunk fits the machine that runs the evaluation rather than the one a constant
was measured on. A leaf module (the standard library only), outside the engine so that adapters may read it too.

Also, for the thread count of an evaluation (kgeval._engine.threads): the cores this process may use
(:func:`usable_cores`) and how many threads of other processes are runnable on them right now
(:func:`others_running`, from Linux's ``/proc/stat`` ``procs_running`` less this process's running threads).

The cache is read once per process from Linux's sysfs (``/sys/devices/system/cpu/cpu0/cache/index*/``: level, type,
size), else from ``os.sysconf`` (glibc's ``SC_LEVEL3_CACHE_SIZE`` / ``SC_LEVEL2_CACHE_SIZE``); unknown elsewhere,
and then the measured default is used. :func:`cpu_cache_report` says which, in words.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
from pathlib import Path

#: where Linux describes the caches of the first CPU
SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")

#: the eager kernel's chunk is this fraction of the last-level cache: the chunk of task rows and the passes over it
#: stay there (measured on an AMD EPYC with 32 MiB of L3, FB15k-237's 595M scores in chunks of 2**18 / 2**19 /
#: 2**20 / 2**21 / 2**23 float32: 0.25 / 0.20 / 0.19 / 0.16 / 0.27 s -- best at 8 MiB, a quarter of the cache)
EAGER_CHUNK_CACHE_FRACTION = 4
#: the chunk, in float32 elements, where the cache size is unknown (the measured best above), and its bounds
EAGER_CHUNK_DEFAULT = 2**21
EAGER_CHUNK_BOUNDS = (2**18, 2**23)


def parse_size(text: str) -> int | None:
    """Bytes from sysfs's size notation ("32768K", "1024K", "32M", "512"); None when unreadable."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None


def _sysfs_last_level(folder: Path) -> tuple[int, int] | None:
    """(level, bytes) of the highest data or unified cache described under ``folder``; None without one."""
    best: tuple[int, int] | None = None
    for index in sorted(folder.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size is not None and (best is None or level > best[0]):
            best = (level, size)
    return best


def _sysconf_last_level() -> tuple[int, int] | None:
    """(level, bytes) of the L3, else the L2, as glibc's sysconf reports them; None where it does not."""
    for level, name in ((3, "SC_LEVEL3_CACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE")):
        if name not in os.sysconf_names:
            continue
        try:
            size = os.sysconf(name)
        except (OSError, ValueError):
            continue
        if size > 0:
            return level, size
    return None


@functools.lru_cache(maxsize=1)
def last_level_cache() -> tuple[int, int, str] | None:
    """(level, bytes, source) of the CPU's last-level data cache, read once per process; None when unknown."""
    found = _sysfs_last_level(SYSFS_CACHES)
    if found is not None:
        return (*found, "sysfs")
    found = _sysconf_last_level()
    return (*found, "sysconf") if found is not None else None


def eager_chunk_elements(cache: tuple[int, int, str] | None) -> int:
    """Float32 scores the eager kernel codes at once: a :data:`EAGER_CHUNK_CACHE_FRACTION` of the last-level cache
    ``cache`` ((level, bytes, source) or None: :data:`EAGER_CHUNK_DEFAULT`), as a power of two within
    :data:`EAGER_CHUNK_BOUNDS`."""
    if cache is None:
        return EAGER_CHUNK_DEFAULT
    elements = cache[1] // EAGER_CHUNK_CACHE_FRACTION // 4
    low, high = EAGER_CHUNK_BOUNDS
    return min(high, max(low, 1 << max(0, elements.bit_length() - 1)))


def cpu_cache_report() -> str:
    """The last-level cache as the engine read it, and the eager chunk derived from it, in one line."""
    cache = last_level_cache()
    chunk = eager_chunk_elements(cache)
    if cache is None:
        return f"last-level cache unknown: eager chunk {chunk:,} scores (the default)"
    level, size, source = cache
    return f"L{level} cache {size // 2**10:,} KiB ({source}): eager chunk {chunk:,} scores"


#: where Linux reports the threads runnable right now (``procs_running``) and this process's threads
PROC_STAT = Path("/proc/stat")
PROC_SELF_TASKS = Path("/proc/self/task")
#: reads of :data:`PROC_STAT` whose median is taken, and the pause between two (the sample costs well under 1 ms)
LOAD_SAMPLES = 3
LOAD_SAMPLE_PAUSE_S = 0.0002


def usable_cores() -> int:
    """The cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count()`` where it does not exist)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def procs_running(stat: Path = PROC_STAT) -> int | None:
    """Threads runnable on the whole machine right now (Linux's ``procs_running``), None when unreadable."""
    try:
        for line in stat.read_text().splitlines():
            if line.startswith("procs_running "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def own_running_threads(tasks: Path = PROC_SELF_TASKS) -> int:
    """This process's threads runnable right now (state R in ``/proc/self/task/*/stat``; the calling thread is one,
    and so are PyTorch's OpenMP workers while they spin after a parallel region); 1 when unreadable."""
    running = 0
    try:
        for task in tasks.iterdir():
            try:
                text = (task / "stat").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            state = text[text.rfind(")") + 2 : text.rfind(")") + 3]  # the field after the (command name)
            running += state == "R"
    except OSError:
        return 1
    return max(1, running)


def others_running(samples: int = LOAD_SAMPLES, pause: float = LOAD_SAMPLE_PAUSE_S) -> float | None:
    """Threads of other processes runnable on this process's cores now: the median over ``samples`` reads of the
    machine's runnable threads less this process's, scaled by this process's share of the machine's cores; None
    where the kernel does not say (not Linux)."""
    counts = []
    for sample in range(samples):
        if sample:
            time.sleep(pause)
        total = procs_running()
        if total is None:
            return None
        counts.append(max(0, total - own_running_threads()))
    share = usable_cores() / max(usable_cores(), os.cpu_count() or 1)
    return statistics.median(counts) * share


def idle_cores(others: float | None, cores: int) -> int | None:
    """Of ``cores``, how many the ``others`` runnable threads of other processes leave idle (at least 1); None when
    ``others`` is unknown."""
    if others is None:
        return None
    return max(1, cores - math.ceil(others - 0.5))  # round half down: a half-busy core still counts as idle
