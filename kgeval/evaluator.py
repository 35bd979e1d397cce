"""RankBasedEvaluator: the public entry point. It checks the inputs, hands each side to the private engine
(:mod:`kgeval._engine`) under ``torch.inference_mode()`` on the model's device, restores ``model.training``, and
builds the results from one accumulator per side (docs/design.md, The data flow).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import distributed as dist
from tqdm.auto import tqdm

from kgeval import _checks
from kgeval._engine import (
    MATMUL_PRECISIONS,
    SCORE_METHOD,
    CandidateShard,
    CollectiveCheck,
    EngineState,
    EvaluationProgress,
    FilterIndex,
    FormChecks,
    KernelChoice,
    KernelChooser,
    MatmulPrecision,
    ShardedSide,
    SideCounts,
    SideIndex,
    SideTasks,
    candidate_positions,
    choose_sizes,
    declared_shard,
    declares_shard,
    exact_matmul,
    gather_shards,
    make_scorer,
    model_device,
    model_fingerprint,
    query_candidate_form,
    rank_file,
    rank_side,
    resolve_group,
    shard,
    synchronize,
    triple_function,
)
from kgeval._engine import (
    fingerprint as distributed_fingerprint,
)
from kgeval._modes import evaluation_mode
from kgeval._tasks import (
    ANSWER_COLUMN,
    QUERY_COLUMNS,
    candidate_groups,
    tasks_inside_constraints,
    tasks_inside_restriction,
)
from kgeval.accumulator import MetricAccumulator
from kgeval.adapters import scoring_view
from kgeval.adapters.wrappers import describe
from kgeval.constraints import TypeConstraints
from kgeval.results import RankBasedMetricResults
from kgeval.typing import Target

#: the ranks a filtered evaluation reports: filtered only, or filtered plus raw from the same pass
FilterMode = bool | Literal["both"]


@dataclass
class EvaluationInputs:
    """The checked arguments of one :meth:`RankBasedEvaluator.evaluate` call, on the model's device."""

    triples: torch.Tensor  #: LongTensor (n, 3): mapped_triples
    filter_triples: list[torch.Tensor]  #: the additional filter triples, each (m, 3)
    task_index: torch.Tensor  #: LongTensor: rows of ``triples`` to evaluate (this process's share once sharded)
    num_entities: int
    targets: tuple[Target, ...]
    candidate_ids: torch.Tensor | None  #: sorted candidate whitelist (restrict_entities_to), None: all entities
    relation_ids: torch.Tensor | None  #: restrict_relations_to, None: all relations
    batch_size: int | None
    slice_size: int | None
    score_fn: Any = None  #: scores whole triples instead of the model's methods (evaluate's score_fn)
    constraints: TypeConstraints | None = None  #: per relation and side candidate sets (type_constraints)
    num_relations: int | None = None  #: the model's relation count (needed to rank relations)
    #: per entity side, this rank's shard of a sharded candidate table (kgeval._engine.sharding); empty: none
    shards: dict[Target, CandidateShard] = field(default_factory=dict)
    group: Any = None  #: the process group of a sharded evaluation


@dataclass(frozen=True)
class EvaluationRequest:
    """The arguments of one :meth:`RankBasedEvaluator.evaluate` call as the caller gave them (checked later)."""

    mapped_triples: Any
    additional_filter_triples: Any = None
    num_entities: Any = None
    restrict_entities_to: Any = None
    targets: Any = ("head", "tail")
    batch_size: Any = None
    slice_size: Any = None
    drop_outside_restriction: bool = False
    restrict_relations_to: Any = None
    score_fn: Any = None
    type_constraints: Any = None


