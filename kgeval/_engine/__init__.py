"""The private engine. Its front doors are all that the entry points use (docs/design.md):

- :func:`rank` (:mod:`kgeval._engine.front`): rank every side of an evaluation -- the evaluator's door, with
  :class:`RankOptions`, :class:`RunSettings`, :class:`SideRanks`, :func:`new_state` and :func:`together` (a step
  between two calls that every rank of a distributed evaluation fails together), and :func:`model_signature` (what
  a model scores, by which resumed and combined results identify it);
- :func:`top_k` (:mod:`kgeval._engine.predictions`): filtered top-k predictions, with :class:`TopKOptions`;
- :func:`visit_tiles` (:mod:`kgeval._engine.tiles`): every score tile of a set of queries handed to visitors, each
  locating the known answers of given indices (:class:`TileJob`, :class:`ScoreTile`) -- the all-pairs classification;
- :func:`candidate_scorer`, :class:`FilterIndex`, :func:`pack_pairs`, :func:`exact_arithmetic`: the pieces the sampled
  evaluator ranks its negatives with;
- :class:`MeasuredBatch`: the batch (and slice) size derived from the measured memory of a model scored through its
  own methods, as the evaluator reports it.

Nothing here is public API.
"""

from kgeval._engine.filter_index import FilterIndex, pack_pairs
from kgeval._engine.front import RankOptions, RunSettings, SideRanks, model_signature, new_state, rank, together
from kgeval._engine.own_candidates import candidate_scorer
from kgeval._engine.precision import exact_arithmetic
from kgeval._engine.predictions import TopKOptions, top_k
from kgeval._engine.sizes import MeasuredBatch
from kgeval._engine.tiles import ScoreTile, TileJob, visit_tiles

__all__ = [
    "FilterIndex",
    "MeasuredBatch",
    "RankOptions",
    "RunSettings",
    "ScoreTile",
    "SideRanks",
    "TileJob",
    "TopKOptions",
    "candidate_scorer",
    "exact_arithmetic",
    "model_signature",
    "new_state",
    "pack_pairs",
    "rank",
    "together",
    "top_k",
    "visit_tiles",
]
