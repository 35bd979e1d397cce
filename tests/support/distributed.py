"""Multi-process gloo runs for tests/test_distributed.py: named scenarios, a spawned worker, a launcher.

Every scenario is a function of the rank returning a picklable value (usually RankBasedMetricResults). The same
function called with ``rank=None`` gives the single-process expectation (``distributed=False``). Processes talk
over loopback TCP only: the launching process hosts the group's store on a socket it bound before starting them
(:class:`Rendezvous`), and the ranks connect to it; collectives time out after 30 s, and the launcher kills the
workers after a deadline, so a bug shows up as a failure, never as a hanging test run.
"""

from __future__ import annotations

import contextlib
import datetime
import faulthandler
import os
import pickle
import runpy
import signal
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from torch import distributed as dist

from kgeval import RankBasedEvaluator
from kgeval._engine.distributed import ENTRY_TIMEOUT_VARIABLE, all_gather_uneven
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval.adapters import scoring_view
from kgeval.models import DistMult, TransE
from kgeval.records import RankRecords
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph
from tests.support.sharded import SHARDED_SCENARIOS
from tests.support.sharded_parameters import SHARDED_PARAMETER_SCENARIOS

# -- graphs and models (deterministic: every process builds the same ones) ------------------------------------


def tie_heavy_case() -> tuple[Any, torch.Tensor]:
    """11 triples (uneven over 2 and 3 ranks) with duplicates, ties, ±inf and overlapping filter triples."""
    graph = random_graph(1, 12, 3, 11, 30, duplicate_fraction=0.2)
    return graph, quantised_table(1, 12, 3, levels=3, inf_fraction=0.1)


def nan_case() -> tuple[torch.Tensor, torch.Tensor]:
    """6 triples with distinct (h, r) and (r, t) keys; the true score of triple 2 is NaN (rank 1's share of 3)."""
    triples = torch.tensor([(0, 0, 1), (1, 0, 2), (2, 1, 3), (3, 0, 4), (4, 1, 5), (5, 0, 0)])
    table = quantised_table(2, 6, 2, levels=3)
    table[2, 1, 3] = float("nan")
    return triples, table


def _evaluate(rank: int | None, evaluator: RankBasedEvaluator, model: Any, triples: torch.Tensor, **kwargs: Any):
    """Distributed (auto) on a rank; single-process when ``rank`` is None."""
    distributed = None if rank is not None else False
    return evaluator.evaluate(model, triples, use_tqdm=False, distributed=distributed, **kwargs)


# -- scenarios ------------------------------------------------------------------------------------------------


def ties(rank: int | None) -> Any:
    graph, table = tie_heavy_case()
    evaluator = RankBasedEvaluator(ks=(1, 3, 10), batch_size=3, slice_size=5)
    return _evaluate(rank, evaluator, TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples)


def sums_only(rank: int | None) -> Any:
    graph, table = tie_heavy_case()
    evaluator = RankBasedEvaluator(ks=(1, 3, 10), keep_records=False)
    return _evaluate(rank, evaluator, TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples)


def restricted_tail(rank: int | None) -> Any:
    graph, table = tie_heavy_case()
    return _evaluate(
        rank,
        RankBasedEvaluator(ks=(1, 3)),  # 9 candidates: hits@10 and its adjusted forms would be undefined
        FullScoreTableModel(table),
        graph.triples,
        additional_filter_triples=graph.filter_triples[0],
        restrict_entities_to=[0, 1, 2, 3, 4, 5, 6, 8, 10],
        drop_outside_restriction=True,
        targets=("tail",),
    )


def gemm(rank: int | None) -> Any:
    graph, _ = tie_heavy_case()
    model = DistMult(12, 3, dim=8, seed=0)
    return _evaluate(rank, RankBasedEvaluator(), model, graph.triples, additional_filter_triples=graph.filter_triples)