class RankBasedEvaluator:
    """Filtered rank-based evaluation of any model with ``score_h`` / ``score_t`` (PyKEEN-compatible names).

    Parameters
    ----------
    filtered : bool or "both", default=True
        Remove known triples from the candidates (METRICS.md, Candidates); False gives raw ranks. "both"
        reports the filtered metrics with the raw ones from the same pass in ``results.raw``.
    ks : sequence of int, default=(1, 3, 5, 10)
        The k of hits@k.
    batch_size : int, optional
        Ranking tasks scored at once (with the numba kernel: distinct queries, whatever number of tasks
        share them). None: chosen from the device's memory (kgeval._engine.sizes), and a batch that runs out of
        memory is halved and retried.
    slice_size : int, optional
        Candidates scored per model call / GEMM. None: all when they fit the memory budget, otherwise slices.
    keep_records : bool, default=True
        Keep one record per ranking task in the results (rank export, median, per-relation views, ...).
    fast_path : bool, default=True
        Use a model's query/candidate GEMM form when it has one -- only where it computes the scores of the model's
        own methods: a subclass that redefines its scoring method (``score_t`` / ``score_h`` / ``score_r``, else
        ``score_hrt`` / ``forward``) below the class declaring the form is scored through that method, and so is
        a model whose form disagrees with it on a one-off probe (``check_fast_path``); a FastPathWarning says so.
    check_fast_path : bool, default=True
        Before using a form, score a few of the evaluation's queries against a few candidates with the form and
        with the model's own method, once per evaluation and side: where they order a pair of candidates
        differently beyond float rounding (or give NaN apart), warn and use the model's own method. False skips
        the probe, for benchmarks of a model known to be right (the class check stays).
    kernel : {"auto", "eager", "numba", "triton"}, default="auto"
        How score tiles are counted: "eager" with PyTorch operations; "numba" in one parallel pass compiled by numba
        (CPU only; a one-off cost per process to load it; falls back to eager with a warning where it cannot run);
        "triton" Triton programs (CUDA with the ``gpu`` extra, or CPU tensors under ``TRITON_INTERPRET=1``; eager
        with a warning elsewhere): for the "dot" and "l2" fast paths in float16 / bfloat16 / float32, one kernel
        multiplies queries by candidates and counts without writing a score (IEEE float32 products, the true and
        filtered scores picked by the same arithmetic); for other models one program per task reads its row once;
        it first passes a one-off probe on the device (exact counts, picked scores tying with the tiles'), or
        kgeval counts eagerly with a warning;
        "auto" on a CPU counts eagerly and switches to numba once this evaluator has counted (or is about to
        count) 10**9 scores, or at once if numba is already loaded; on CUDA it uses "triton" when triton is
        installed and the kernel passed a one-off probe on the device, else eager. The ranks are the same with
        every kernel, up to the rounding of the scores (the fused kernel accumulates float16 / bfloat16 products
        in float32 like cuBLAS, in its own order).
    matmul_precision : {"exact", "inherit"}, default="exact"
        "exact": inside ``evaluate`` float32 matrix multiplications run in full precision even when the process
        enabled TF32 or a reduced matmul precision (``torch.backends.cuda.matmul.allow_tf32``,
        ``torch.set_float32_matmul_precision``, ``fp32_precision``); the settings are restored afterwards.
        "inherit": use the process's settings -- faster on GPUs with TF32, but scores, and so ranks, are then only
        approximate (two candidates closer than the reduced precision can swap or tie).

    Examples
    --------
    >>> evaluator = RankBasedEvaluator(ks=(1, 10))
    >>> results = evaluator.evaluate(model, test, additional_filter_triples=[train, valid])  # doctest: +SKIP
    >>> results.get_metric("both.realistic.hits_at_10")  # doctest: +SKIP
    """

    def __init__(
        self,
        filtered: FilterMode = True,
        ks: Sequence[int] = (1, 3, 5, 10),
        batch_size: int | None = None,
        slice_size: int | None = None,
        keep_records: bool = True,
        fast_path: bool = True,
        kernel: KernelChoice = "auto",
        matmul_precision: MatmulPrecision = "exact",
        check_fast_path: bool = True,
    ) -> None:
        if filtered not in (True, False, "both"):
            raise ValueError(f"filtered must be True, False or 'both', got {filtered!r}")
        self.filtered: FilterMode = filtered if filtered == "both" else bool(filtered)
        self.ks = _checks.check_ks(ks)
        self.batch_size = _checks.check_positive_int(batch_size, "batch_size", allow_none=True)
        self.slice_size = _checks.check_positive_int(slice_size, "slice_size", allow_none=True)
        self.keep_records = bool(keep_records)
        self.fast_path = bool(fast_path)
        self.check_fast_path = bool(check_fast_path)
        if matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"matmul_precision must be one of {MATMUL_PRECISIONS}, got {matmul_precision!r}")
        self.matmul_precision: MatmulPrecision = matmul_precision
        self._state = EngineState(kernels=KernelChooser(kernel))  # what persists from one call to the next

    @property
    def kernel(self) -> KernelChoice:
        """The requested counting kernel ("auto", "eager" or "numba")."""
        return self._state.kernels.requested  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"RankBasedEvaluator(filtered={self.filtered}, ks={self.ks}, batch_size={self.batch_size}, "
            f"slice_size={self.slice_size}, kernel={self.kernel!r})"
        )

    # -- public entry point -----------------------------------------------------------------------------------
    def evaluate(
        self,
        model: Any,
        mapped_triples: torch.Tensor,
        *,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        num_entities: int | None = None,
        restrict_entities_to: torch.Tensor | Iterable[int] | None = None,
        targets: Sequence[Target] = ("head", "tail"),
        use_tqdm: bool = True,
        tqdm_kwargs: Mapping[str, Any] | None = None,
        batch_size: int | None = None,
        slice_size: int | None = None,
        device: torch.device | str | None = None,
        drop_outside_restriction: bool = False,
        restrict_relations_to: torch.Tensor | Iterable[int] | None = None,
        pre_filtered_triples: bool = True,
        do_time_consuming_checks: bool = True,
        score_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        type_constraints: TypeConstraints | None = None,
        distributed: bool | None = None,
        process_group: Any = None,
        progress_path: str | os.PathLike[str] | None = None,
        save_every: float = 60.0,
    ) -> RankBasedMetricResults:
        """Rank the true head and tail (and, on request, relation) of every triple among all candidates and compute
        every metric.

        Every argument after ``mapped_triples`` is keyword-only: PyKEEN's third positional parameter is
        ``batch_size``, so a positional call written for PyKEEN fails here instead of meaning something else.
        PyKEEN's keyword arguments are all accepted with PyKEEN's meaning (``device``, ``tqdm_kwargs``,
        ``pre_filtered_triples``, ``do_time_consuming_checks`` included; see below).

        Parameters
        ----------
        model : object
            Has ``score_t(hr_batch)`` / ``score_h(rt_batch)`` returning (B, num_entities) scores (optionally
            accepting ``tails=`` / ``heads=`` candidate ids), or the query/candidate form of
            :class:`kgeval.protocol.QueryCandidateModel`. A PyKEEN model is scored as PyKEEN predicts
            (inverse relations included; see :mod:`kgeval.integrations.pykeen`). A model inside ``torch.compile``,
            ``DataParallel``, ``DistributedDataParallel``, an ``AveragedModel`` or Lightning Fabric is scored as the
            model inside (:mod:`kgeval.adapters.wrappers`). It is evaluated where it lives and never moved; the
            training flag of every submodule is restored afterwards.
        mapped_triples : LongTensor of shape (n, 3)
            The (head, relation, tail) triples to rank. Always part of the filter set.
        additional_filter_triples : LongTensor of shape (m, 3), or a sequence of them, optional
            Further known triples to filter (typically train and valid).
        num_entities : int, optional
            Default: ``model.num_entities``.
        restrict_entities_to : LongTensor, list or set of ids, optional
            Only these entities are candidates.
        targets : sequence of {"head", "tail", "relation"}, default=("head", "tail")
            "relation" ranks the true relation of (h, ?, t) among all relations, filtered by the known (h, r', t),
            through the model's ``score_r(ht_batch, relations=None)`` (PyKEEN's method; the built-in models have it)
            or its whole-triple scoring; the model must declare ``num_relations``. Reported as the side
            ``relation`` (``relation.realistic.mrr``), apart from ``both`` (head and tail, as in PyKEEN).
            ``restrict_entities_to`` and ``type_constraints`` concern entity candidates only.
        use_tqdm : bool, default=True
            Show a progress bar over ranking tasks.
        tqdm_kwargs : mapping, optional
            Passed to the progress bar (``tqdm``), overriding kgeval's settings (e.g. ``{"desc": "valid"}``).
        batch_size, slice_size : int, optional
            Override the evaluator's sizes for this call.
        device : torch.device or str, optional
            PyKEEN's argument. kgeval evaluates on the model's device and never moves a model: None or the model's
            device are accepted, any other device is a ValueError (move the model with ``model.to(device)``).
        drop_outside_restriction : bool, default=False
            Drop triples whose head or tail lies outside ``restrict_entities_to`` instead of raising.
        restrict_relations_to : LongTensor, list or set of relation ids, optional
            Evaluate only the triples of these relations (the others are still filtered). Combined with
            ``restrict_entities_to``, the entity check applies to the selected triples only.
        pre_filtered_triples : bool, default=True
            PyKEEN's argument: False means ``mapped_triples`` may hold triples outside ``restrict_entities_to``,
            which are dropped (as ``drop_outside_restriction=True``); True means it holds none, and one is an
            error naming the row. Triples outside ``restrict_relations_to`` are skipped either way.
        do_time_consuming_checks : bool, default=True
            PyKEEN's argument, accepted and ignored: kgeval's input checks take linear time and always run.
        score_fn : callable, optional
            ``score_fn(heads, relations, tails) -> scores`` (three LongTensors of shape (n,), scores of shape (n,)):
            score whole triples with this instead of the model's methods. Without it, a model with no
            ``score_t`` / ``score_h`` is scored through its ``score_hrt(hrt_batch)`` or ``forward(h, r, t)``.
            Each batch of queries is expanded over one candidate slice at a time.
        type_constraints : kgeval.TypeConstraints, optional
            Per relation and side, the entities a task ranks its answer among (intersected with
            ``restrict_entities_to``); each task's num_candidates is its own. A triple whose answer lies outside its
            set is an error, or dropped with ``drop_outside_restriction=True``.
        distributed : bool, optional
            None: when a ``torch.distributed`` process group with more than one rank is initialised, every rank
            ranks its share of the triples and all ranks return the results of the whole evaluation (every rank
            must call ``evaluate`` with the same inputs; see :mod:`kgeval._engine.distributed`). False: evaluate
            everything in this process. True: like None, but an error when no process group is initialised.
            A query/candidate model whose ranks each hold a shard of the entity table (declared by
            ``kgeval_candidate_shard(target) -> (start, stop)``, :mod:`kgeval._engine.sharding`) is evaluated the
            other way round: every rank ranks every task against its shard and the integer counts are summed, with
            the ranks of a single process holding the whole table.
        process_group : torch.distributed.ProcessGroup, optional
            The group to share the work in; default the world group.
        progress_path : str or path-like, optional
            Make the evaluation resumable: the counts of the batches done are saved to this file (atomically: a
            temporary file renamed over it) at most every ``save_every`` seconds; a later call with the same model
            weights, triples, filter, candidates and options that finds the file ranks only the tasks left and ends
            with exactly the results of an uninterrupted run. A file of another evaluation is a ValueError naming
            what differs (never a mixed result). The file is removed once the evaluation succeeds. Under
            ``torch.distributed`` each rank keeps ``{progress_path}.rank{r}-of-{w}``. See
            :mod:`kgeval._engine.resume`.
        save_every : float, default=60.0
            Seconds between saves of ``progress_path`` (0: after every batch).

        Returns
        -------
        RankBasedMetricResults
            With ``filtered="both"``, the filtered results whose ``raw`` attribute holds the raw ones.
        """
        del do_time_consuming_checks  # accepted for PyKEEN: kgeval's checks are cheap and always run
        drop_outside_restriction = bool(drop_outside_restriction) or not pre_filtered_triples
        group = resolve_group(distributed, process_group)
        with CollectiveCheck(group) as check:  # under torch.distributed: every rank raises together, never hangs
            view = scoring_view(model)  # a PyKEEN model: scored as PyKEEN predicts
            _checks.check_device(device, model_device(view))
            request = EvaluationRequest(
                mapped_triples=mapped_triples,
                additional_filter_triples=additional_filter_triples,
                num_entities=num_entities,
                restrict_entities_to=restrict_entities_to,
                targets=targets,
                batch_size=batch_size,
                slice_size=slice_size,
                drop_outside_restriction=drop_outside_restriction,
                restrict_relations_to=restrict_relations_to,
                score_fn=score_fn,
                type_constraints=type_constraints,
            )
            inputs = self._checked_inputs(view, request, describe(model))
            declared = self._declared_shards(view, inputs)
            check.expect_same(
                mapped_triples=inputs.triples,
                additional_filter_triples=inputs.filter_triples,
                restrict_entities_to=inputs.candidate_ids,
                restrict_relations_to=inputs.relation_ids,
                drop_outside_restriction=drop_outside_restriction,
                num_entities=inputs.num_entities,
                targets=inputs.targets,
                evaluator=(self.filtered, self.ks, self.keep_records),
                candidate_shards=sorted(declared),  # the ranks gather their shards below only if all declare them
            )
            index = None
            if self.filtered is not False:
                index = self._state.filter_indices.get([inputs.triples, *inputs.filter_triples], inputs.triples.device)
        shards = gather_shards(declared, inputs.num_entities, group) if declared else {}
        with CollectiveCheck(group):
            self._check_sharded(shards, inputs, progress_path)
            resume = None
            if progress_path is not None:
                resume = self._progress(progress_path, save_every, model, inputs, group)
        if shards:  # every rank ranks every task against its shard of the candidates
            inputs.shards, inputs.group = shards, group
        else:
            inputs.task_index = shard(inputs.task_index, group)
        precision = exact_matmul(self.matmul_precision)
        with CollectiveCheck(group), evaluation_mode(model), torch.inference_mode(), precision:
            accumulators = self._rank_all(view, inputs, index, _progress_settings(use_tqdm, tqdm_kwargs), resume)
        filtered = {target: pair[0] for target, pair in accumulators.items()}
        raw = {target: pair[1] for target, pair in accumulators.items()} if self.filtered == "both" else None
        if group is not None and not shards:
            with torch.inference_mode():
                filtered = synchronize(filtered, group)
                raw = synchronize(raw, group) if raw is not None else None  # type: ignore[arg-type]
        if raw is not None:
            results = RankBasedMetricResults.from_accumulators(
                filtered,
                self.ks,
                raw=RankBasedMetricResults.from_accumulators(raw, self.ks),  # type: ignore[arg-type]
            )
        else:
            results = RankBasedMetricResults.from_accumulators(filtered, self.ks)
        if resume is not None:
            resume.finish()
        return results

    def _progress(
        self, path: str | os.PathLike[str], save_every: float, model: Any, inputs: EvaluationInputs, group: Any
    ) -> EvaluationProgress:
        """The progress of this evaluation (this rank's file under torch.distributed), read back if saved."""
        constraints = inputs.constraints
        fingerprint = distributed_fingerprint(
            mapped_triples=inputs.triples,
            additional_filter_triples=inputs.filter_triples,
            restrict_entities_to=inputs.candidate_ids,
            restrict_relations_to=inputs.relation_ids,
            evaluated_rows=inputs.task_index,
            num_entities=inputs.num_entities,
            targets=inputs.targets,
            type_constraints=None if constraints is None else (
                sorted((r, tuple(ids.tolist())) for r, ids in constraints.heads.items()),
                sorted((r, tuple(ids.tolist())) for r, ids in constraints.tails.items()),
            ),
            model=model_fingerprint(model),
            score_fn=None if inputs.score_fn is None else getattr(inputs.score_fn, "__qualname__", "a function"),
            evaluator_options=(self.filtered, self.ks, self.keep_records, self.fast_path, self.matmul_precision),
        )  # fmt: skip
        if group is not None:
            rank, world_size = dist.get_rank(group), dist.get_world_size(group)
            fingerprint["rank"] = (rank, world_size)
            path = rank_file(path, rank, world_size)
        return EvaluationProgress(path, fingerprint, save_every)

    def _declared_shards(self, model: Any, inputs: EvaluationInputs) -> dict[Target, tuple[int, int] | None]:
        """The candidate shard this rank's model declares for each entity side (None: none), when it has the
        query/candidate form and a shard method; empty when it has none (kgeval._engine.sharding)."""
        form = query_candidate_form(model)
        if form is None or not declares_shard(form):
            return {}
        served = getattr(form, "kgeval_targets", ("head", "tail"))
        return {
            target: declared_shard(form, target, inputs.num_entities)
            for target in ("head", "tail")
            if target in served
        }

    def _check_sharded(
        self, shards: dict[Target, CandidateShard], inputs: EvaluationInputs, progress_path: Any
    ) -> None:
        """ValueError for what a sharded candidate table cannot be evaluated with."""
        if not shards:
            return
        missing = [target for target in inputs.targets if target not in shards]
        problems = []
        if missing:
            problems.append(f"the targets {missing} have no shard (every ranked side must be sharded)")
        if not self.fast_path or inputs.score_fn is not None:
            problems.append("a sharded model is scored through its query/candidate form only (fast_path=True, no "
                            "score_fn)")  # fmt: skip
        if progress_path is not None:
            problems.append("progress_path is not supported with sharded candidates")
        if problems:
            raise ValueError(f"cannot evaluate this sharded candidate table: {'; '.join(problems)}")

    # -- input checks -----------------------------------------------------------------------------------------
    def _checked_inputs(self, model: Any, request: EvaluationRequest, name: str) -> EvaluationInputs:
        """The arguments of :meth:`evaluate`, checked and moved to the model's device (ValueError / TypeError
        naming the offending argument otherwise; ``name``: the model as the user handed it over, wrappers
        included)."""
        targets = _checks.check_targets(request.targets)
        scores_triples = request.score_fn is not None or (
            not all(callable(getattr(model, SCORE_METHOD[target], None)) for target in targets)
            and triple_function(model) is not None
        )
        if _declares_shard(model):  # its form is the only way to score a table no rank holds whole
            _checks.check_model(model, [t for t in targets if t == "relation"], scores_triples, name)
        else:
            _checks.check_model(model, targets, scores_triples, name)
        num_entities = _checks.check_num_entities(model, request.num_entities, name)
        device = model_device(model)
        num_relations = _checks.model_num_relations(model)
        if "relation" in targets and num_relations is None:
            raise ValueError(
                "ranking relations (targets with 'relation') needs the model's number of relations: give the model "
                "a positive int attribute num_relations"
            )
        triples = _checks.check_triples(request.mapped_triples, "mapped_triples", num_entities, num_relations)
        triples = triples.to(device)
        known = _checks.check_filter_triples(request.additional_filter_triples, num_entities, num_relations)
        filter_triples = [f.to(device) for f in known]
        candidate_ids = relation_ids = None
        if request.restrict_entities_to is not None:
            candidate_ids = _checks.check_entity_ids(request.restrict_entities_to, "restrict_entities_to", num_entities)
            candidate_ids = candidate_ids.to(device)
        if request.restrict_relations_to is not None:
            relation_ids = _checks.check_relation_ids(request.restrict_relations_to, "restrict_relations_to").to(device)
        constraints = request.type_constraints
        if constraints is not None:
            if not isinstance(constraints, TypeConstraints):
                raise TypeError(f"type_constraints must be a kgeval.TypeConstraints, got {type(constraints).__name__}")
            constraints.check(num_entities)
        task_index = tasks_inside_restriction(
            triples, candidate_ids, num_entities, request.drop_outside_restriction, relation_ids
        )
        if constraints is not None:
            task_index = tasks_inside_constraints(
                triples, task_index, constraints, targets, request.drop_outside_restriction
            )
        if task_index.numel() == 0 and relation_ids is not None:
            raise ValueError(
                f"no triple of mapped_triples is left to evaluate with restrict_relations_to={relation_ids.tolist()}"
            )
        if task_index.numel() == 0:
            raise ValueError("mapped_triples is empty: there is nothing to evaluate")
        return EvaluationInputs(
            triples=triples,
            filter_triples=filter_triples,
            task_index=task_index,
            num_entities=num_entities,
            targets=targets,
            candidate_ids=candidate_ids,
            relation_ids=relation_ids,
            batch_size=_checks.check_positive_int(request.batch_size, "batch_size", allow_none=True) or self.batch_size,
            slice_size=_checks.check_positive_int(request.slice_size, "slice_size", allow_none=True) or self.slice_size,
            score_fn=request.score_fn,
            constraints=constraints,
            num_relations=num_relations,
        )

    # -- the loop ---------------------------------------------------------------------------------------------
    def _rank_all(
        self,
        model: Any,
        inputs: EvaluationInputs,
        index: FilterIndex | None,
        progress_settings: dict[str, Any],
        resume: EvaluationProgress | None = None,
    ) -> dict[Target, tuple[MetricAccumulator, MetricAccumulator | None]]:
        """Rank this process's tasks (``inputs.task_index``) on every target side (``resume``: what an earlier call
        did, and where this one's batches are recorded)."""
        accumulators = {}
        checks = FormChecks(probe=self.check_fast_path)  # this evaluation's fast-path verdicts and warnings
        with tqdm(**{"total": len(inputs.targets) * inputs.task_index.numel(), **progress_settings}) as progress:
            for target in inputs.targets:
                side_index = index.side(target) if index is not None else None
                accumulators[target] = self._rank_target(model, inputs, target, side_index, progress, checks, resume)
        return accumulators

    def _rank_target(
        self,
        model: Any,
        inputs: EvaluationInputs,
        target: Target,
        side_index: SideIndex | None,
        progress: tqdm,
        checks: FormChecks,
        resume: EvaluationProgress | None = None,
    ) -> tuple[MetricAccumulator, MetricAccumulator | None]:
        """Rank every task of one side, one candidate set at a time (one set without type constraints, else one per
        constrained relation); the accumulators of the filtered (or raw) ranks and, for "both", raw."""
        task_index = inputs.task_index
        triples = inputs.triples[task_index]
        both = self.filtered == "both"
        if triples.shape[0] == 0:  # a rank with no share of a distributed evaluation
            empty = MetricAccumulator(ks=self.ks, keep_records=self.keep_records).to(triples.device)
            return empty, empty.clone() if both else None
        parts = []
        id_space = inputs.num_relations if target == "relation" else inputs.num_entities
        groups = candidate_groups(triples, target, inputs.candidate_ids, inputs.constraints)
        sharded = None
        if target in inputs.shards:  # shares the query vectors of the side's tasks (a collective)
            form = query_candidate_form(model)
            sharded = ShardedSide(form, target, triples[:, QUERY_COLUMNS[target]], inputs.shards[target], inputs.group)
        for number, (rows, candidate_ids) in enumerate(groups):
            group = triples if rows is None else triples[rows]
            if sharded is not None:
                tasks = _side_tasks(group, target, candidate_ids, id_space, side_index)  # type: ignore[arg-type]
                sizes = (inputs.batch_size, inputs.slice_size)
                parts.append((rows, sharded.rank(tasks, candidate_ids, id_space, self._state, sizes, progress, both)))
                continue
            scorer = make_scorer(
                model,
                target,
                id_space,
                candidate_ids,
                fast_path=self.fast_path,
                score_fn=inputs.score_fn,  # type: ignore[arg-type]
                probe_queries=group[:, QUERY_COLUMNS[target]],  # the probe reads a few (one per relation: more)
                checks=checks,
            )
            tasks = _side_tasks(group, target, candidate_ids, id_space, side_index)  # type: ignore[arg-type]
            sizes = choose_sizes(scorer, group.shape[0], triples.device, inputs.batch_size, inputs.slice_size)
            side_resume = resume.side((target, number)) if resume is not None else None
            parts.append((rows, rank_side(scorer, tasks, sizes, self._state, progress, both, side_resume)))
        rows, counts = parts[0]
        if rows is not None:  # the tasks were ranked in groups: put them back in task order
            counts = SideCounts.scatter(parts, triples.shape[0])  # type: ignore[arg-type]
        self._raise_on_nan(counts.counts.has_nan, triples, task_index, target)
        accumulators = []
        for part in (counts.counts, counts.raw) if both else (counts.counts,):
            accumulator = MetricAccumulator(ks=self.ks, keep_records=self.keep_records)
            accumulator.update_unchecked(*part.ranks(), triples, task_index)  # type: ignore[union-attr]
            accumulators.append(accumulator)
        return accumulators[0], accumulators[1] if len(accumulators) > 1 else None

    @staticmethod
    def _raise_on_nan(has_nan: torch.Tensor, triples: torch.Tensor, task_index: torch.Tensor, target: Target) -> None:
        """One host synchronisation after the loop: a NaN score is a model defect, reported with its triple."""
        if bool(has_nan.any()):
            first = int(has_nan.nonzero()[0, 0])
            raise ValueError(
                f"the model produced NaN scores for the {target} task of triple {triples[first].tolist()} "
                f"(row {int(task_index[first])} of mapped_triples); {int(has_nan.sum())} {target} task(s) affected"
            )


