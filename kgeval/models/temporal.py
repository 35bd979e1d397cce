"""Reference temporal models: :class:`TNTComplEx` (trainable, with the query/candidate fast path) and
:class:`RecurrencyBaseline` (no training: the strict baseline a forecasting result must beat).

Both follow kgeval's temporal protocol (:mod:`kgeval.variants.temporal`): ``score_t`` takes (B, 3) rows (h, r, τ) and
``score_h`` (B, 3) rows (r, t, τ), each returning (B, num_entities) scores.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kgeval.models.base import as_complex, as_real, make_generator
from kgeval.typing import Target

__all__ = ["RecurrencyBaseline", "TNTComplEx"]


class TNTComplEx(nn.Module):
    """TNTComplEx (Lacroix et al., ICLR 2020): score(h, r, t, τ) = Re(Σ_i h_i · (r_i · τ_i + r'_i) · conj(t_i)),
    complex embeddings of entities, times and two parts of each relation (r with the time, r' without).

    Parameters
    ----------
    num_entities, num_relations, num_times : int
    dim : int, default=32
        Complex dimension d; every table stores 2d interleaved (real, imaginary) reals.
    seed : int, default=None

    Attributes
    ----------
    entity_embeddings : nn.Embedding (E, 2d)
    relation_embeddings, static_relation_embeddings : nn.Embedding (R, 2d) -- r and r'
    time_embeddings : nn.Embedding (T, 2d)
    trained_times : BoolTensor (T,)
        The times the model was trained on: those it scored in training mode (``model.train()``, as
        :func:`kgeval.models.training.train_model` does).

    Notes
    -----
    **Times it never saw.** A time embedding is learned only from the training quadruples of its time. On a
    forecasting split every test time is later than every training time, so its embedding is still its random
    initialisation: in evaluation mode a time that is not in ``trained_times`` is scored with the time-independent
    part alone, Re(Σ h_i · r'_i · conj(t_i)) -- a static ComplEx -- rather than with noise. On a completion
    (interpolation) split every time was trained and the full score is used.

    Fast path ("dot" on the real views): tail query h ∘ ρ, head query conj(ρ) ∘ t with ρ = r ∘ τ + r' (as for
    :class:`kgeval.models.ComplEx`); the query depends on τ, the candidates are the entity embeddings.
    """

    kgeval_similarity = "dot"
    trained_times: torch.Tensor

    def __init__(self, num_entities: int, num_relations: int, num_times: int, dim: int = 32,
                 seed: int | None = None) -> None:  # fmt: skip
        super().__init__()
        sizes = {"num_entities": num_entities, "num_relations": num_relations, "num_times": num_times, "dim": dim}
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.num_entities, self.num_relations, self.num_times, self.dim = num_entities, num_relations, num_times, dim
        self.entity_embeddings = nn.Embedding(num_entities, 2 * dim)
        self.relation_embeddings = nn.Embedding(num_relations, 2 * dim)
        self.static_relation_embeddings = nn.Embedding(num_relations, 2 * dim)
        self.time_embeddings = nn.Embedding(num_times, 2 * dim)
        self.register_buffer("trained_times", torch.zeros(num_times, dtype=torch.bool))
        self.reset_parameters(make_generator(seed))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Every table drawn from N(0, 0.1^2) (small, as in the paper's code), no time trained."""
        with torch.no_grad():
            for table in (self.entity_embeddings, self.relation_embeddings, self.static_relation_embeddings,
                          self.time_embeddings):  # fmt: skip
                table.weight.normal_(0.0, 0.1, generator=generator)
            self.trained_times.zero_()

    def _relation(self, relations: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """(B, d) complex ρ = r ∘ τ + r' of each row; r' alone for a time not trained (in evaluation mode)."""
        if self.training:
            self.trained_times[times] = True
        relation = as_complex(self.relation_embeddings(relations))
        static = as_complex(self.static_relation_embeddings(relations))
        timed = relation * as_complex(self.time_embeddings(times))
        if not self.training:
            timed = timed * self.trained_times[times].unsqueeze(1)
        return timed + static

    # -- GEMM fast-path protocol -----------------------------------------------------------------------------
    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, 2d) real query vectors of (B, 3) rows: (h, r, τ) for ``"tail"``, (r, t, τ) for ``"head"``."""
        _check_rows(batch, target)
        if target == "tail":
            return as_real(as_complex(self.entity_embeddings(batch[:, 0])) * self._relation(batch[:, 1], batch[:, 2]))
        tail = as_complex(self.entity_embeddings(batch[:, 1]))
        return as_real(self._relation(batch[:, 0], batch[:, 2]).conj() * tail)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        """(E, 2d) candidate vectors: the entity embeddings (both targets)."""
        return self.entity_embeddings.weight

    # -- scoring protocol ------------------------------------------------------------------------------------
    def score_t(self, hrt_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        """Scores (B, E) of (h, r, e, τ) for every entity e (or (B, k) of the ``tails`` ids (k,)), rows (h, r, τ)."""
        return _against(self.kgeval_query(hrt_batch, "tail"), self.entity_embeddings.weight, tails)

    def score_h(self, rtt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        """Scores (B, E) of (e, r, t, τ) for every entity e (or (B, k) of the ``heads`` ids (k,)), rows (r, t, τ)."""
        return _against(self.kgeval_query(rtt_batch, "head"), self.entity_embeddings.weight, heads)

    def extra_repr(self) -> str:
        return (f"num_entities={self.num_entities}, num_relations={self.num_relations}, num_times={self.num_times}, "
                f"dim={self.dim}")  # fmt: skip


class RecurrencyBaseline(nn.Module):
    """The strict recurrency baseline of temporal forecasting (after Gastinger et al., ECML PKDD 2023): the answer
    of (s, r, ?, τ) is scored by how recently and how often (s, r, o) was true *before* τ.

    score(s, r, o, τ) = α · λ^(d(τ) - d(τ_last)) + (1 - α) · n(s, r, o) / n(s, r, ·) when (s, r, o) occurred at
    some τ' < τ (τ_last the latest such τ', n the number of such quadruples, n(s, r, ·) those of any object), else
    0. Head queries (?, r, o, τ) alike with n(·, r, o). d(τ) is the time id's distance in the dataset's time steps
    (``time_steps``), so a fact seen 37 steps ago weighs λ^37 even where no quadruple falls in between; without
    ``time_steps``, the time ids themselves.

    Parameters
    ----------
    num_entities, num_relations, num_times : int
    decay : float, default=0.99
        λ in (0, 1]: the weight of a fact seen Δ time steps ago is λ^Δ.
    alpha : float, default=0.99
        α in [0, 1]: recency's share; the frequency part mostly breaks recency's ties.
    time_steps : tensor or sequence of float of length num_times, optional
        d(τ) of each time id, increasing (a :class:`kgeval.datasets.TemporalDataset`'s ``time_steps``; given by
        :meth:`before`). Default: the ids.

    Notes
    -----
    It needs no training: :meth:`kgeval_observe` adds quadruples (the training and validation ones before an
    evaluation; :class:`kgeval.TemporalRankBasedEvaluator` calls it with each test time's quadruples after that time
    was scored -- the single-step order). Only quadruples earlier than a query's time count, whatever was observed,
    so the scores never see the query's own time or later ones.
    """

    known: torch.Tensor  #: (n, 4) every quadruple observed so far
    time_steps: torch.Tensor  #: (num_times,) float64: each time id's distance in the dataset's time steps

    def __init__(self, num_entities: int, num_relations: int, num_times: int, decay: float = 0.99,
                 alpha: float = 0.99, time_steps: Any = None) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("num_entities", num_entities), ("num_relations", num_relations),
                            ("num_times", num_times)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be in (0, 1], got {decay!r}")
        if not 0 <= alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        self.num_entities, self.num_relations, self.num_times = num_entities, num_relations, num_times
        self.decay, self.alpha = float(decay), float(alpha)
        self.register_buffer("known", torch.zeros((0, 4), dtype=torch.long))
        self.register_buffer("time_steps", _checked_steps(time_steps, num_times))
        self._indices: dict[Target, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def before(cls, dataset: Any, split: str = "test", **options: Any) -> RecurrencyBaseline:
        """The baseline of a temporal dataset (``num_entities`` / ``num_relations`` / ``num_times``, ``train`` /
        ``valid``, e.g. a :class:`kgeval.datasets.TemporalDataset`, whose ``time_steps`` it measures time in)
        knowing what precedes ``split``: train for "valid", train + valid for "test". ``options``: ``decay``,
        ``alpha``."""
        if split not in ("valid", "test"):
            raise ValueError(f"split must be 'valid' or 'test', got {split!r}")
        steps = getattr(dataset, "time_steps", None)
        model = cls(dataset.num_entities, dataset.num_relations, dataset.num_times, time_steps=steps, **options)
        model.kgeval_observe(dataset.train if split == "valid" else torch.cat([dataset.train, dataset.valid]))
        return model

    @property
    def device(self) -> torch.device:
        return self.known.device

    def kgeval_observe(self, quadruples: torch.Tensor) -> None:
        """Add (n, 4) (s, r, o, τ) quadruples to what the model knows."""
        if not isinstance(quadruples, torch.Tensor) or quadruples.ndim != 2 or quadruples.shape[1] != 4:
            raise ValueError(f"quadruples must be an (n, 4) tensor, got {getattr(quadruples, 'shape', quadruples)}")
        quadruples = quadruples.to(self.known.device, torch.long)
        for column, bound, name in ((0, self.num_entities, "subject"), (1, self.num_relations, "relation"),
                                    (2, self.num_entities, "object"), (3, self.num_times, "time")):  # fmt: skip
            _check_ids(quadruples[:, column], bound, name)
        self.known = torch.cat([self.known, quadruples])
        self._indices = {}

    def _index(self, target: Target) -> tuple[torch.Tensor, torch.Tensor]:
        """(sorted query keys (n,), the known quadruples in that order (n, 4)) of one target: key s·R + r for tail
        queries, r·E + o for head queries."""
        if target not in self._indices:
            keys = self._keys(self.known, target)
            order = torch.argsort(keys, stable=True)
            self._indices[target] = (keys[order], self.known[order])
        return self._indices[target]

    def _keys(self, rows: torch.Tensor, target: Target) -> torch.Tensor:
        if target == "tail":
            return rows[:, 0] * self.num_relations + rows[:, 1]
        return rows[:, 1] * self.num_entities + rows[:, 2]

    def _scores(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, E) scores of (B, 3) rows: (s, r, τ) for tails, (r, o, τ) for heads; computed on the (query, answer)
        cells with an earlier occurrence only, every other cell 0."""
        _check_rows(batch, target)
        batch = batch.to(self.known.device)
        stride = self.num_relations if target == "tail" else self.num_entities
        wanted = batch[:, 0] * stride + batch[:, 1]  # the query's key: s · R + r, or r · E + o (as in _keys)
        keys, facts = self._index(target)
        start, end = torch.searchsorted(keys, wanted), torch.searchsorted(keys, wanted, right=True)
        counts = end - start
        owner = torch.repeat_interleave(torch.arange(len(batch), device=batch.device), counts)
        first_of_owner = torch.repeat_interleave(start - (torch.cumsum(counts, 0) - counts), counts)
        matches = facts[first_of_owner + torch.arange(len(owner), device=batch.device)]
        earlier = matches[:, 3] < batch[owner, 2]
        owner, matches = owner[earlier], matches[earlier]
        answer = matches[:, 2] if target == "tail" else matches[:, 0]
        cells, cell_of_match = torch.unique(owner * self.num_entities + answer, return_inverse=True)
        latest = torch.full((len(cells),), -1, dtype=torch.long, device=batch.device)
        latest.scatter_reduce_(0, cell_of_match, matches[:, 3], reduce="amax")
        seen = torch.bincount(cell_of_match, minlength=len(cells)).double()
        rows = cells // self.num_entities
        total = torch.bincount(owner, minlength=len(batch)).double().clamp(min=1)[rows]
        steps = self.time_steps.to(batch.device)
        recency = torch.pow(self.decay, steps[batch[rows, 2]] - steps[latest])
        scores = torch.zeros(len(batch) * self.num_entities, dtype=torch.float32, device=batch.device)
        scores[cells] = (self.alpha * recency + (1 - self.alpha) * seen / total).float()
        return scores.view(len(batch), self.num_entities)

    def score_t(self, hrt_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        """Scores (B, E) of every object of (s, r, ?, τ) rows (s, r, τ) (or (B, k) of the ``tails`` ids (k,))."""
        scores = self._scores(hrt_batch, "tail")
        return scores if tails is None else scores[:, tails.to(scores.device)]

    def score_h(self, rtt_batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        """Scores (B, E) of every subject of (?, r, o, τ) rows (r, o, τ) (or (B, k) of the ``heads`` ids (k,))."""
        scores = self._scores(rtt_batch, "head")
        return scores if heads is None else scores[:, heads.to(scores.device)]

    def extra_repr(self) -> str:
        return (f"num_entities={self.num_entities}, num_relations={self.num_relations}, num_times={self.num_times}, "
                f"decay={self.decay}, alpha={self.alpha}, known={len(self.known)}, "
                f"time steps {self.time_steps[0].item():g}..{self.time_steps[-1].item():g}")  # fmt: skip


def _checked_steps(time_steps: Any, num_times: int) -> torch.Tensor:
    """``time_steps`` as a float64 tensor (num_times,) of increasing distances (default: the ids)."""
    if time_steps is None:
        return torch.arange(num_times, dtype=torch.float64)
    steps = torch.as_tensor(time_steps, dtype=torch.float64).detach().cpu().reshape(-1)
    if steps.numel() != num_times:
        raise ValueError(f"time_steps must hold one distance per time id ({num_times}), got {steps.numel()}")
    if not bool(torch.isfinite(steps).all()) or (steps.numel() > 1 and not bool((steps[1:] > steps[:-1]).all())):
        raise ValueError("time_steps must be finite and strictly increasing (time ids are in time order)")
    return steps


def _check_rows(batch: torch.Tensor, target: Target) -> None:
    if target not in ("head", "tail"):
        raise ValueError(f"target must be 'head' or 'tail', got {target!r}")
    if batch.ndim != 2 or batch.shape[1] != 3:
        layout = "(h, r, τ)" if target == "tail" else "(r, t, τ)"
        raise ValueError(f"a {target} batch must have shape (B, 3) of {layout} rows, got {tuple(batch.shape)}")


def _check_ids(ids: torch.Tensor, bound: int, name: str) -> None:
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= bound):
        raise ValueError(f"{name} ids must be in [0, {bound}), got [{int(ids.min())}, {int(ids.max())}]")


def _against(query: torch.Tensor, candidates: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
    """(B, E) dot products of (B, 2d) queries with every candidate row, or (B, k) with the rows ``ids`` (k,)."""
    if ids is None:
        return query @ candidates.T
    if ids.ndim != 1:
        raise ValueError(f"candidate ids must have shape (k,), got {tuple(ids.shape)}")
    return query @ candidates[ids].T
