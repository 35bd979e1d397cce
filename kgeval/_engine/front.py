"""The engine's front door (:func:`rank`): one call ranks every side of an evaluation and returns each side's
accumulators. It owns the orchestration -- the collective checks that make every rank of a distributed evaluation
fail together, the sharing of tasks or of a sharded candidate table, resumable progress, the matmul precision, the
model's evaluation mode and the per-target loop -- so that an evaluator is: check the arguments, call :func:`rank`,
build results. A second kind of evaluation (temporal quadruples, say) is another front over the same stages.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import distributed as dist
from tqdm.auto import tqdm

from kgeval._engine.counting import BatchCounts, SideCounts
from kgeval._engine.distributed import (
    CollectiveCheck,
    check_every_rank_entered,
    fingerprint,
    resolve_group,
    shard,
    synchronize,
)
from kgeval._engine.filter_index import FilterIndex, SideIndex
from kgeval._engine.form_check import RANDOMNESS, CallerGenerators, FormChecks, caller_rng_restored
from kgeval._engine.identity import score_signature
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.loop import EngineState, Observer, SideTasks, rank_side
from kgeval._engine.precision import MatmulPrecision, exact_arithmetic
from kgeval._engine.resume import EvaluationProgress, rank_file
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import candidate_positions
from kgeval._engine.sharding import CandidateShard, ShardedSide, declared_shard, gather_shards
from kgeval._engine.sizes import sizes_for
from kgeval._engine.threads import threads_for_the_machine
from kgeval._fingerprints import ScoreSignature, model_fingerprint, model_settings, view_settings
from kgeval._inputs import CheckedInputs
from kgeval._modes import evaluation_mode
from kgeval._tasks import ANSWER_COLUMN, QUERY_COLUMNS, candidate_groups
from kgeval.accumulator import MetricAccumulator
from kgeval.exceptions import quieted
from kgeval.typing import KernelChoice, Target

__all__ = ["EngineState", "RankOptions", "RunSettings", "SideRanks", "model_signature", "new_state", "rank"]

#: the ranks a filtered evaluation reports: filtered only, filtered plus raw from the same pass, or ("all")
#: filtered, raw and coarsely filtered (relations compared as r // filter_relation_stride) from the same pass
FilterMode = bool | Literal["both", "all"]


def new_state(kernel: KernelChoice = "auto") -> EngineState:
    """The state an evaluator carries from call to call, counting with ``kernel`` (kgeval._engine.kernels.choice)."""
    return EngineState(kernels=KernelChooser(kernel))


@dataclass(frozen=True)
class RankOptions:
    """What an evaluator asks of each evaluation: the filter setting (True, False, "both": filtered with raw
    beside it, or "all": filtered, raw and coarse from one pass; ``filter_relation_stride``: relations compared as
    ``r // stride`` in the filter -- the static filter of packed temporal relations -- and with "all", in the
    coarse filter only), the k of hits@k and whether records are kept (what the accumulators hold), and how the
    model may be scored (the fast path, its probe, the matmul precision)."""

    filtered: FilterMode = True
    ks: tuple[int, ...] = (1, 3, 5, 10)
    keep_records: bool = True
    fast_path: bool = True
    check_fast_path: bool = True
    matmul_precision: MatmulPrecision = "exact"
    filter_relation_stride: int = 1

    @property
    def raw_too(self) -> bool:
        """Whether raw ranks are counted besides the filtered ones."""
        return self.filtered in ("both", "all")

    @property
    def coarse_too(self) -> bool:
        """Whether the coarse filter's ranks are counted besides the exact filter's (the pass filters with the
        coarse filter's pairs and marks the exact filter's among them)."""
        return self.filtered == "all"


@dataclass(frozen=True)
class RunSettings:
    """How one call runs: its progress bar (tqdm's keyword arguments), its process group (``distributed``: None,
    True or False, as ``evaluate`` takes it), and its resumable progress file."""

    progress: Mapping[str, Any] = field(default_factory=lambda: {"disable": True})
    distributed: bool | None = None
    process_group: Any = None
    progress_path: str | os.PathLike[str] | None = None
    save_every: float = 60.0

    @staticmethod
    def progress_bar(use_tqdm: bool, tqdm_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
        """The progress bar's keyword arguments: kgeval's defaults, overridden by the caller's ``tqdm_kwargs``.

        With ``use_tqdm`` the bar shows on a terminal only (tqdm's ``disable=None``): written to a log file or a
        pipe, its carriage-return updates would run into the next line. ``leave=False`` clears it when done."""
        settings: dict[str, Any] = {"unit": "task", "desc": "Evaluating", "disable": None if use_tqdm else True}
        settings["leave"] = False
        settings.update(tqdm_kwargs or {})
        return settings


@dataclass(frozen=True)
class SideRanks:
    """One side's ranks, in the order of the evaluated triples: the accumulator of the filtered ranks (raw ones
    for an unfiltered evaluation), with ``filtered="both"`` or "all" the accumulator of the raw ones, and with two
    filter levels that of the wider level's ranks: with "all" the coarsely filtered ones (relations compared as
    ``r // filter_relation_stride``), with ``also_filter_triples`` those filtered by these triples as well."""

    ranked: MetricAccumulator
    raw: MetricAccumulator | None = None
    coarse: MetricAccumulator | None = None


