"""Tests of kgeval.models.checkpoint: saving and loading the built-in models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TransE
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
        "options": {},
    }
    loaded = load_checkpoint(path, num_entities=7, num_relations=3)
    assert isinstance(loaded, DistMult)
    assert not loaded.training
    hr_batch, rt_batch = torch.tensor([[0, 1], [6, 2]]), torch.tensor([[2, 0], [1, 6]])
    assert torch.equal(loaded.score_t(hr_batch), model.score_t(hr_batch))
    assert torch.equal(loaded.score_h(rt_batch), model.score_h(rt_batch))


@pytest.mark.parametrize(
    "model",
    [ComplEx(7, 3, dim=4, seed=1), RESCAL(7, 3, dim=4, seed=1), TransE(7, 3, dim=5, p=1, seed=1),
     TransE(7, 3, dim=5, p=2, seed=1), RotatE(7, 3, dim=4, seed=1)],
    ids=["ComplEx", "RESCAL", "TransE-L1", "TransE-L2", "RotatE"],
)  # fmt: skip
def test_every_built_in_model_round_trips(tmp_path: Path, model: torch.nn.Module) -> None:
    """The reported case: save_checkpoint(TransE) failed with "takes a built-in model (DistMult), got TransE"."""
    save_checkpoint(model, tmp_path / "model.pt")
    loaded = load_checkpoint(tmp_path / "model.pt", num_entities=7, num_relations=3)
    assert type(loaded) is type(model) and getattr(loaded, "p", None) == getattr(model, "p", None)
    batch = torch.tensor([[0, 1], [6, 2]])
    assert torch.equal(loaded.score_t(batch), model.score_t(batch))
    assert torch.equal(loaded.score_h(batch.flip(1)), model.score_h(batch.flip(1)))


def test_error_on_a_foreign_model(tmp_path: Path) -> None:
    accepted = ("kgeval.models.DistMult, kgeval.models.ComplEx, kgeval.models.RESCAL, kgeval.models.TransE, "
                "kgeval.models.RotatE, kgeval.models.TNTComplEx")  # fmt: skip
    expected = rf"^save_checkpoint takes one of kgeval's built-in models \({accepted}\), got torch.nn.modules.linear."
    with pytest.raises(TypeError, match=expected + r"Linear: a checkpoint stores no code"):
        save_checkpoint(torch.nn.Linear(2, 2), tmp_path / "x.pt")


def test_a_subclass_of_a_built_in_model_is_named_apart_from_it(tmp_path: Path) -> None:
    """Never "takes DistMult, got DistMult": the refused class is named with its module."""

    class DistMult(torch.nn.Module):  # a user's class of the same name
        pass

    with pytest.raises(TypeError, match=r"got tests\.models\.test_checkpoint\..*DistMult: a checkpoint"):
        save_checkpoint(DistMult(), tmp_path / "x.pt")


@pytest.mark.parametrize("content", ["object", "module"])
def test_a_pickled_object_is_refused_in_plain_words(tmp_path: Path, content: str) -> None:
    """The reported case: torch's message came through with terminal escape codes and, cut at its first line, a
    promise of "two options" it did not list."""
    path = tmp_path / "foreign.pt"
    torch.save(DistMult(3, 2, dim=4) if content == "module" else {"model": Path("x")}, path)
    with pytest.raises(ValueError) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert "\x1b" not in message and "two options" not in message
    start = f"{path!s}' is not a kgeval checkpoint: it holds a Python object ("
    assert message.startswith("'" + start)
    assert "rather than plain tensors. kgeval reads the files of kgeval.models.checkpoint.save_checkpoint" in message


def test_error_on_a_file_that_is_no_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    message = f"{str(path)!r} is not a kgeval checkpoint (no format 'kgeval.models.checkpoint/1' entry). kgeval reads"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        load_checkpoint(path)


def test_error_on_a_file_torch_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "text.pt"
    path.write_text("not a checkpoint")
    with pytest.raises(ValueError, match=f"^{re.escape(repr(str(path)))} is not a kgeval checkpoint: "):
        load_checkpoint(path)


def test_error_on_an_unknown_model_name(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "model": "TransH"}, path)
    with pytest.raises(ValueError, match=r"the checkpoint's model 'TransH' is none of kgeval's built-in models \("):
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


def test_a_temporal_model_round_trips_with_its_times(tmp_path: Path) -> None:
    """TNTComplEx: num_times in the header, the boolean trained_times buffer kept (untrained times score apart)."""
    from kgeval.models import TNTComplEx

    model = TNTComplEx(7, 3, 5, dim=4, seed=2).eval()
    model.trained_times[:3] = True
    save_checkpoint(model, tmp_path / "tnt.pt")
    loaded = load_checkpoint(tmp_path / "tnt.pt", num_entities=7, num_relations=3)
    assert loaded.num_times == 5 and loaded.trained_times.tolist() == [True] * 3 + [False] * 2
    batch = torch.tensor([[0, 1, 0], [6, 2, 4]])
    assert torch.equal(loaded.score_t(batch), model.score_t(batch))
    document = torch.load(tmp_path / "tnt.pt", weights_only=True)
    document["state_dict"]["trained_times"] = document["state_dict"]["trained_times"].float()
    torch.save(document, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"trained_times .* \(boolean\)"):
        load_checkpoint(tmp_path / "bad.pt")