def _declares_shard(model: Any) -> bool:
    """Whether ``model`` has the query/candidate form with a candidate shard method (kgeval._engine.sharding)."""
    form = query_candidate_form(model)
    return form is not None and declares_shard(form)


def _side_tasks(
    triples: torch.Tensor,
    target: Target,
    candidate_ids: torch.Tensor | None,
    id_space: int,
    side_index: SideIndex | None,
) -> SideTasks:
    """The tasks of one side of ``triples`` (n, 3) among the candidates ``candidate_ids`` (None: all ids)."""
    position_of = candidate_positions(candidate_ids, id_space, triples.device)
    answers = triples[:, ANSWER_COLUMN[target]]
    return SideTasks(
        queries=triples[:, QUERY_COLUMNS[target]],
        true_positions=position_of[answers] if position_of is not None else answers,
        side_index=side_index,
        position_of=position_of,
    )


def _progress_settings(use_tqdm: bool, tqdm_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The progress bar's keyword arguments: kgeval's defaults, overridden by the caller's ``tqdm_kwargs``.

    With ``use_tqdm`` the bar shows on a terminal only (tqdm's ``disable=None``): written to a log file or a pipe,
    its carriage-return updates would run into the next line. ``leave=False`` clears it when done."""
    settings: dict[str, Any] = {"unit": "task", "desc": "Evaluating", "disable": None if use_tqdm else True}
    settings["leave"] = False
    settings.update(tqdm_kwargs or {})
    return settings