def rank(
    prepare: Callable[[], CheckedInputs], options: RankOptions, run: RunSettings, state: EngineState
) -> dict[Target, SideRanks]:
    """Rank every task of every target side of one evaluation.

    Parameters
    ----------
    prepare : callable returning CheckedInputs
        Checks the evaluation's arguments (kgeval._inputs.check_evaluation_inputs); called here, inside the
        collective check, so that under ``torch.distributed`` a rank whose arguments fail raises on every rank.
    options : RankOptions
    run : RunSettings
    state : EngineState
        The evaluator's (kernel chooser, remembered batch sizes, filter indices).

    Returns
    -------
    dict of target to SideRanks
        Under ``torch.distributed``, every rank returns the whole evaluation's ranks.

    Runs on the cores other processes leave idle (kgeval._engine.threads), the caller's thread count restored after.
    Where the stability probe finds the model drawing random numbers while it is scored (noise in eval mode), the
    caller's random number generators are given back as they were, so its streams do not depend on the evaluation;
    otherwise they are left alone -- they are process-wide, and a restore would also undo the draws of a thread
    training beside the evaluation (:func:`kgeval._engine.form_check.caller_rng_restored`).
    """
    with threads_for_the_machine(state.load_sample.recent), caller_rng_restored(restore=False) as generators:
        return _rank(prepare, options, run, state, generators)


def _rank(
    prepare: Callable[[], CheckedInputs],
    options: RankOptions,
    run: RunSettings,
    state: EngineState,
    generators: CallerGenerators,
) -> dict[Target, SideRanks]:
    """:func:`rank` on the threads chosen for it; ``generators``: told whether to give the caller's generators
    back."""
    group = resolve_group(run.distributed, run.process_group)
    if group is not None:
        check_every_rank_entered(group)  # a rank evaluating alone raises within seconds instead of waiting
    with CollectiveCheck(group) as check:  # under torch.distributed: every rank raises together, never hangs
        inputs = prepare()
        declared = _declared_shards(inputs)
        check.expect_same(
            **inputs.identity(),
            evaluator=(options.filtered, options.ks, options.keep_records),
            candidate_shards=sorted(declared),  # the ranks gather their shards below only if all declare them
        )
        index, fine_index = _filter_indices(inputs, options, state)
    signature = None
    if group is not None and not inputs.model.declares_shard:
        with CollectiveCheck(group) as check:  # every rank's model scores the probe as rank 0's, or all refuse
            signature = model_signature(inputs, options.matmul_precision)
            check.expect_same_scores(signature)
    shards = gather_shards(declared, inputs.num_entities, group) if declared else {}
    with CollectiveCheck(group):
        _check_sharded(shards, inputs, options, run.progress_path)
        task_index = inputs.task_index if shards else shard(inputs.task_index, group)  # sharded: every task here
        resume = None
        if run.progress_path is not None:
            resume = _progress(run, options, inputs, task_index, group, signature)
    sides = _Sides(inputs, options, state, index, task_index, shards, group, fine_index)
    precision = exact_arithmetic(options.matmul_precision)
    checks = FormChecks(probe=options.check_fast_path)  # this evaluation's fast-path and stability verdicts
    try:
        with CollectiveCheck(group), evaluation_mode(inputs.model.model), torch.inference_mode(), precision:
            ranked = sides.rank_all(run.progress, resume, checks)
    finally:
        generators.restore = checks.found(RANDOMNESS)  # the model draws: its draws are not the caller's to lose
    if group is not None and not shards:
        with torch.inference_mode():
            ranked = _synchronized(ranked, group)
    if resume is not None:
        resume.finish()
    return ranked


