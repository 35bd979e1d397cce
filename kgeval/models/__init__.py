"""Reference models for demos, tests and benchmarks (DistMult, ComplEx, RESCAL, TransE, RotatE): small, seeded,
each a query/candidate decomposition (:mod:`kgeval.models.base`) that kgeval scores with one GEMM per tile; two
temporal ones (:mod:`kgeval.models.temporal`): TNTComplEx and the recurrency baseline; and an inductive baseline
(:mod:`kgeval.models.inductive`): RelationContextDistMult; and a graph-conditioned one without parameters
(:mod:`kgeval.models.graph_baseline`): NeighbourhoodBaseline.
"""

from kgeval.models.base import QueryCandidateModule
from kgeval.models.bilinear import RESCAL, ComplEx, DistMult
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from kgeval.models.inductive import RelationContextDistMult
from kgeval.models.temporal import RecurrencyBaseline, TNTComplEx
from kgeval.models.translational import RotatE, TransE

__all__ = [
    "RESCAL",
    "ComplEx",
    "DistMult",
    "NeighbourhoodBaseline",
    "QueryCandidateModule",
    "RecurrencyBaseline",
    "RelationContextDistMult",
    "RotatE",
    "TNTComplEx",
    "TransE",
]
