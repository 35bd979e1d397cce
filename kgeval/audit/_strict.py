"""What the three audits' reports share: their documents as plain, strict JSON (a NaN is ``null``)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

__all__ = ["strict", "strict_document", "strict_json"]


def strict(value: Any) -> Any:
    """``value`` with every float NaN inside dicts, lists and tuples replaced by None (tuples become lists)."""
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {key: strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict(item) for item in value]
    return value


def strict_document(format_tag: str, report: Any) -> dict[str, Any]:
    """A report dataclass as plain values (NaN as None), led by its ``format`` tag."""
    return strict({"format": format_tag, **asdict(report)})


def strict_json(document: dict[str, Any], indent: int | None) -> str:
    """``document`` as strict JSON (a NaN left in it raises ``ValueError``)."""
    return json.dumps(document, indent=indent, allow_nan=False)