def _in_ddp(rank: int | None, model: torch.nn.Module) -> Any:
    """``model`` inside DistributedDataParallel on a rank (unwrapped in the single process); on a rank, checks that
    kgeval scores it through the unwrapped model's fast path."""
    if rank is None:
        return model
    wrapped = torch.nn.parallel.DistributedDataParallel(model)
    view = scoring_view(wrapped)
    queries = torch.tensor([[0, 0], [1, 1]])
    kind = type(make_scorer(wrapped, "tail", view.num_entities, None, probe_queries=queries))
    if kind is not GemmScorer:
        raise AssertionError(f"a DDP-wrapped {type(model).__name__} is scored by {kind.__name__}, not its fast path")
    return wrapped


def ddp_transe(rank: int | None) -> Any:
    """kgeval's TransE ("l2" fast path) inside DistributedDataParallel: the single-process ranks of the model."""
    graph, _ = tie_heavy_case()
    model = _in_ddp(rank, TransE(12, 3, dim=8, seed=0))
    return _evaluate(rank, RankBasedEvaluator(), model, graph.triples, additional_filter_triples=graph.filter_triples)


def ddp_pykeen_inverse(rank: int | None) -> Any:
    """A PyKEEN DistMult trained with inverse triples inside DistributedDataParallel (its relation ids mapped,
    heads scored through the inverse relations, as unwrapped)."""
    from pykeen.models import DistMult as PyKEENDistMult
    from pykeen.triples import TriplesFactory

    graph, _ = tie_heavy_case()
    factory = TriplesFactory(torch.cat(graph.filter_triples), {str(i): i for i in range(12)},
                             {str(i): i for i in range(3)}, create_inverse_triples=True)  # fmt: skip
    model = _in_ddp(rank, PyKEENDistMult(triples_factory=factory, embedding_dim=8, random_seed=0))
    return _evaluate(rank, RankBasedEvaluator(), model, graph.triples, additional_filter_triples=graph.filter_triples)


def relations(rank: int | None) -> Any:
    """Head, tail and relation prediction together."""
    graph, table = tie_heavy_case()
    evaluator = RankBasedEvaluator(ks=(1, 3), batch_size=2, filtered="both")
    return _evaluate(rank, evaluator, TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples,
                     targets=("head", "tail", "relation"))  # fmt: skip


def few_triples(rank: int | None) -> Any:
    """2 triples over 3 ranks: rank 2 ranks nothing."""
    graph, table = tie_heavy_case()
    known = graph.filter_triples
    return _evaluate(rank, RankBasedEvaluator(), TableModel(table), graph.triples[:2], additional_filter_triples=known)


def disagree(rank: int | None) -> Any:
    """Rank 1 evaluates other triples (one row changed)."""
    graph, table = tie_heavy_case()
    triples = graph.triples.clone()
    if rank == 1:
        triples[4, 2] = (triples[4, 2] + 1) % 12
    known = graph.filter_triples
    return _evaluate(rank, RankBasedEvaluator(), TableModel(table), triples, additional_filter_triples=known)


def invalid_on_one_rank(rank: int | None) -> Any:
    """Rank 2 (and the single process) passes a triple with an entity id out of range."""
    graph, table = tie_heavy_case()
    triples = graph.triples.clone()
    if rank in (2, None):
        triples[0, 0] = 99
    known = graph.filter_triples
    return _evaluate(rank, RankBasedEvaluator(), TableModel(table), triples, additional_filter_triples=known)


