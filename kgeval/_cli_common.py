"""What the command line's evaluations of triples, temporal and inductive data share: the version and protocol
written into ``--json`` documents, and the refusal of options a kind of data does not honour (never ignored)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RANK_TYPE_RULES", "count_of", "json_header", "refuse_options", "version"]

#: how each rank type counts, as every ``--json`` document states it
RANK_TYPE_RULES = {"optimistic": "1 + #(score > true)", "pessimistic": "1 + #(score >= true)",
                   "realistic": "(optimistic + pessimistic) / 2"}  # fmt: skip


def count_of(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is 1 ("1 epoch", "0 epochs", "10 epochs")."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def version() -> str:
    """The installed kgeval version (read without importing the package, so --help and --version stay fast)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("kgeval")
    except PackageNotFoundError:  # a source checkout that is not installed
        return "(not installed)"


def json_header(source: Mapping[str, Any], setting: Any, ks: Sequence[int]) -> dict[str, Any]:
    """The keys every ``kgeval evaluate --json`` document starts with: ``kgeval_version``, ``source`` and
    ``protocol`` (the filter setting or settings, the rank types' rules, the ks)."""
    protocol = {"setting": setting, "rank_types": dict(RANK_TYPE_RULES), "ks": list(ks)}
    return {"kgeval_version": version(), "source": dict(source), "protocol": protocol}


def refuse_options(args: argparse.Namespace, kind: str, options: Mapping[str, Any]) -> None:
    """ValueError naming the first option of ``options`` (its attribute name -> its default) that ``args`` sets
    otherwise: an option the evaluation of ``kind`` data does not honour is refused, never silently ignored."""
    for name, default in options.items():
        value = getattr(args, name, default)
        if value != default and not (isinstance(default, list) and list(value) == default):
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{flag} is not available for {kind} data yet ({kind} evaluations report their own "
                             "table; --json holds every metric)")  # fmt: skip