def _filter_indices(
    inputs: CheckedInputs, options: RankOptions, state: EngineState
) -> tuple[FilterIndex | None, FilterIndex | None]:
    """The filter index the pass filters with and, where two filter levels are counted, the narrower level's
    (its pairs are marked among the wider level's: every task's narrower run is a subset of its wider run).

    Two levels: ``filtered="all"`` (the wider filter compares relations as ``r // filter_relation_stride``, the
    narrower exactly), or ``inputs.also_filter_triples`` (the wider filter adds them to the known triples)."""
    if options.filtered is False:
        if inputs.also_filter_triples:
            raise ValueError("also_filter_triples needs a filtered evaluation (filtered=True or 'both')")
        return None, None
    known = [inputs.triples, *inputs.filter_triples]
    device, stride = inputs.triples.device, options.filter_relation_stride
    if inputs.also_filter_triples:
        if options.coarse_too:
            raise ValueError("also_filter_triples cannot be combined with filtered='all' (one wider level per pass)")
        wider = state.filter_indices.get([*known, *inputs.also_filter_triples], device, stride)
        return wider, state.filter_indices.get(known, device, stride)
    if options.coarse_too:  # the pass filters coarsely and marks the exact filter's pairs among those
        coarse, exact = state.filter_indices.get_each(known, device, (stride, 1))
        return coarse, exact
    return state.filter_indices.get(known, device, stride), None


def model_signature(inputs: CheckedInputs, precision: MatmulPrecision = "exact") -> ScoreSignature | None:
    """What the model of ``inputs`` scores (kgeval._engine.identity.score_signature), scored as the evaluation scores
    it: in evaluation mode, under ``torch.inference_mode`` and the evaluation's matmul ``precision``. Where results
    are reused or combined across calls and ranks, this identifies the model beside its weight digest. kgeval's
    warnings about the model and its context are quieted for the probe (:func:`kgeval.exceptions.quieted`): the
    evaluation it accompanies gives them once."""
    with (
        quieted(Warning),
        caller_rng_restored(),
        evaluation_mode(inputs.model.model, watch=False),  # the evaluation beside it watches the model's state
        torch.inference_mode(),
        exact_arithmetic(precision),
    ):
        return score_signature(inputs)


def _declared_shards(inputs: CheckedInputs) -> dict[Target, tuple[int, int] | None]:
    """The candidate shard this rank's model declares for each entity side (None: none), when its form has a shard
    method; empty when it has none (kgeval._engine.sharding)."""
    if not inputs.model.declares_shard:
        return {}
    form = inputs.model.form
    served = getattr(form, "kgeval_targets", ("head", "tail"))
    return {
        target: declared_shard(form, target, inputs.num_entities) for target in ("head", "tail") if target in served
    }


def together(run: RunSettings) -> CollectiveCheck:
    """A block an entry point runs between two calls of :func:`rank` (a forecasting model's hook revealing a time):
    under torch.distributed every rank raises together when one fails inside it, none waits in the next collective
    for a rank that left."""
    return CollectiveCheck(resolve_group(run.distributed, run.process_group))


def _check_sharded(
    shards: dict[Target, CandidateShard], inputs: CheckedInputs, options: RankOptions, progress_path: Any
) -> None:
    """ValueError for what a sharded candidate table cannot be evaluated with."""
    if not shards:
        return
    missing = [target for target in inputs.targets if target not in shards]
    problems = []
    if missing:
        problems.append(f"the targets {missing} have no shard (every ranked side must be sharded)")
    if not options.fast_path or inputs.score_fn is not None:
        problems.append("a sharded model is scored through its query/candidate form only (fast_path=True, no "
                        "score_fn)")  # fmt: skip
    if progress_path is not None:
        problems.append("progress_path is not supported with sharded candidates")
    if problems:
        raise ValueError(f"cannot evaluate this sharded candidate table: {'; '.join(problems)}")


