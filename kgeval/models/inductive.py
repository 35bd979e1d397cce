"""An inductive baseline: entities represented from the relations around them, so it scores entities it never saw
(:class:`RelationContextDistMult`; kgeval's inductive protocol, :mod:`kgeval.adapters.inductive`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from kgeval.models.base import make_generator, xavier_uniform_
from kgeval.typing import INDUCTIVE_MODES, Target

__all__ = ["RelationContextDistMult"]


class RelationContextDistMult(nn.Module):
    """DistMult whose entity vectors are computed from each entity's edges in the graph of a mode: the mean of a
    learned vector per (relation, direction) over the entity's outgoing and incoming edges. An entity is what its
    relations say it is, so the model scores the entities of an inference graph it never trained on (NodePiece
    with relation tokens only, Galkin et al. 2022); entities with the same relation profile tie.

    score(h, r, t) = sum(e_h * w_r * e_t), e_x = mean over the edges (x, r', ·) of out_r' and (·, r', x) of in_r'
    (a zero vector for an entity without edges).

    Parameters
    ----------
    graphs : mapping of mode to LongTensor (n, 3)
        The edges of each mode's graph in that graph's entity ids (``"training"``: the training graph;
        ``"validation"`` / ``"testing"``: the inference graph); :meth:`for_dataset` builds it from an
        :class:`kgeval.datasets.InductiveDataset`.
    num_entities : mapping of mode to int
        The entities of each mode's graph.
    num_relations : int
    dim : int, default=64
    seed : int, optional
        Seeds the initialisation.

    Notes
    -----
    kgeval's inductive protocol: ``kgeval_num_entities(mode)``, ``score_t`` / ``score_h(..., mode=)`` and the
    query/candidate form with a mode (the GEMM fast path; the entity vectors of the mode computed once per
    ``kgeval_candidates`` call). Its methods default to ``mode="training"`` and ``num_entities`` is the training
    graph's, so :func:`kgeval.models.training.train_model` trains it on the training graph as it is.
    """

    kgeval_similarity = "dot"

    def __init__(self, graphs: Mapping[str, torch.Tensor], num_entities: Mapping[str, int], num_relations: int,
                 dim: int = 64, seed: int | None = None) -> None:  # fmt: skip
        super().__init__()
        if "training" not in graphs:
            raise ValueError("graphs needs the training graph (mode 'training')")
        self.counts: dict[str, int] = {}
        for mode, triples in graphs.items():
            if mode not in INDUCTIVE_MODES:
                raise ValueError(f"graph modes must be among {INDUCTIVE_MODES}, got {mode!r}")
            count = int(num_entities[mode])
            if triples.dim() != 2 or triples.shape[1] != 3 or len(triples) == 0:
                raise ValueError(f"the {mode} graph must be a non-empty (n, 3) LongTensor, got {tuple(triples.shape)}")
            if int(triples[:, [0, 2]].max()) >= count or int(triples[:, 1].max()) >= num_relations:
                raise ValueError(f"the {mode} graph has ids beyond its {count} entities / {num_relations} relations")
            self.counts[mode] = count
            self.register_buffer(f"{mode}_profile", _relation_profile(triples, count, num_relations), persistent=False)
        self.num_entities = self.counts["training"]
        self.num_relations = num_relations
        self.dim = dim
        generator = make_generator(seed)
        self.relation_weights = nn.Parameter(torch.empty(num_relations, dim))
        self.outgoing = nn.Parameter(torch.empty(num_relations, dim))
        self.incoming = nn.Parameter(torch.empty(num_relations, dim))
        for weight in (self.relation_weights, self.outgoing, self.incoming):
            xavier_uniform_(weight, generator)

    @classmethod
    def for_dataset(cls, dataset: Any, dim: int = 64, seed: int | None = None) -> RelationContextDistMult:
        """The model of an :class:`kgeval.datasets.InductiveDataset`: the training graph for ``"training"``, the
        inference graph for ``"validation"`` and ``"testing"``."""
        if hasattr(dataset, "inference_relation_to_id"):
            raise TypeError(f"{cls.__name__} learns a vector per relation of the training graph: it cannot score the "
                            f"relations of a fully inductive dataset's inference graph ({dataset.name!r}); a "
                            "graph-conditioned model can (kgeval.adapters.graph.on_graphs(NeighbourhoodBaseline(), "
                            "data))")  # fmt: skip
        graphs = {"training": dataset.train, "validation": dataset.inference, "testing": dataset.inference}
        counts = {"training": dataset.num_training_entities, "validation": dataset.num_inference_entities,
                  "testing": dataset.num_inference_entities}  # fmt: skip
        return cls(graphs, counts, dataset.num_relations, dim=dim, seed=seed)

    def kgeval_num_entities(self, mode: str) -> int:
        """The entities of the mode's graph."""
        if mode not in self.counts:
            raise ValueError(f"{type(self).__name__} has no graph for mode {mode!r} (it has {sorted(self.counts)})")
        return self.counts[mode]

    def entity_vectors(self, mode: str = "training", ids: torch.Tensor | None = None) -> torch.Tensor:
        """(E, dim), or ``(*ids.shape, dim)``: each entity of the mode's graph (those of ``ids``) as the mean of its
        edges' (relation, direction) vectors -- its relation profile (2R) times the stacked outgoing and incoming
        vectors (2R, dim)."""
        self.kgeval_num_entities(mode)
        profile: torch.Tensor = getattr(self, f"{mode}_profile")
        rows = profile if ids is None else profile[ids]
        return rows.to(self.outgoing.dtype) @ torch.cat([self.outgoing, self.incoming])

    def kgeval_query(self, batch: torch.Tensor, target: Target, *, mode: str = "training") -> torch.Tensor:
        """(B, dim) queries: e_h * w_r of (h, r) rows (target "tail"), w_r * e_t of (r, t) rows ("head")."""
        entities = self.entity_vectors(mode)
        if target == "tail":
            return entities[batch[:, 0]] * self.relation_weights[batch[:, 1]]
        return self.relation_weights[batch[:, 0]] * entities[batch[:, 1]]

    def kgeval_candidates(self, target: Target, *, mode: str = "training") -> torch.Tensor:
        """(E, dim) entity vectors of the mode's graph."""
        return self.entity_vectors(mode)

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None,
                mode: str = "training") -> torch.Tensor:  # fmt: skip
        """(B, ``|tails|``) scores of (h, r, e) for the mode's entities e."""
        return self._scores(hr_batch, "tail", tails, mode)

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None,
                mode: str = "training") -> torch.Tensor:  # fmt: skip
        """(B, ``|heads|``) scores of (e, r, t) for the mode's entities e."""
        return self._scores(rt_batch, "head", heads, mode)

    def _scores(self, batch: torch.Tensor, target: Target, ids: torch.Tensor | None, mode: str) -> torch.Tensor:
        entities = self.entity_vectors(mode)
        if target == "tail":
            query = entities[batch[:, 0]] * self.relation_weights[batch[:, 1]]
        else:
            query = self.relation_weights[batch[:, 0]] * entities[batch[:, 1]]
        return query @ (entities if ids is None else entities[ids]).T

    def score_hrt(self, hrt_batch: torch.Tensor, *, mode: str = "training") -> torch.Tensor:
        """(n,) scores of whole triples of the mode's graph."""
        entities = self.entity_vectors(mode)  # every row once: cheaper than the rows of a batch with negatives
        return (entities[hrt_batch[:, 0]] * self.relation_weights[hrt_batch[:, 1]] * entities[hrt_batch[:, 2]]).sum(-1)


def _relation_profile(graph: torch.Tensor, num_entities: int, num_relations: int) -> torch.Tensor:
    """(E, 2R) float32: row x holds, for each relation r, the share of x's edges that are (x, r, ·) (column r) and
    (·, r, x) (column R + r); a row of zeros for an entity without edges."""
    graph = graph.detach().to(torch.long).cpu()
    heads, relations, tails = graph[:, 0], graph[:, 1], graph[:, 2]
    counts = torch.zeros(num_entities * 2 * num_relations, dtype=torch.float64, device="cpu")
    ones = torch.ones(len(graph), dtype=torch.float64, device="cpu")
    counts.index_add_(0, heads * 2 * num_relations + relations, ones)
    counts.index_add_(0, tails * 2 * num_relations + num_relations + relations, ones)
    profile = counts.reshape(num_entities, 2 * num_relations)
    return (profile / profile.sum(dim=1, keepdim=True).clamp(min=1)).to(torch.float32)
