"""Optional integrations: give models of other libraries kgeval's query/candidate fast path.

:func:`adapt` returns an object with ``kgeval_similarity`` / ``kgeval_query`` / ``kgeval_candidates`` for a model
it recognises, or None. Each integration imports its library only when the model comes from it, so kgeval never
depends on those libraries.
"""

from __future__ import annotations

import sys
from typing import Any


def adapt(model: Any) -> Any | None:
    """A query/candidate adapter for ``model``, or None when no integration recognises it."""
    if "pykeen" in sys.modules and type(model).__module__.startswith("pykeen"):
        from kgeval.integrations.pykeen import adapt_pykeen_model

        return adapt_pykeen_model(model)
    return None
