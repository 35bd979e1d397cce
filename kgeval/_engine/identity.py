"""A model identified by what it scores (:func:`score_signature`): its own scores of a fixed probe, summarised in a
:class:`kgeval._fingerprints.ScoreSignature`. The front compares signatures where it reuses or combines results
across calls and ranks (a resumed progress file, the ranks of a distributed evaluation); the evaluator hands them to
``evaluate_many``'s result files. The caller holds the model as an evaluation does (eval mode, inference mode, the
exact arithmetic): the probe's scores are the evaluation's.
"""

from __future__ import annotations

import torch

from kgeval._engine.scorer_choice import make_scorer
from kgeval._fingerprints import SIGNATURE_CANDIDATES, ScoreSignature
from kgeval._inputs import CheckedInputs
from kgeval._tasks import QUERY_COLUMNS

__all__ = ["SIGNATURE_QUERIES", "score_signature"]

#: queries of each side the probe scores: the first of the evaluated triples
SIGNATURE_QUERIES = 2


def score_signature(inputs: CheckedInputs) -> ScoreSignature | None:
    """The signature of the model's own scores (its methods, its whole-triple scoring or ``score_fn``; never a fast
    path) of the first :data:`SIGNATURE_QUERIES` evaluated triples' queries, every side of ``inputs.targets``,
    against the evaluation's candidates (all of them, or the first and the last :data:`SIGNATURE_CANDIDATES` / 2).
    None for a model whose candidate table is sharded across ranks (each rank scores its own shard by design)."""
    if inputs.model.declares_shard:
        return None
    triples = inputs.triples[inputs.task_index[:SIGNATURE_QUERIES]]
    rows = []
    for target in inputs.targets:
        relation = target == "relation"
        id_space = inputs.num_relations if relation else inputs.num_entities
        assert id_space is not None  # relations are ranked only for a model that counts them (kgeval._inputs)
        candidate_ids = None if relation else inputs.candidate_ids
        scorer = make_scorer(inputs.model, target, id_space, candidate_ids, fast_path=False, score_fn=inputs.score_fn)
        scorer.use_device(triples.device)
        queries = triples[:, QUERY_COLUMNS[target]]
        scorer.begin(queries)
        tiles = []
        for start, stop in _windows(scorer.num_candidates, inputs.sizes.slice_size):
            scorer.start_slice(start, stop)
            tiles.append(scorer.query_tile(0, queries.shape[0]).detach().clone())
        rows.append((target, torch.cat(tiles, dim=1)))
    return ScoreSignature.of_scores(rows)


def _windows(size: int, slice_size: int | None = None) -> list[tuple[int, int]]:
    """The candidate positions the probe reads, in slices of at most ``slice_size`` (the caller's; None: whole):
    all of them, or the first and the last half of :data:`SIGNATURE_CANDIDATES`."""
    if size <= SIGNATURE_CANDIDATES:
        spans = [(0, size)]
    else:
        half = SIGNATURE_CANDIDATES // 2
        spans = [(0, half), (size - half, size)]
    step = slice_size or SIGNATURE_CANDIDATES
    return [(begin, min(begin + step, stop)) for start, stop in spans for begin in range(start, stop, step)]