class InterruptedModel(TableModel):
    """Raises KeyboardInterrupt when scoring tails: a Ctrl-C arriving in the middle of the loop."""

    def score_t(self, hr_batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        raise KeyboardInterrupt


def interrupted_on_one_rank(rank: int | None) -> Any:
    """Rank 1 is interrupted (KeyboardInterrupt) and its training loop catches it and stays alive: the other
    ranks must fail at once instead of waiting in a collective until the process group times out."""
    graph, table = tie_heavy_case()
    model = InterruptedModel(table) if rank == 1 else TableModel(table)
    started = time.monotonic()
    try:
        outcome = _outcome(lambda: _evaluate(rank, RankBasedEvaluator(), model, graph.triples))
    except KeyboardInterrupt:
        outcome = ("interrupted",)
    return (*outcome, time.monotonic() - started)


def observe_fails_on_one_rank(rank: int | None) -> Any:
    """A forecasting model's kgeval_observe raises on rank 1 only, between two time steps, and that rank's training
    loop stays alive: the other rank must fail at once, not wait in the next step's collective until the process
    group times out (the hook ran outside every collective check)."""
    from kgeval import TemporalRankBasedEvaluator
    from tests.test_temporal import Forecaster, random_quadruples, tie_heavy_table

    class FailingForecaster(Forecaster):
        def kgeval_observe(self, quadruples: torch.Tensor) -> None:
            if rank == 1:
                raise RuntimeError("the forecasting hook failed")
            super().kgeval_observe(quadruples)

    model, quadruples = FailingForecaster(tie_heavy_table(28)), random_quadruples(26, 60)
    started = time.monotonic()
    outcome = _outcome(lambda: TemporalRankBasedEvaluator().evaluate(model, quadruples, observe="single-step",
                                                                      use_tqdm=False))  # fmt: skip
    return (*outcome, time.monotonic() - started)


def nan_in_one_share(rank: int | None) -> Any:
    triples, table = nan_case()
    return _evaluate(rank, RankBasedEvaluator(), TableModel(table), triples)


def opt_out(rank: int | None) -> Any:
    """distributed=False inside an initialised group: every rank evaluates everything alone."""
    graph, table = tie_heavy_case()
    return RankBasedEvaluator().evaluate(
        TableModel(table),
        graph.triples,
        additional_filter_triples=graph.filter_triples,
        use_tqdm=False,
        distributed=False,
    )


def subgroup(rank: int | None) -> Any:
    """Ranks 0 and 1 share the work in a sub-group; rank 2, outside it, cannot use it and evaluates alone."""
    graph, table = tie_heavy_case()
    group = dist.new_group([0, 1]) if rank is not None else None  # collective: every rank calls new_group

    def run(**options: Any) -> Any:
        return RankBasedEvaluator().evaluate(
            TableModel(table), graph.triples, additional_filter_triples=graph.filter_triples, use_tqdm=False, **options
        )

    if rank is None or rank == 2:
        outcome = {"alone": run(distributed=False)}
        if rank == 2:
            outcome["in_group"] = _outcome(lambda: run(process_group=group))
        return outcome
    return {"alone": run(process_group=group)}


def rank_zero_alone(rank: int | None) -> Any:
    """``if rank == 0: evaluator.evaluate(...)`` with the default distributed=None, the entry check's timeout set to
    2 s: rank 0's outcome and how long it took (the other ranks evaluate nothing)."""
    graph, table = tie_heavy_case()
    if rank is None:
        return _evaluate(rank, RankBasedEvaluator(), TableModel(table), graph.triples)
    if rank != 0:
        return ("skipped",)
    os.environ[ENTRY_TIMEOUT_VARIABLE] = "2"
    started = time.monotonic()
    try:
        outcome = _outcome(lambda: _evaluate(rank, RankBasedEvaluator(), TableModel(table), graph.triples))
    finally:
        del os.environ[ENTRY_TIMEOUT_VARIABLE]
    return (*outcome, time.monotonic() - started)


def models_differ(rank: int | None) -> Any:
    """Each rank holds its own model (an EMA kept on one rank, a hyperparameter trial per rank): a DistMult seeded
    with the rank. Every rank calling evaluate: (the outcome, the outcome with distributed=False, this rank's own
    single-process results). Before, both ranks returned the merged ranks of neither model."""
    graph = random_graph(3, 30, 4, 40, 60)
    model = DistMult(30, 4, dim=8, seed=0 if rank is None else rank)
    kwargs = {"additional_filter_triples": graph.filter_triples, "use_tqdm": False}
    own = RankBasedEvaluator().evaluate(model, graph.triples, distributed=False, **kwargs)
    if rank is None:
        return own
    together = _outcome(lambda: RankBasedEvaluator().evaluate(model, graph.triples, **kwargs))
    per_rank = _outcome(lambda: RankBasedEvaluator().evaluate(model, graph.triples, distributed=False, **kwargs))
    return together, per_rank, own


def uneven_gather(rank: int | None) -> Any:
    """all_gather_uneven of (rank * 2, 2) tensors: sizes 0, 2, 4."""
    if rank is None:
        return [torch.full((r * 2, 2), r) for r in range(3)]
    return all_gather_uneven(torch.full((rank * 2, 2), rank), dist.group.WORLD)


class Crash(Exception):
    """A simulated failure (a preempted machine, an out-of-memory kill) in the middle of an evaluation."""


class CrashingScores:
    """score_t / score_h of a DistMult that raise once ``fail_after`` query rows were scored (None: never)."""

    def __init__(self, model: DistMult, fail_after: int | None = None) -> None:
        self.model, self.fail_after, self.rows = model, fail_after, 0
        self.num_entities, self.num_relations = model.num_entities, model.num_relations

    def state_dict(self) -> dict:
        return self.model.state_dict()

    def _score(self, method: Callable[[torch.Tensor], torch.Tensor], batch: torch.Tensor) -> torch.Tensor:
        if self.fail_after is not None and self.rows + batch.shape[0] > self.fail_after:
            raise Crash(f"simulated failure after {self.rows} rows")
        self.rows += batch.shape[0]
        return method(batch)

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._score(self.model.score_t, hr_batch)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._score(self.model.score_h, rt_batch)


def resumed(rank: int | None) -> Any:
    """Every rank fails after 6 query rows of its share (and the 4 rows of the probe of what its model scores, which
    every distributed evaluation scores first) with a progress file, then a second call resumes: its results, (an
    uninterrupted distributed run's results, rows scored by the failed call, by the resuming one and by the
    uninterrupted one, whether this rank's progress file existed between the calls and after the second). The
    fast path's probes are off (``check_fast_path=False``): the counts are the ranking's and the identity probe's."""
    graph = random_graph(3, 30, 4, 40, 60)
    model = DistMult(30, 4, dim=8, seed=0)
    evaluator = RankBasedEvaluator(batch_size=4, check_fast_path=False)
    kwargs = {"additional_filter_triples": graph.filter_triples, "use_tqdm": False}
    if rank is None:
        return evaluator.evaluate(CrashingScores(model, None), graph.triples, distributed=False, **kwargs), None
    folder = Path(os.environ["KGEVAL_TEST_PROGRESS_DIR"])
    path = folder / "progress.pt"
    own_file = folder / f"progress.pt.rank{rank}-of-{dist.get_world_size()}"
    first = CrashingScores(model, 4 + 6)
    with contextlib.suppress(Crash):
        evaluator.evaluate(first, graph.triples, progress_path=path, save_every=0, **kwargs)
    between = own_file.exists()
    second = CrashingScores(model, None)
    results = evaluator.evaluate(second, graph.triples, progress_path=path, save_every=0, **kwargs)
    whole = CrashingScores(model, None)
    uninterrupted = evaluator.evaluate(whole, graph.triples, **kwargs)
    return results, (uninterrupted, first.rows, second.rows, whole.rows, between, own_file.exists())


SCENARIOS: dict[str, Callable[[int | None], Any]] = {
    fn.__name__: fn
    for fn in (
        ties,
        sums_only,
        restricted_tail,
        gemm,
        ddp_transe,
        ddp_pykeen_inverse,
        relations,
        few_triples,
        disagree,
        invalid_on_one_rank,
        observe_fails_on_one_rank,
        nan_in_one_share,
        interrupted_on_one_rank,
        opt_out,
        subgroup,
        uneven_gather,
        rank_zero_alone,
        resumed,
        models_differ,
    )
}
SCENARIOS["after_errors"] = ties  # the group still works after the error scenarios


def after_alone(rank: int | None) -> Any:
    """``ties`` evaluated by every rank once rank 0's evaluation alone (the scenario before) was abandoned: the ranks
    meet in a barrier first, as a training loop's next collective would (rank 1 skipped that evaluation)."""
    if rank is not None:
        dist.barrier()
    return ties(rank)


SCENARIOS["after_alone"] = after_alone
SCENARIOS.update(SHARDED_SCENARIOS)
SCENARIOS.update(SHARDED_PARAMETER_SCENARIOS)


def assert_same_results(got: Any, expected: Any) -> None:
    """Metrics equal to float precision (NaN == NaN), ranks and every other record column exactly."""
    assert got.ks == expected.ks
    assert list(got.data) == list(expected.data)
    keys = list(expected.data)
    np.testing.assert_allclose([got.data[k] for k in keys], [expected.data[k] for k in keys], rtol=1e-12, atol=0)
    assert (got.records is None) == (expected.records is None)
    if expected.records is not None:
        for column in RankRecords.column_names():
            np.testing.assert_array_equal(got.records[column], expected.records[column], err_msg=column)


def ok_values(per_rank: list[dict], name: str) -> list:
    """Each rank's value of scenario ``name``, after asserting that it succeeded on every rank."""
    for rank, outcome in enumerate(per_rank):
        assert outcome[name][0] == "ok", f"rank {rank}: {outcome[name]}"
    return [outcome[name][1] for outcome in per_rank]


# -- processes ------------------------------------------------------------------------------------------------


#: how long a rank waits for the store and in a collective before it fails
TIMEOUT = datetime.timedelta(seconds=30)

#: fork shares the parent's imports (a spawned process spends seconds importing torch); spawn where fork is missing,
#: and for CUDA, which a forked child of an initialised parent cannot use
START_METHOD = "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def _outcome(run: Callable[[], Any]) -> tuple[str, ...] | tuple[str, Any]:
    """("ok", value) or ("error", exception type name, message)."""
    try:
        return ("ok", run())
    except Exception as error:
        return ("error", type(error).__name__, str(error))


#: the signal on which a rank prints every thread's stack (to its stderr) before a timed-out launch kills it
STACKS_SIGNAL = getattr(signal, "SIGUSR1", None)


def _stacks_on_signal() -> None:
    """Let :func:`launch` ask this rank for its threads' stacks (where it hangs) before killing it."""
    if STACKS_SIGNAL is not None:
        faulthandler.register(STACKS_SIGNAL, all_threads=True)


def _worker(rank: int, world_size: int, port: int, out_dir: str, names: list[str], backend: str = "gloo") -> None:
    _stacks_on_signal()
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)  # NCCL: one GPU per rank
    store = dist.TCPStore("127.0.0.1", port, world_size, is_master=False, timeout=TIMEOUT)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=TIMEOUT)
    try:
        outcomes = {name: _outcome(lambda name=name: SCENARIOS[name](rank)) for name in names}
    except BaseException:  # pragma: no cover - reported through the file
        outcomes = {"worker": ("error", "crash", traceback.format_exc())}
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as handle:
        pickle.dump(outcomes, handle)


