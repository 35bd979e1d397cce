"""Evaluation scenarios: which known triples to filter when evaluating which split, so that test triples never
take part in a decision made during training (:func:`filter_triples_for`).
"""

from __future__ import annotations

import torch

__all__ = ["SCENARIOS", "evaluation_kwargs", "filter_triples_for"]

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
    """The filter triples of the scenario that evaluates ``split`` (see Notes for the reasons).

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

    Notes
    -----
    The filtered setting (Bordes et al. 2013) removes every known triple other than the true answer from the
    candidates. Validation (``"valid"``: early stopping, model selection, hyper-parameter search) filters
    train + valid: filtering with test triples would make the selected model depend on the test set. The final test
    (``"test"``, once, after every decision) filters train + valid + test, as every benchmark table does. The evaluated
    triples are always filtered (METRICS.md, Candidates); they are listed explicitly all the same.

    Examples
    --------
    >>> import torch
    >>> train, valid, test = torch.tensor([[0, 0, 1]]), torch.tensor([[1, 0, 2]]), torch.tensor([[2, 0, 0]])
    >>> [t.tolist() for t in filter_triples_for("valid", train, valid, test)]
    [[[0, 0, 1]], [[1, 0, 2]]]
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
