"""Host synchronisations and host-device copies of one evaluation, counted on the device (CUDA).

    python benchmarks/syncs.py --dataset FB15k-237 --triples 1000
    python benchmarks/syncs.py --profile-dir OUT      # and a torch.profiler trace of the second evaluation

A seeded DistMult (d = 200) on the device, its test triples filtered by train + valid + test, evaluated twice by one
evaluator (as a training loop calls it every epoch). Under ``torch.cuda.set_sync_debug_mode("warn")`` every call
that synchronises the host with the device warns; the warnings of each evaluation are counted, and grouped by the
line of kgeval that caused them. The second evaluation's count is what every later epoch pays. On a machine without
CUDA the script says so and exits.
"""

from __future__ import annotations

import argparse
import collections
import sys
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import machine

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_dataset
from kgeval.models import DistMult


def kgeval_line(stack: list[traceback.FrameSummary]) -> str:
    """The innermost frame of kgeval's own code in a warning's stack."""
    for frame in reversed(stack):
        if "/kgeval/" in frame.filename:
            return f"{frame.filename.split('/kgeval/')[-1]}:{frame.lineno} ({frame.name})"
    return "outside kgeval"


def counted(run) -> collections.Counter:
    """The synchronisations ``run()`` made, by the kgeval line that made them."""
    sites: collections.Counter = collections.Counter()
    original = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None) -> None:
        if "synchroniz" in str(message):  # torch's sync-debug warnings only, not kgeval's own
            sites[kgeval_line(traceback.extract_stack()[:-1])] += 1
        else:
            original(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
            torch.cuda.synchronize()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            warnings.showwarning = original
    return sites


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--triples", type=int, default=1000)
    parser.add_argument("--kernel", default="auto")
    parser.add_argument("--profile-dir", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: host synchronisations are counted on a GPU")
        return
    print(machine())
    device = torch.device("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset(args.dataset)
    model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0).to(device)
    triples = data.test[: args.triples].to(device)
    known = [t.to(device) for t in (data.train, data.valid, data.test)]
    evaluator = RankBasedEvaluator(kernel=args.kernel)

    def evaluate() -> None:
        evaluator.evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)

    for name in ("first evaluation", "second evaluation (the evaluator reused)"):
        sites = counted(evaluate)
        print(f"{name}: {sum(sites.values())} host synchronisations")
        for site, count in sites.most_common(15):
            print(f"  {count:4d}  {site}")
    if args.profile_dir:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            evaluate()
            torch.cuda.synchronize()
        Path(args.profile_dir).mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(Path(args.profile_dir) / "evaluation_trace.json"))
        table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=30)
        (Path(args.profile_dir) / "evaluation_profile.txt").write_text(table)
        print(f"profile written to {args.profile_dir}")


if __name__ == "__main__":
    main()
