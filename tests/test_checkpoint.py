"""Tests of kgeval.checkpoint: saving and loading the built-in models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kgeval.checkpoint import CHECKPOINT_FORMAT, load_checkpoint, save_checkpoint
from kgeval.models import DistMult


def test_round_trip(tmp_path: Path) -> None:
    model = DistMult(7, 3, dim=5, seed=1)
    path = tmp_path / "model.pt"
    save_checkpoint(model, path)
    document = torch.load(path, weights_only=True)
    assert {k: v for k, v in document.items() if k != "state_dict"} == {
        "format": CHECKPOINT_FORMAT,
        "model": "DistMult",
        "num_entities": 7,
        "num_relations": 3,
        "dim": 5,
    }
    loaded = load_checkpoint(path, num_entities=7, num_relations=3)
    assert isinstance(loaded, DistMult)
    assert not loaded.training
    hr_batch, rt_batch = torch.tensor([[0, 1], [6, 2]]), torch.tensor([[2, 0], [1, 6]])
    assert torch.equal(loaded.score_t(hr_batch), model.score_t(hr_batch))
    assert torch.equal(loaded.score_h(rt_batch), model.score_h(rt_batch))


def test_error_on_a_foreign_model(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"^save_checkpoint takes a built-in model \(DistMult\), got Linear$"):
        save_checkpoint(torch.nn.Linear(2, 2), tmp_path / "x.pt")


def test_error_on_a_file_that_is_no_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    message = f"{str(path)!r} is not a kgeval checkpoint (expected format 'kgeval.checkpoint/1')"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        load_checkpoint(path)


def test_error_on_a_file_torch_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "text.pt"
    path.write_text("not a checkpoint")
    with pytest.raises(ValueError, match=f"^{re.escape(repr(str(path)))} is not a kgeval checkpoint: "):
        load_checkpoint(path)


def test_error_on_an_unknown_model_name(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "model": "TransE"}, path)
    with pytest.raises(ValueError, match=r"^checkpoint model must be one of \['DistMult'\], got 'TransE'$"):
        load_checkpoint(path)


def test_error_on_sizes_that_do_not_match_the_dataset(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    save_checkpoint(DistMult(7, 3, dim=5), path)
    with pytest.raises(ValueError, match=r"^the checkpoint has num_relations=3, the dataset 4$"):
        load_checkpoint(path, num_entities=7, num_relations=4)
