"""RankBasedEvaluator: the public entry point. Check the arguments (``kgeval._inputs.check_evaluation_inputs``),
call the engine's front door (``kgeval._engine.rank``, which ranks every side on the model's device, in its
evaluation mode, under ``torch.inference_mode()``), build the results from each side's accumulators
(docs/design.md, The data flow).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import torch

from kgeval import _checks
from kgeval._engine import MeasuredBatch, RankOptions, RunSettings, model_signature, new_state, rank
from kgeval._fingerprints import ScoreSignature
from kgeval._inputs import check_evaluation_inputs
from kgeval.constraints import TypeConstraints
from kgeval.results import RankBasedMetricResults
from kgeval.typing import MATMUL_PRECISIONS, InductiveMode, KernelChoice, MatmulPrecision, Target

__all__ = ["FilterMode", "RankBasedEvaluator", "RankingSettings"]

#: the ranks a filtered evaluation reports: filtered only, or filtered plus raw from the same pass
FilterMode = bool | Literal["both"]


class RankingSettings:
    """How an evaluator of full rankings asks the engine to rank (the parameters of the same names of
    :class:`RankBasedEvaluator`, checked), and its engine state (kernel chooser, remembered batch sizes, filter
    indices) from one call to the next. Shared by :class:`RankBasedEvaluator` and
    :class:`kgeval.TemporalRankBasedEvaluator`."""

    def __init__(
        self,
        ks: Sequence[int] = (1, 3, 5, 10),
        batch_size: int | None = None,
        slice_size: int | None = None,
        keep_records: bool = True,
        fast_path: bool = True,
        kernel: KernelChoice = "auto",
        matmul_precision: MatmulPrecision = "exact",
        check_fast_path: bool = True,
        memory_budget: int | None = None,
    ) -> None:
        self.ks = _checks.check_ks(ks)
        self.memory_budget = _checks.check_positive_int(memory_budget, "memory_budget", allow_none=True)
        self.batch_size = _checks.check_positive_int(batch_size, "batch_size", allow_none=True)
        self.slice_size = _checks.check_positive_int(slice_size, "slice_size", allow_none=True)
        self.keep_records = bool(keep_records)
        self.fast_path = bool(fast_path)
        self.check_fast_path = bool(check_fast_path)
        if matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"matmul_precision must be one of {MATMUL_PRECISIONS}, got {matmul_precision!r}")
        self.matmul_precision: MatmulPrecision = matmul_precision
        self._state = new_state(kernel)  # what persists from one call to the next

    @property
    def kernel(self) -> KernelChoice:
        """The requested counting kernel ("auto", "eager", "numba" or "triton")."""
        return self._state.kernels.requested  # type: ignore[return-value]

    @property
    def device_path(self) -> bool:
        """Whether this evaluator runs the path kgeval takes on an accelerator whatever the device (default False):
        the filtered pairs kept in one list and masked per tile (no read of the device's values), the eager kernel
        that never reads the host for ``kernel="eager"``, one tile per batch and slice (``batch_size`` then bounds
        the memory), no CPU-only step. Set True to count on CPU tensors what an evaluation on a GPU costs the host
        (docs/performance.md, What an evaluation costs the host); the ranks are the same either way."""
        return self._state.settings.device_path

    @device_path.setter
    def device_path(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"device_path must be True or False, got {value!r}")
        self._state.settings = dataclasses.replace(self._state.settings, device_path=value)

    @property
    def pair_layout(self) -> Literal["sorted", "masked"] | None:
        """How the filtered pairs of a batch are laid out (default None: the device's choice -- "sorted" on CPU,
        "masked" on an accelerator and with :attr:`device_path`). "sorted": grouped by tile with host-known
        offsets, the known answers of a query shared by many tasks kept once (query groups); "masked": one list
        masked per tile, never read by the host. Ranks are the same either way; set it to count either layout's
        host cost (docs/performance.md, What an evaluation costs the host)."""
        return self._state.settings.layout  # type: ignore[return-value]

    @pair_layout.setter
    def pair_layout(self, value: Literal["sorted", "masked"] | None) -> None:
        if value not in (None, "sorted", "masked"):
            raise ValueError(f"pair_layout must be None, 'sorted' or 'masked', got {value!r}")
        self._state.settings = dataclasses.replace(self._state.settings, layout=value)

    @property
    def measured_batches(self) -> dict[tuple[str | None, str, str], MeasuredBatch]:
        """The batch (and slice) sizes this evaluator derived from the measured memory of a model scored through its own
        methods (evaluated without ``batch_size``; a graph-conditioned model bound by
        :func:`kgeval.adapters.graph.on_graphs` among them), by (mode, side, device), the latest of each: the model's
        memory per call, per query, per candidate and per (query, candidate) pair, the budget and the sizes chosen
        (kgeval._engine.sizes.MeasuredBatch; also logged at INFO level by the logger ``kgeval.sizes``). Empty when
        none was measured."""
        return dict(self._state.memory_probes.batches)

    def _rank_options(self, filtered: FilterMode | Literal["all"], filter_relation_stride: int = 1) -> RankOptions:
        """What one pass of an evaluation asks of the engine, filtered as ``filtered`` ("all": filtered, raw and
        filtered with relations compared as ``r // filter_relation_stride``, kgeval._engine.RankOptions)."""
        return RankOptions(filtered, self.ks, self.keep_records, self.fast_path, self.check_fast_path,
                           self.matmul_precision, filter_relation_stride=filter_relation_stride)  # fmt: skip


class RankBasedEvaluator(RankingSettings):
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
        memory is halved and retried; for a model scored through its own methods (no fast path), lowered where its
        memory per call -- measured once per model, side and device by a few small calls -- would exceed the memory
        budget (reported in ``measured_batches``; a graph-conditioned model bound by ``on_graphs`` is called for
        whole rows).
    slice_size : int, optional
        Candidates scored per model call / GEMM. None: all when they fit the memory budget, otherwise slices.
    memory_budget : int, optional
        Bytes one batch may use (its scores with the counting kernel's temporaries: half; its filtered pairs: a
        quarter; answer slices' scores kept between two passes: a quarter) when kgeval chooses the batch, slice and
        tile sizes (``batch_size`` / ``slice_size`` None; given ones win). None: on CUDA the smaller of 2 GiB and a
        quarter of the free memory (``torch.cuda.mem_get_info``) -- room for a training loop's model and optimizer
        beside it; on CPU cache-sized tiles (8-32 MiB of scores; a smaller budget shrinks them), and for a
        graph-conditioned model's batches the smaller of 2 GiB and a quarter of the available memory. The model, the
        evaluated triples, the filter index and the per-task results (tens of bytes per task) come on top. A
        positive integer, else a ValueError.
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
        with a warning elsewhere): for the "dot" and "l2" fast paths in float32 (and in float16 / bfloat16 for a
        model that has no scoring method besides its form: a half-precision model with ``score_t`` / ``score_h`` is
        scored through them), one kernel multiplies queries by candidates and counts without writing a score (IEEE
        float32 products, the true and filtered scores picked by the same arithmetic); for other models one
        program per task reads its row once;
        it first passes a one-off probe on the device (exact counts, picked scores tying with the tiles'), or
        kgeval counts eagerly with a warning;
        "auto" on a CPU counts eagerly and switches to numba once this evaluator has counted (or is about to
        count) 10**9 scores, or at once if numba is already loaded; on CUDA it counts eagerly, the faster kernel
        where both were measured (an H200: eager 12.9x the bare cuBLAS GEMM, "triton" 17.8x), so "triton" runs
        only when asked for by name. The ranks are the same with
        every kernel, up to the rounding of the scores (the fused kernel accumulates float16 / bfloat16 products
        in float32 like cuBLAS, in its own order).
    matmul_precision : {"exact", "inherit"}, default="exact"
        "exact": inside ``evaluate`` the model computes in its own precision, whatever context it is called from:
        autocast regions are switched off (Lightning's ``precision="bf16-mixed"``), float32 matrix
        multiplications, convolutions and RNNs run in IEEE float32 even when the process enabled TF32 or a reduced
        precision (``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``,
        ``torch.set_float32_matmul_precision``, ``fp32_precision``), half-precision GEMMs accumulate in float32 and
        denormals are kept; every setting is restored afterwards, and one that cannot be set aside is named in a
        :class:`kgeval.exceptions.PrecisionWarning` (kgeval._engine.precision). "inherit": keep the caller's
        context -- faster on GPUs with TF32, but scores, and so ranks, are then only approximate (two candidates
        closer than the reduced precision can swap or tie).

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
        memory_budget: int | None = None,
    ) -> None:
        if filtered not in (True, False, "both"):
            raise ValueError(f"filtered must be True, False or 'both', got {filtered!r}")
        self.filtered: FilterMode = filtered if filtered == "both" else bool(filtered)
        super().__init__(ks, batch_size, slice_size, keep_records, fast_path, kernel, matmul_precision,
                         check_fast_path, memory_budget)  # fmt: skip

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
        mode: InductiveMode | None = None,
        also_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
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
            accepting ``tails=`` / ``heads=`` candidate ids) or scores whole triples (``score_hrt``, ``forward(h, r,
            t)``, ``score_fn=``); a query/candidate form beside them is its fast path (the protocols of
            :mod:`kgeval.protocol`), checked against those methods -- a form alone ranks a sharded table only.
            A PyKEEN model is scored as PyKEEN predicts (inverse relations included; see
            :mod:`kgeval.adapters.pykeen`). A model inside ``torch.compile``,
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
            must call ``evaluate`` with the same inputs and the same model: a rank whose model scores a probe of
            two queries per side otherwise than rank 0's -- an EMA kept on one rank, a trial per rank -- makes every
            rank raise a ValueError naming it; see ``kgeval._engine.distributed``). False: evaluate
            everything in this process. True: like None, but an error when no process group is initialised.
            A query/candidate model whose ranks each hold a shard of the entity table (declared by
            ``kgeval_candidate_shard(target) -> (start, stop)``, ``kgeval._engine.sharding``) is evaluated the
            other way round: every rank ranks every task against its shard and the integer counts are summed, with
            the ranks of a single process holding the whole table.
        process_group : torch.distributed.ProcessGroup, optional
            The group to share the work in; default the world group.
        progress_path : str or path-like, optional
            Make the evaluation resumable: the counts of the batches done are saved to this file (atomically: a
            temporary file renamed over it) at most every ``save_every`` seconds; a later call with the same model
            weights, triples, filter, candidates and options that finds the file ranks only the tasks left and ends
            with exactly the results of an uninterrupted run. A file of another evaluation (other triples, filter or
            options) is a ValueError naming what differs; a file of another model -- other weights, or a model that
            scores a probe of two queries per side otherwise (:meth:`score_signature`: a retrained model whose
            state no weight digest sees) -- is started over with a :class:`kgeval.exceptions.ResumeWarning`; never a
            mixed result. The file is removed once the evaluation succeeds. Under
            ``torch.distributed`` each rank keeps ``{progress_path}.rank{r}-of-{w}``. See
            ``kgeval._engine.resume``.
        save_every : float, default=60.0
            Seconds between saves of ``progress_path`` (0: after every batch).
        mode : {"training", "validation", "testing"}, optional
            Inductive link prediction: the graph whose entities are the candidates, for a model that scores per
            graph (a PyKEEN inductive model, PyKEEN's modes; any model of :mod:`kgeval.adapters.inductive`'s
            protocol). ``mapped_triples``, the filter triples and the entity restriction are then in that graph's
            entity ids (an id beyond its entities is an error naming the row). None: transductive (an inductive
            PyKEEN model is then refused, naming the modes). See docs/inductive.md.
        also_filter_triples : LongTensor of shape (m, 3), or a sequence of them, optional
            A second, wider filter level counted in the same pass: the results' ``also_filtered`` holds the ranks
            filtered by ``mapped_triples``, ``additional_filter_triples`` and these (LibKGE's ``filter_with_test``:
            validation triples filtered by train + valid, and by train + valid + test as well). Each task's two
            filtered ranks come from the same scores. Needs a filtered evaluation (``filtered`` True or "both").

        Returns
        -------
        RankBasedMetricResults
            With ``filtered="both"``, the filtered results whose ``raw`` attribute holds the raw ones; with
            ``also_filter_triples``, ``also_filtered`` holds the wider filter level's.
        """
        del do_time_consuming_checks  # accepted for PyKEEN: kgeval's checks are cheap and always run

        def prepare() -> Any:  # called by the engine inside its collective check: every rank fails together
            return check_evaluation_inputs(
                model,
                mapped_triples,
                additional_filter_triples=additional_filter_triples,
                num_entities=num_entities,
                restrict_entities_to=restrict_entities_to,
                targets=targets,
                batch_size=self.batch_size if batch_size is None else batch_size,
                slice_size=self.slice_size if slice_size is None else slice_size,
                memory_budget=self.memory_budget,
                drop_outside_restriction=bool(drop_outside_restriction) or not pre_filtered_triples,
                restrict_relations_to=restrict_relations_to,
                score_fn=score_fn,
                type_constraints=type_constraints,
                device=device,
                mode=mode,
                also_filter_triples=also_filter_triples,
            )

        run = RunSettings(RunSettings.progress_bar(use_tqdm, tqdm_kwargs), distributed, process_group, progress_path,
                          save_every)  # fmt: skip
        sides = rank(prepare, self._rank_options(self.filtered), run, self._state)
        nested = {}
        for name, attribute in (("raw", "raw"), ("also_filtered", "coarse")):
            held = {target: getattr(side, attribute) for target, side in sides.items()}
            if all(accumulator is not None for accumulator in held.values()):
                nested[name] = RankBasedMetricResults.from_accumulators(held, self.ks)
        filtered = {target: side.ranked for target, side in sides.items()}
        return RankBasedMetricResults.from_accumulators(filtered, self.ks, **nested)

    def score_signature(
        self, model: Any, mapped_triples: torch.Tensor, **evaluate_kwargs: Any
    ) -> ScoreSignature | None:
        """What ``model`` scores, as kgeval identifies a model where it reuses or combines results (a resumed
        ``progress_path``, :func:`kgeval.many.evaluate_many`'s ``results_dir``, the ranks of a distributed
        evaluation): a summary of its own scores (its methods, never a fast path) of the first two triples' queries
        of ``mapped_triples``, each side, scored as :meth:`evaluate` would score them (eval mode, inference mode,
        this evaluator's matmul precision). Two signatures compare with ``a.difference(b)`` (None: the same scores,
        up to float rounding). ``evaluate_kwargs``: :meth:`evaluate`'s keywords (those that do not choose the
        model's scores -- sizes, progress, distribution -- are ignored). None for a sharded candidate table."""
        keep = {
            "additional_filter_triples",
            "num_entities",
            "restrict_entities_to",
            "targets",
            "drop_outside_restriction",
            "restrict_relations_to",
            "score_fn",
            "type_constraints",
            "device",
            "mode",
        }
        kwargs = {key: value for key, value in evaluate_kwargs.items() if key in keep}
        if evaluate_kwargs.get("pre_filtered_triples") is False:
            kwargs["drop_outside_restriction"] = True
        inputs = check_evaluation_inputs(model, mapped_triples, **kwargs)
        return model_signature(inputs, self.matmul_precision)