#: the lock that lets one process group of the test run start at a time (:func:`one_group_at_a_time`)
GROUP_LOCK = Path(tempfile.gettempdir()) / "kgeval-tests-process-group.lock"
#: how long a launcher waits for that lock before it starts its group anyway (never a hanging test run)
GROUP_LOCK_WAIT_S = 600.0


@contextlib.contextmanager
def one_group_at_a_time() -> Iterator[None]:
    """Hold :data:`GROUP_LOCK` for the block: pytest-xdist workers (and other test runs on this machine) run their
    process groups one after another. Two groups at once put five or six processes on a 2-core machine, and the
    tests' deadlines (the launcher's, the collectives' 30 s, the error-propagation checks) were set for one group;
    the other workers go on with single-process tests meanwhile. Where the lock cannot be taken (no fcntl, a file
    another user owns), the block runs without it."""
    try:
        import fcntl

        handle = open(GROUP_LOCK, "a")  # noqa: SIM115 - held for the block
    except (ImportError, OSError):
        yield
        return
    with handle:
        stop = time.monotonic() + GROUP_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > stop:
                    break  # run unlocked rather than wait on a stuck holder
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Rendezvous:
    """The store of a process group, hosted by the launching process; every rank connects to it as a client (as to
    torchrun's agent: ``TORCHELASTIC_USE_AGENT_STORE``).

    Its socket is bound (port 0: the kernel picks a free port) and listening from the start, so no other process
    can take the port. (Asking the kernel for a free port, closing it and letting rank 0 bind it later left a gap in
    which a process of another pytest-xdist worker -- gloo's ranks open ephemeral ports -- could take it: rank 0
    then failed to bind, or the ranks met another group's store.) The store's server, a thread, starts with
    :meth:`serve` once the ranks are forked (a child forked beside a running thread may inherit a lock that thread
    held); a rank that connects sooner waits in the socket's backlog."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self._listener: socket.socket | None = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._store: Any = None

    def serve(self) -> None:
        """Start the store's server on the socket (which it then owns)."""
        if self._listener is None:
            return
        listener, self._listener = self._listener, None
        fd = listener.detach()
        try:
            self._store = dist.TCPStore(
                "127.0.0.1", self.port, self.world_size, is_master=True, timeout=TIMEOUT, wait_for_workers=False,
                master_listen_fd=fd,
            )  # fmt: skip
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        self._store = None


