"""Run by tests/test_resume.py: ``python resume_worker.py PROGRESS_PATH OUT_JSON [--slow]`` evaluates UMLS test
(filtered and raw, DistMult d=16 seed 0, through score_t / score_h, batches of 64) with a progress file saved after
every batch, printing ``rows N`` (query rows scored so far) after each model call; ``--slow`` sleeps in each call so
the parent can kill it mid-evaluation. Writes the results JSON and the rows this run scored to OUT_JSON."""

from __future__ import annotations

import json
import sys
import time

import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult


class CountedScores:
    """A model's score_t / score_h, counting the query rows scored (and sleeping in each call when slow)."""

    def __init__(self, model: DistMult, slow: bool) -> None:
        self.model, self.slow, self.rows = model, slow, 0
        self.num_entities, self.num_relations = model.num_entities, model.num_relations

    def state_dict(self) -> dict:
        return self.model.state_dict()

    def _scored(self, scores: torch.Tensor) -> torch.Tensor:
        self.rows += scores.shape[0]
        print(f"rows {self.rows}", flush=True)
        if self.slow:
            time.sleep(0.2)
        return scores

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self._scored(self.model.score_t(hr_batch))

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self._scored(self.model.score_h(rt_batch))


def evaluate(progress_path: str | None, slow: bool = False):
    ds = load_shipped_dataset("umls")
    model = CountedScores(DistMult(ds.num_entities, ds.num_relations, dim=16, seed=0), slow)
    results = RankBasedEvaluator(filtered="both", kernel="eager").evaluate(
        model, ds.test, additional_filter_triples=[ds.train, ds.valid], use_tqdm=False, batch_size=64,
        progress_path=progress_path, save_every=0,
    )  # fmt: skip
    return results, model.rows


if __name__ == "__main__":
    results, rows = evaluate(sys.argv[1], slow="--slow" in sys.argv)
    with open(sys.argv[2], "w") as out:
        json.dump({"results": results.to_json(), "rows": rows}, out)