def _progress(
    run: RunSettings,
    options: RankOptions,
    inputs: CheckedInputs,
    task_index: torch.Tensor,
    group: Any,
    signature: ScoreSignature | None = None,
) -> EvaluationProgress:
    """The progress of this evaluation (this rank's file under torch.distributed), read back if saved: a file of
    another model (weights, or ``signature``: what it scores, computed here when not given) is started over."""
    identity = fingerprint(
        **inputs.identity(),
        evaluated_rows=task_index,
        model=model_fingerprint(inputs.model.model),
        mode=getattr(inputs.model.view, "mode", None),  # an inductive model's graph
        view=view_settings(inputs.model.view, inputs.model.model),  # a temporal view's inverse relations, ...
        evaluator_options=(options.filtered, options.ks, options.keep_records, options.fast_path,
                           options.matmul_precision, options.filter_relation_stride),
    )  # fmt: skip
    path = run.progress_path
    assert path is not None
    if group is not None:
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        identity["rank"] = (rank, world_size)
        path = rank_file(path, rank, world_size)
    signature = signature if signature is not None else model_signature(inputs, options.matmul_precision)
    return EvaluationProgress(path, identity, run.save_every, model_settings(inputs.model.model), signature)


def _synchronized(ranked: dict[Target, SideRanks], group: Any) -> dict[Target, SideRanks]:
    """Every rank's accumulators merged, on every rank (a distributed evaluation of shared-out tasks)."""
    merged = {}
    for name in ("ranked", "raw", "coarse"):
        held = {target: getattr(side, name) for target, side in ranked.items() if getattr(side, name) is not None}
        merged[name] = synchronize(held, group) if held else {}
    return {target: SideRanks(merged["ranked"][target], merged["raw"].get(target), merged["coarse"].get(target))
            for target in ranked}  # fmt: skip


