"""The private engine: the loop that ranks one side's tasks (:func:`rank_side`) and its stages -- plan, sizes,
scoring, filter index, pairs, counting, kernels -- plus distributed sharding and synchronisation. Only the entry
points (:mod:`kgeval.evaluator`, :mod:`kgeval.predict`) drive it, through the names below; nothing here is public
API (docs/design.md).
"""

from kgeval._engine.counting import SideCounts, slice_bounds
from kgeval._engine.distributed import CollectiveCheck, fingerprint, resolve_group, shard, synchronize
from kgeval._engine.filter_index import FilterIndex, SideIndex, pack_pairs
from kgeval._engine.form_check import PROBE_QUERIES, FormChecks
from kgeval._engine.gemm_scoring import query_candidate_form
from kgeval._engine.kernel_choice import KernelChoice, KernelChooser
from kgeval._engine.loop import EngineState, SideTasks, rank_side
from kgeval._engine.precision import MATMUL_PRECISIONS, MatmulPrecision, exact_matmul
from kgeval._engine.resume import EvaluationProgress, model_fingerprint, rank_file
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import SCORE_METHOD, CandidateScorer, candidate_positions, model_device
from kgeval._engine.sharding import CandidateShard, ShardedSide, declared_shard, declares_shard, gather_shards
from kgeval._engine.sizes import choose_sizes
from kgeval._engine.triple_scoring import score_triple_block, triple_function

__all__ = [
    "MATMUL_PRECISIONS",
    "PROBE_QUERIES",
    "SCORE_METHOD",
    "CandidateScorer",
    "CandidateShard",
    "CollectiveCheck",
    "EngineState",
    "EvaluationProgress",
    "FilterIndex",
    "FormChecks",
    "KernelChoice",
    "KernelChooser",
    "MatmulPrecision",
    "ShardedSide",
    "SideCounts",
    "SideIndex",
    "SideTasks",
    "candidate_positions",
    "choose_sizes",
    "declared_shard",
    "declares_shard",
    "exact_matmul",
    "fingerprint",
    "gather_shards",
    "make_scorer",
    "model_device",
    "model_fingerprint",
    "pack_pairs",
    "query_candidate_form",
    "rank_file",
    "rank_side",
    "resolve_group",
    "score_triple_block",
    "shard",
    "slice_bounds",
    "synchronize",
    "triple_function",
]
