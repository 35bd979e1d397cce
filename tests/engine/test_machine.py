"""kgeval._machine: the last-level cache read from sysfs-shaped folders and sysconf, and the eager kernel's
chunk derived from it -- on made-up machines, so that no test depends on the one that runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgeval import _machine as machine
from kgeval._engine import kernels


def fake_caches(folder: Path, caches: list[tuple[int, str, str]]) -> Path:
    """A sysfs-like cache folder: one index<i>/ per (level, type, size)."""
    for i, (level, kind, size) in enumerate(caches):
        index = folder / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    return folder


@pytest.mark.parametrize(("text", "expected"), [("32768K", 32 * 2**20), ("1024K", 2**20), ("32M", 32 * 2**20),
                                                ("512", 512), ("", None), ("0K", None), ("lots", None)])  # fmt: skip
def test_parse_size(text: str, expected: int | None) -> None:
    assert machine.parse_size(text) == expected


def test_the_highest_data_or_unified_cache_is_the_last_level(tmp_path: Path) -> None:
    epyc = fake_caches(tmp_path / "epyc", [(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"),
                                           (3, "Unified", "32768K")])  # fmt: skip
    assert machine._sysfs_last_level(epyc) == (3, 32 * 2**20)
    no_l3 = fake_caches(tmp_path / "small", [(1, "Data", "48K"), (2, "Unified", "2048K"), (3, "Instruction", "9M")])
    assert machine._sysfs_last_level(no_l3) == (2, 2 * 2**20)
    assert machine._sysfs_last_level(tmp_path / "none") is None
    broken = fake_caches(tmp_path / "broken", [(2, "Unified", "1024K")])
    (broken / "index0" / "level").write_text("two")
    assert machine._sysfs_last_level(broken) is None


def test_sysconf_is_the_fallback(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(machine, "SYSFS_CACHES", tmp_path / "absent")
    monkeypatch.setattr(machine.os, "sysconf_names", {"SC_LEVEL3_CACHE_SIZE": 1, "SC_LEVEL2_CACHE_SIZE": 2})
    monkeypatch.setattr(machine.os, "sysconf", lambda name: {"SC_LEVEL3_CACHE_SIZE": 0}.get(name, 2**21))
    machine.last_level_cache.cache_clear()
    try:
        assert machine.last_level_cache() == (2, 2**21, "sysconf")  # an L3 of 0 (unknown): the L2
        monkeypatch.setattr(machine.os, "sysconf_names", {})
        machine.last_level_cache.cache_clear()
        assert machine.last_level_cache() is None
        assert "unknown" in machine.cpu_cache_report()
    finally:
        machine.last_level_cache.cache_clear()


@pytest.mark.parametrize(
    ("cache", "expected"),
    [(None, machine.EAGER_CHUNK_DEFAULT),
     ((3, 32 * 2**20, "sysfs"), 2**21),  # the machine the default was measured on: the same chunk
     ((3, 30 * 2**20, "sysfs"), 2**20),  # 7.5 MiB of float32 elements: the power of two below
     ((3, 8 * 2**20, "sysfs"), 2**19),
     ((2, 2**20, "sysconf"), 2**18),  # bounded below
     ((3, 1536 * 2**20, "sysfs"), 2**23)],  # bounded above
)  # fmt: skip
def test_the_eager_chunk_is_a_quarter_of_the_last_level_cache(cache, expected: int) -> None:
    assert machine.eager_chunk_elements(cache) == expected


def test_the_kernel_uses_the_chunk_of_this_machine() -> None:
    assert machine.eager_chunk_elements(machine.last_level_cache()) == kernels.EAGER_CHUNK_ELEMENTS
    assert machine.EAGER_CHUNK_BOUNDS[0] <= kernels.EAGER_CHUNK_ELEMENTS <= machine.EAGER_CHUNK_BOUNDS[1]
