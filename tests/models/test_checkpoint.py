"""Tests of kgeval.models.checkpoint: saving and loading the built-in models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kgeval.models import DistMult
from kgeval.models.checkpoint import CHECKPOINT_FORMAT, load_checkpoint, save_checkpoint, weights_only_loader_is_safe


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
    message = f"{str(path)!r} is not a kgeval checkpoint (expected format 'kgeval.models.checkpoint/1')"
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


def _forged(tmp_path: Path, **header) -> Path:
    """A checkpoint whose header says one thing and whose tensors another."""
    path = tmp_path / "forged.pt"
    model = DistMult(7, 3, dim=5)
    document = {"format": CHECKPOINT_FORMAT, "model": "DistMult", "num_entities": 7, "num_relations": 3, "dim": 5}
    document.update(header, state_dict=header.pop("state_dict", model.state_dict()))
    torch.save(document, path)
    return path


def test_a_header_cannot_make_kgeval_allocate_what_the_file_does_not_hold(tmp_path: Path) -> None:
    """The reported case: a 1,365-byte file with dim = 2**22 allocated 1.1 GB before its tensors were read."""
    path = _forged(tmp_path, dim=2**22)  # the old loader built a 7 x 2**22 model first (~170 MB)
    assert path.stat().st_size < 4096
    with pytest.raises(ValueError, match=r"checkpoint tensor \S+ has shape \(7, 5\) \(torch.float32\); its header"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"dim": 0}, "checkpoint dim must be a positive int, got 0"),
        ({"num_entities": True}, "checkpoint num_entities must be a positive int, got True"),
        ({"num_relations": "3"}, "checkpoint num_relations must be a positive int, got '3'"),
        ({"state_dict": {"entity_embeddings.weight": torch.zeros(7, 5)}}, "differ from the model's"),
        ({"state_dict": [1, 2]}, "state_dict must map names to tensors"),
    ],
)
def test_malformed_headers(tmp_path: Path, header: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_checkpoint(_forged(tmp_path, **header))


def test_old_torch_refuses_untrusted_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.pt"
    save_checkpoint(DistMult(7, 3, dim=5), path)
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    with pytest.raises(ValueError, match=r"torch 2\.5\.1's weights-only loader has published vulnerabilities"):
        load_checkpoint(path)
    assert load_checkpoint(path, trusted=True).dim == 5  # the user's own file


@pytest.mark.parametrize(
    ("version", "safe"), [("2.13.0+cpu", True), ("2.10.0", True), ("2.9.1", False), ("2.5.1", False), ("x", False)]
)
def test_weights_only_loader_versions(version: str, safe: bool) -> None:
    assert weights_only_loader_is_safe(version) is safe
