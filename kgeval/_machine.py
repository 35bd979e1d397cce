"""What kgeval reads about the CPU it runs on: the size of its last-level cache, from which the eager kernel's chunk
is derived (kgeval._engine.kernels; also the blocks in which an inductive PyKEEN model's interaction is applied,
kgeval.adapters.pykeen), so that the chunk fits the machine that runs the evaluation rather than the one a constant
was measured on. A leaf module (the standard library only), outside the engine so that adapters may read it too.

Read once per process from Linux's sysfs (``/sys/devices/system/cpu/cpu0/cache/index*/``: level, type, size),
else from ``os.sysconf`` (glibc's ``SC_LEVEL3_CACHE_SIZE`` / ``SC_LEVEL2_CACHE_SIZE``); unknown elsewhere, and then
the measured default is used. :func:`cpu_cache_report` says which, in words.
"""

from __future__ import annotations

import functools
import os
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
