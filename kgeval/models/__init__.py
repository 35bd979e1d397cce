"""Reference models for demos, tests and benchmarks (DistMult, ComplEx, RESCAL, TransE, RotatE): small, seeded,
each a query/candidate decomposition (:mod:`kgeval.models.base`) that kgeval scores with one GEMM per tile.
"""

from kgeval.models.base import QueryCandidateModule
from kgeval.models.bilinear import RESCAL, ComplEx, DistMult
from kgeval.models.translational import RotatE, TransE

__all__ = ["RESCAL", "ComplEx", "DistMult", "QueryCandidateModule", "RotatE", "TransE"]