@contextlib.contextmanager
def rendezvous(world_size: int) -> Iterator[Rendezvous]:
    """A :class:`Rendezvous` for a group of ``world_size`` ranks, with the process-group lock held
    (:func:`one_group_at_a_time`) and the store closed afterwards."""
    with one_group_at_a_time():
        group = Rendezvous(world_size)
        try:
            yield group
        finally:
            group.close()


def run_scenarios(
    world_size: int, names: list[str], out_dir: Path, deadline: float = 180.0, backend: str = "gloo"
) -> list[dict]:
    """Run the named scenarios on ``world_size`` processes of a ``backend`` group ("gloo"; "nccl": one GPU per
    rank); each rank's {name: outcome}."""
    with rendezvous(world_size) as group:
        args = (world_size, group.port, str(out_dir), names, backend)
        return launch(_worker, args, world_size, out_dir, deadline, started=group.serve)


def _example_worker(rank: int, world_size: int, port: int, out_dir: str, path: str, argv: list[str]) -> None:
    """Run an example script's ``main(argv)`` as torchrun would: rendezvous through environment variables."""
    _stacks_on_signal()
    torch.set_num_threads(1)
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_USE_AGENT_STORE="True",  # the launcher hosts the store (Rendezvous), as torchrun's agent does
    )
    namespace = runpy.run_path(path, run_name="example")
    outcome = _outcome(lambda: namespace["main"](argv))
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as handle:
        pickle.dump(outcome, handle)


