"""Run by tests/integrations/test_lightning.py: ``python lightning_ddp.py OUT_DIR`` fits a DistMult LightningModule
for 2 epochs on Nations with Trainer(strategy="ddp", devices=2) on CPU (gloo; Lightning starts the second process
by running this script again) and a KGEvalCallback. Each rank writes ``rank{r}.json`` (the process group's size
during the evaluation, the logged values of the last one, the tasks it ranked); rank 0 also writes the final
weights (``state.pt``) and the last evaluation's rank records (``records.npz``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import distributed as dist

import kgeval._engine.front
from kgeval.datasets import load_shipped_dataset
from kgeval.integrations.lightning import KGEvalCallback
from tests.support.lightning_models import LitDistMult, loader


class WorldSize(pl.Callback):
    """Records the process group's size at the end of each training epoch (where the evaluation ran)."""

    size = 0

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.size = dist.get_world_size() if dist.is_initialized() else 1


SHARES: list[tuple[int, int]] = []  # (tasks of the evaluation, tasks of this rank's share), per call of shard
_shard = kgeval._engine.front.shard


def recorded_shard(task_index: torch.Tensor, group: Any) -> torch.Tensor:
    share = _shard(task_index, group)
    SHARES.append((len(task_index), len(share)))
    return share


def main(out: Path) -> None:
    kgeval._engine.front.shard = recorded_shard  # see which share of the tasks this rank ranks
    torch.set_num_threads(1)
    ds = load_shipped_dataset("nations")
    callback = KGEvalCallback(ds.valid, additional_filter_triples=[ds.train, ds.valid])
    world = WorldSize()
    module = LitDistMult(ds.num_entities, ds.num_relations)
    trainer = pl.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        callbacks=[callback, world],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, train_dataloaders=loader(ds.train))
    last = callback.history[-1]
    report = {"world_size": world.size, "logged": last.logged, "evaluations": len(callback.history), "shares": SHARES}
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(report))
    if trainer.global_rank == 0:
        torch.save(module.model.state_dict(), out / "state.pt")
        np.savez(out / "records.npz", **last.results.records.columns())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
