"""The graph a graph-conditioned model reasons over (:class:`Graph`): the edges of one mode's graph as tensors --
``edge_index`` / ``edge_type`` as PyTorch Geometric, ULTRA and NBFNet take them --, its node and relation counts,
and, where a dataset knows them, its labels and the training graph's id of each of its relations.

kgeval hands a :class:`Graph` to a graph-conditioned model's ``score_t(hr_batch, *, graph)`` /
``score_h(rt_batch, *, graph)`` (:mod:`kgeval.adapters.graph`), in the ids of the evaluated triples, so a model of
any graph needs no id translation written by its user.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

__all__ = ["Graph"]


@dataclass(frozen=True, eq=False)
class Graph:
    """One graph: its triples in its own ids, and its vocabularies.

    Attributes
    ----------
    triples : LongTensor of shape (E, 3)
        ``(head, relation, tail)`` ids; heads and tails in ``[0, num_nodes)``, relations in ``[0, num_relations)``.
    num_nodes : int
        The graph's entities (every one a candidate of its queries, edges or not).
    num_relations : int
        The graph's relations (with :meth:`with_inverse_edges`: twice the original count).
    entity_labels, relation_labels : tuple of str, optional
        Id -> label, where a dataset gives them.
    relation_to_training : LongTensor of shape (num_relations,), optional
        The training graph's id of each relation with the same label, -1 for a relation the training graph lacks
        (a fully inductive graph's new relations).
    name : str
        E.g. ``"InGram-NL-25 inference graph"``.
    """

    triples: torch.Tensor = field(repr=False)
    num_nodes: int
    num_relations: int
    entity_labels: tuple[str, ...] | None = field(default=None, repr=False)
    relation_labels: tuple[str, ...] | None = field(default=None, repr=False)
    relation_to_training: torch.Tensor | None = field(default=None, repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        triples = self.triples
        if not isinstance(triples, torch.Tensor) or triples.dim() != 2 or triples.shape[1] != 3:
            raise ValueError(f"a graph's triples must be an (E, 3) tensor, got {getattr(triples, 'shape', triples)!r}")
        if triples.dtype != torch.long:
            raise TypeError(f"a graph's triples must have dtype torch.int64, got {triples.dtype}")
        if self.num_nodes < 1 or self.num_relations < 1:
            raise ValueError(f"a graph needs nodes and relations, got {self.num_nodes} and {self.num_relations}")
        if len(triples) and (
            int(triples[:, [0, 2]].min()) < 0
            or int(triples[:, [0, 2]].max()) >= self.num_nodes
            or int(triples[:, 1].min()) < 0
            or int(triples[:, 1].max()) >= self.num_relations
        ):
            raise ValueError(f"graph {self.name!r}: triples with ids outside its {self.num_nodes} nodes / "
                             f"{self.num_relations} relations")  # fmt: skip

    @property
    def edge_index(self) -> torch.Tensor:
        """(2, E) LongTensor: heads, then tails (PyTorch Geometric's layout)."""
        return self.triples[:, [0, 2]].T

    @property
    def edge_type(self) -> torch.Tensor:
        """(E,) LongTensor: each edge's relation."""
        return self.triples[:, 1]

    @property
    def device(self) -> torch.device:
        return self.triples.device

    def with_inverse_edges(self) -> Graph:
        """The graph with an inverse edge ``(t, r + R, h)`` after its edges, R = ``num_relations`` (ULTRA's and
        NBFNet's convention): 2E edges, 2R relations. Labels of an inverse relation: ``"<label>^-1"``."""
        inverse = self.triples[:, [2, 1, 0]] + torch.tensor([0, self.num_relations, 0], device=self.device)
        labels = None if self.relation_labels is None else (
            *self.relation_labels, *(f"{label}^-1" for label in self.relation_labels))  # fmt: skip
        to_training = None
        if self.relation_to_training is not None:
            to_training = torch.cat([self.relation_to_training, self.relation_to_training])
        return replace(self, triples=torch.cat([self.triples, inverse]), num_relations=2 * self.num_relations,
                       relation_labels=labels, relation_to_training=to_training)  # fmt: skip

    def to(self, device: torch.device | str) -> Graph:
        """The graph with its tensors on ``device`` (itself when they are there already)."""
        device = torch.device(device)
        if self.triples.device == device:
            return self
        to_training = None if self.relation_to_training is None else self.relation_to_training.to(device)
        return replace(self, triples=self.triples.to(device), relation_to_training=to_training)