def run_example(world_size: int, path: Path, argv: list[str], out_dir: Path, deadline: float = 180.0) -> list:
    """Each rank's outcome of ``main(argv)`` of the example script at ``path``, under ``world_size`` processes."""
    with rendezvous(world_size) as group:
        args = (world_size, group.port, str(out_dir), str(path), argv)
        return launch(_example_worker, args, world_size, out_dir, deadline, started=group.serve)


def _dump_stacks(pids: list[int]) -> None:
    """Ask each process for its threads' stacks (:func:`_stacks_on_signal`) and give them a moment to print."""
    if STACKS_SIGNAL is None:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, STACKS_SIGNAL)
    time.sleep(2.0)


def launch(
    worker: Callable[..., None],
    args: tuple,
    world_size: int,
    out_dir: Path,
    deadline: float,
    started: Callable[[], None] | None = None,
) -> list:
    """Start ``worker(rank, *args)`` on ``world_size`` processes, call ``started()`` (once they all exist), wait
    (killing them after ``deadline`` s), and return what each rank pickled to ``out_dir/rank<i>.pkl``."""
    start_method = "spawn" if torch.cuda.is_initialized() or "nccl" in args else START_METHOD
    context = mp.start_processes(worker, args=args, nprocs=world_size, join=False, start_method=start_method)
    stop = time.monotonic() + deadline
    try:
        if started is not None:
            started()
        while not context.join(timeout=1.0):
            if time.monotonic() > stop:
                alive = [process.pid for process in context.processes if process.is_alive()]
                _dump_stacks(alive)
                raise TimeoutError(
                    f"{worker.__name__} did not finish within {deadline} s; ranks' processes still alive: {alive} "
                    "(their threads' stacks are in the captured stderr)"
                )
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
    outcomes = []
    for rank in range(world_size):
        with open(out_dir / f"rank{rank}.pkl", "rb") as handle:
            outcomes.append(pickle.load(handle))
    return outcomes
