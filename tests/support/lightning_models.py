"""A DistMult LightningModule for the Lightning tests (tests/integrations/test_lightning.py and the DDP script
tests/support/lightning_ddp.py); importing this module needs the ``lightning`` package."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch.nn import functional

from kgeval.models import DistMult


class LitDistMult(pl.LightningModule):
    """A DistMult in a LightningModule (as ``self.model``), trained by 1-N cross-entropy on tails; ``sign=-1``
    ascends the loss, so the model gets worse every epoch (a deterministic way to make EarlyStopping stop)."""

    def __init__(self, num_entities: int, num_relations: int, dim: int = 16, lr: float = 0.05, sign: float = 1.0):
        super().__init__()
        self.model = DistMult(num_entities, num_relations, dim=dim, seed=0)
        self.lr, self.sign = lr, sign

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        (hrt,) = batch
        return self.sign * functional.cross_entropy(self.model.score_t(hrt[:, :2]), hrt[:, 2])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        """A validation loop that computes nothing (the callback does the evaluation)."""

    def test_step(self, batch: Any, batch_idx: int) -> None:
        """A test loop that computes nothing (the callback does the evaluation)."""

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def loader(triples: torch.Tensor, batch_size: int = 256) -> torch.utils.data.DataLoader:
    """The triples in order, ``batch_size`` at a time, as one-tensor batches."""
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(triples), batch_size=batch_size, shuffle=False)
