"""Evaluation scenarios: which triples to filter when evaluating which split, so test triples never leak.

The filtered setting (Bordes et al. 2013) removes every *known* triple other than the true answer from the
candidates, because ranking a true fact above the answer is not an error. What counts as known depends on what
the evaluation is for:

- **validation** (``"valid"``: early stopping, model selection, hyper-parameter optimisation): filter
  train + valid. Test triples must play no part in any decision taken during training; filtering with them
  would make the validation ranks, and so the selected model, depend on the test set.
- **final test** (``"test"``: the reported numbers, once, after every decision is taken): filter
  train + valid + test, as in Bordes et al. 2013 and every benchmark table since.

The evaluated triples are always part of the filter set (METRICS.md, Candidates); these helpers list them
explicitly all the same, so the scenario reads the same in code and in papers.

>>> import torch
>>> train, valid, test = torch.tensor([[0, 0, 1]]), torch.tensor([[1, 0, 2]]), torch.tensor([[2, 0, 0]])
>>> [t.tolist() for t in filter_triples_for("valid", train, valid, test)]
[[[0, 0, 1]], [[1, 0, 2]]]
>>> kwargs = evaluation_kwargs("test", train, valid, test)
>>> kwargs["mapped_triples"].tolist(), len(kwargs["additional_filter_triples"])
([[2, 0, 0]], 3)
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["SCENARIOS", "evaluation_kwargs", "filter_triples_for"]

Split = Literal["valid", "test"]

#: the splits whose triples are filtered when evaluating each split
SCENARIOS: dict[str, tuple[str, ...]] = {
    "valid": ("train", "valid"),
    "test": ("train", "valid", "test"),
}
#: accepted spellings of the split names
_SPLIT_SYNONYMS: dict[str, str] = {"valid": "valid", "validation": "valid", "val": "valid", "test": "test"}


def _split(split: str) -> str:
    key = split.lower() if isinstance(split, str) else split
    if key not in _SPLIT_SYNONYMS:
        raise ValueError(f"split must be one of {tuple(_SPLIT_SYNONYMS)}, got {split!r}")
    return _SPLIT_SYNONYMS[key]


def filter_triples_for(
    split: str, train: torch.Tensor, valid: torch.Tensor, test: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """The filter triples of the scenario that evaluates ``split`` (see the module docstring for the reasons).

    Parameters
    ----------
    split : {"valid", "test"}
        "valid" (also "validation", "val") for validation during training and HPO, "test" for the final report.
    train, valid : LongTensor of shape (m, 3)
    test : LongTensor of shape (m, 3), optional
        Needed for ``split="test"`` only; never used for validation.

    Returns
    -------
    list of LongTensor
        [train, valid] for validation; [train, valid, test] for the final test.
    """
    split = _split(split)
    if split == "test" and test is None:
        raise ValueError("the test scenario filters train + valid + test: pass the test triples")
    splits = {"train": train, "valid": valid, "test": test}
    return [splits[name] for name in SCENARIOS[split]]  # type: ignore[misc]


def evaluation_kwargs(
    split: str, train: torch.Tensor, valid: torch.Tensor, test: torch.Tensor | None = None
) -> dict[str, torch.Tensor | list[torch.Tensor]]:
    """Keyword arguments ``mapped_triples`` and ``additional_filter_triples`` of the scenario.

    Use as ``evaluator.evaluate(model, **evaluation_kwargs("valid", train, valid))`` or
    ``EarlyStopper(evaluator, model, **evaluation_kwargs("valid", train, valid))``.
    """
    filters = filter_triples_for(split, train, valid, test)
    evaluated = valid if _split(split) == "valid" else test
    return {"mapped_triples": evaluated, "additional_filter_triples": filters}  # type: ignore[dict-item]
