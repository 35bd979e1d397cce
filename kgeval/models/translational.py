"""Distance models: TransE (L1 or L2) and RotatE -- scores are negative distances between a query and an entity."""

from __future__ import annotations

import math

import torch
from torch import nn

from kgeval.models.base import QueryCandidateModule, as_complex, as_real, make_generator, xavier_uniform_
from kgeval.typing import Target

__all__ = [
    "RotatE",
    "TransE",
]


class TransE(QueryCandidateModule):
    """TransE (Bordes et al., 2013): score(h, r, t) = -||h + r - t||_p with p = 1 or 2.

    Parameters
    ----------
    num_entities, num_relations : int
    dim : int, default=64
    p : {1, 2}, default=2
        The norm.
    seed : int, default=None

    Attributes
    ----------
    entity_embeddings : nn.Embedding of shape (E, d)
    relation_embeddings : nn.Embedding of shape (R, d)

    Notes
    -----
    Fast path: tail query h + r, head query t - r, candidates the entity embeddings, similarity "l2" (kgeval
    ranks through one GEMM with the expansion ||q - e||^2 = ||q||^2 + ||e||^2 - 2 q.e) or "l1" (kgeval ranks
    through ``torch.cdist`` per tile).
    """

    def __init__(
        self, num_entities: int, num_relations: int, dim: int = 64, p: int = 2, seed: int | None = None
    ) -> None:
        super().__init__(num_entities, num_relations, dim)
        if isinstance(p, bool) or not isinstance(p, int) or p not in (1, 2):
            raise ValueError(f"p must be 1 or 2, got {p!r}")
        self.p = p
        self.kgeval_similarity = "l1" if p == 1 else "l2"
        self.entity_embeddings = nn.Embedding(num_entities, dim)
        self.relation_embeddings = nn.Embedding(num_relations, dim)
        self.reset_parameters(generator=make_generator(seed))

    def _query(self, first: torch.Tensor, second: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return self.entity_embeddings(first) + self.relation_embeddings(second)
        return self.entity_embeddings(second) - self.relation_embeddings(first)

    def _relation_query(self, heads: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        return self.entity_embeddings(tails) - self.entity_embeddings(heads)  # ||h + r - t|| = ||r - (t - h)||

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, p={self.p}"


class RotatE(QueryCandidateModule):
    """RotatE (Sun et al., 2019): score(h, r, t) = -||h ∘ r - t||_2, complex entities, unit-modulus relations.

    Parameters
    ----------
    num_entities, num_relations : int
    dim : int, default=32
        Complex dimension d; entities are stored as 2d interleaved (real, imaginary) reals.
    seed : int, default=None

    Attributes
    ----------
    entity_embeddings : nn.Embedding of shape (E, 2d)
    relation_phases : nn.Embedding of shape (R, d)
        r = exp(i · phase).

    Notes
    -----
    Fast path ("l2" on the real views): tail query h ∘ r, head query t ∘ conj(r), because ``|r_i| = 1`` gives
    ``||h ∘ r - t|| = ||h - t ∘ conj(r)||``. ``score_h`` uses the second form (as PyKEEN's RotatE does for head
    prediction), so it can differ from ``score_hrt`` in the last bits.
    """

    kgeval_similarity = "l2"

    def __init__(self, num_entities: int, num_relations: int, dim: int = 32, seed: int | None = None) -> None:
        super().__init__(num_entities, num_relations, dim)
        self.entity_embeddings = nn.Embedding(num_entities, 2 * dim)
        self.relation_phases = nn.Embedding(num_relations, dim)
        self.reset_parameters(generator=make_generator(seed))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Xavier-uniform entities, phases uniform in [-pi, pi)."""
        xavier_uniform_(self.entity_embeddings.weight, generator)
        with torch.no_grad():
            self.relation_phases.weight.uniform_(-math.pi, math.pi, generator=generator)

    def _rotations(self, relations: torch.Tensor) -> torch.Tensor:
        phases = self.relation_phases(relations)
        return torch.complex(torch.cos(phases), torch.sin(phases))

    def _query(self, first: torch.Tensor, second: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return as_real(as_complex(self.entity_embeddings(first)) * self._rotations(second))
        return as_real(as_complex(self.entity_embeddings(second)) * self._rotations(first).conj())
