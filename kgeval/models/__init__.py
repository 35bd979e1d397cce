"""Reference knowledge-graph-embedding models implementing the kgeval model protocol and the GEMM fast path.

kgeval evaluates any object with ``score_t`` / ``score_h`` (PyKEEN's signatures, see ``DESIGN.md``); the
models here are small, seeded implementations for demos, tests and benchmarks. Each is a query/candidate
decomposition (:mod:`kgeval.models.base`): its scores are a dot product (DistMult, ComplEx, RESCAL) or a
negative distance (TransE with L1 or L2, RotatE) between a query vector and an entity vector, which kgeval
evaluates through one GEMM per score tile (L1: ``torch.cdist`` per tile).
"""

from kgeval.models.base import QueryCandidateModule
from kgeval.models.bilinear import RESCAL, ComplEx, DistMult
from kgeval.models.translational import RotatE, TransE

__all__ = ["RESCAL", "ComplEx", "DistMult", "QueryCandidateModule", "RotatE", "TransE"]