@dataclass
class _Sides:
    """One evaluation's sides, ranked one target after another (this rank's tasks ``task_index``)."""

    inputs: CheckedInputs
    options: RankOptions
    state: EngineState
    index: FilterIndex | None
    task_index: torch.Tensor
    shards: dict[Target, CandidateShard]
    group: Any
    #: with two filter levels (:func:`_filter_indices`): the narrower one, ``index`` being the wider one
    fine_index: FilterIndex | None = None

    def rank_all(
        self, progress_settings: Mapping[str, Any], resume: EvaluationProgress | None, checks: FormChecks
    ) -> dict:
        """Every side's ranks; ``checks``: this evaluation's fast-path and stability verdicts and warnings."""
        total = len(self.inputs.targets) * self.task_index.numel()
        with tqdm(**{"total": total, **progress_settings}) as progress:
            observer = Observer(progress, self.options.raw_too)
            return {target: self._rank_target(target, observer, checks, resume) for target in self.inputs.targets}

    def _rank_target(
        self, target: Target, observer: Observer, checks: FormChecks, resume: EvaluationProgress | None
    ) -> SideRanks:
        """Rank every task of one side, one candidate set at a time (one set without type constraints, else one per
        constrained relation)."""
        inputs, task_index = self.inputs, self.task_index
        triples = inputs.triples[task_index]
        if triples.shape[0] == 0:  # a rank with no share of a distributed evaluation
            empty = MetricAccumulator(ks=self.options.ks, keep_records=self.options.keep_records).to(triples.device)
            return SideRanks(empty, empty.clone() if self.options.raw_too else None,
                             empty.clone() if self.fine_index is not None else None)  # fmt: skip
        side_index = self.index.side(target) if self.index is not None else None
        fine_index = self.fine_index.side(target) if self.fine_index is not None else None
        id_space = inputs.num_relations if target == "relation" else inputs.num_entities
        assert id_space is not None  # relations are ranked only for a model that counts them (kgeval._inputs)
        sharded = None
        if target in self.shards:  # shares the query vectors of the side's tasks (a collective)
            queries = triples[:, QUERY_COLUMNS[target]]
            sharded = ShardedSide(inputs.model.form, target, queries, self.shards[target], self.group)
        parts = []
        groups = candidate_groups(triples, target, inputs.candidate_ids, inputs.constraints)
        for number, (rows, candidate_ids) in enumerate(groups):
            group = triples if rows is None else triples[rows]
            if sharded is not None:
                tasks = _side_tasks(group, target, candidate_ids, id_space, side_index, fine_index)
                counts = sharded.rank(tasks, candidate_ids, id_space, self.state, inputs.sizes, observer)
            else:
                side_resume = resume.side((target, number)) if resume is not None else None
                counts = self._rank_group(group, target, candidate_ids, id_space, (side_index, fine_index), checks,
                                          observer.on(side_resume))  # fmt: skip
            parts.append((rows, counts))
        rows, counts = parts[0]
        if rows is not None:  # the tasks were ranked in groups: put them back in task order
            counts = SideCounts.scatter(parts, triples.shape[0])  # type: ignore[arg-type]
        _raise_on_nan(counts.counts.has_nan, triples, task_index, target)
        asked: dict[str, BatchCounts | None] = {"ranked": counts.counts}
        if self.fine_index is not None:  # the pass filtered with the wider level: the asked filter's are the fine
            asked = {"ranked": counts.fine, "coarse": counts.counts}
        if self.options.raw_too:
            asked["raw"] = counts.raw
        accumulators = {}
        for name, part in asked.items():
            assert part is not None  # the counts asked for exist
            accumulator = MetricAccumulator(ks=self.options.ks, keep_records=self.options.keep_records)
            optimistic, pessimistic, num_candidates = part.ranks()
            accumulator.update_unchecked(optimistic, pessimistic, num_candidates, triples, task_index)
            accumulators[name] = accumulator
        return SideRanks(**accumulators)

    def _rank_group(
        self,
        group: torch.Tensor,
        target: Target,
        candidate_ids: torch.Tensor | None,
        id_space: int,
        side_indices: tuple[SideIndex | None, SideIndex | None],
        checks: FormChecks,
        observer: Observer,
    ) -> SideCounts:
        """The counts of one candidate set's tasks (``group``: their triples), scored by the model's best scorer;
        ``side_indices``: the filter's side index and the finer filter's (None: none)."""
        inputs = self.inputs
        scorer = make_scorer(
            inputs.model,
            target,
            id_space,
            candidate_ids,
            fast_path=self.options.fast_path,
            score_fn=inputs.score_fn,
            probe_queries=group[:, QUERY_COLUMNS[target]],  # the probe reads a few (one per relation: more)
            checks=checks,
            batch_size=inputs.sizes.batch_size,  # the probes' calls within the sizes the caller asked for
            slice_size=inputs.sizes.slice_size,
        )
        tasks = _side_tasks(group, target, candidate_ids, id_space, *side_indices)
        requested = inputs.sizes
        sizes = sizes_for(scorer, tasks.queries, requested.batch_size, requested.slice_size, requested.memory_budget,
                          self.state.memory_probes, inputs.model.model)  # fmt: skip
        return rank_side(scorer, tasks, sizes, self.state, observer)


def _raise_on_nan(has_nan: torch.Tensor, triples: torch.Tensor, task_index: torch.Tensor, target: Target) -> None:
    """One host synchronisation after the loop: a NaN score is a model defect, reported with its triple."""
    if bool(has_nan.any()):
        first = int(has_nan.nonzero()[0, 0])
        raise ValueError(
            f"the model produced NaN scores for the {target} task of triple {triples[first].tolist()} "
            f"(row {int(task_index[first])} of mapped_triples); {int(has_nan.sum())} {target} task(s) affected"
        )


def _side_tasks(
    triples: torch.Tensor,
    target: Target,
    candidate_ids: torch.Tensor | None,
    id_space: int,
    side_index: SideIndex | None,
    fine_index: SideIndex | None = None,
) -> SideTasks:
    """The tasks of one side of ``triples`` (n, 3) among the candidates ``candidate_ids`` (None: all ids), filtered
    through ``side_index`` (None: raw) and counted under the finer ``fine_index`` too (None: not)."""
    position_of = candidate_positions(candidate_ids, id_space, triples.device)
    answers = triples[:, ANSWER_COLUMN[target]]
    return SideTasks(
        queries=triples[:, QUERY_COLUMNS[target]],
        true_positions=position_of[answers] if position_of is not None else answers,
        side_index=side_index,
        position_of=position_of,
        fine_index=fine_index,
    )
