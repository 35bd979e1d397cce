"""Files written whole or not at all (:func:`replace_atomically`): a resumable evaluation's progress, a many-graph
run's per-graph results, the early stopper's best weights."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["replace_atomically"]


def replace_atomically(
    path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *, sync: bool = False
) -> None:
    """Write ``path`` through ``write(handle)`` into a temporary file beside it (one per process and thread, so two
    writers of one path never share one), then rename it over ``path`` (``os.replace`` is atomic): a process killed
    or failing while writing leaves the previous file intact and no temporary file behind. ``sync``: flush the file
    to the disk before the rename (it then survives a crash of the machine too)."""
    target = Path(os.fspath(path))
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            write(handle)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
