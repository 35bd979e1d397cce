"""The spelling conventions of metric names, stated once: k-parameterised families end in ``_at_k`` and are
reported as ``_at_<k>``; and the close-match hint of error messages."""

from __future__ import annotations

import difflib
import re

__all__ = [
    "K_SUFFIX",
    "close_matches",
    "is_k_family",
    "split_k",
    "with_k",
]

#: the suffix of a k-parameterised family's name (``hits_at_k``)
K_SUFFIX = "_at_k"
_PER_K = re.compile(r"^(?P<family>[a-z_]+?)_at_(?P<k>[0-9]+)$")


def is_k_family(name: str) -> bool:
    """Whether ``name`` is a k-parameterised family (``hits_at_k``)."""
    return name.endswith(K_SUFFIX)


def with_k(family: str, k: int | None) -> str:
    """The reported key of a family for one k (``hits_at_k``, 10 -> ``hits_at_10``); other names unchanged."""
    return family.removesuffix(K_SUFFIX) + f"_at_{k}" if is_k_family(family) else family


def split_k(name: str) -> tuple[str, int | None]:
    """A per-k key split into its family and k (``hits_at_10`` -> ``hits_at_k``, 10); other names with None."""
    match = _PER_K.match(name)
    if match is None:
        return name, None
    return match.group("family") + K_SUFFIX, int(match.group("k"))


def close_matches(word: str, candidates: list[str], n: int = 5) -> list[str]:
    """The candidates closest to ``word`` (difflib ratio >= 0.5), best first, for error messages."""
    return difflib.get_close_matches(word, candidates, n=n, cutoff=0.5)
