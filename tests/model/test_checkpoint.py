"""Checkpoint save / rotation / corruption fallback / load_model, checked against the files on disk,
hashlib, and the original model's logits."""

import hashlib
import json
import logging

import pytest
import torch

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.training.checkpoint import (
    CheckpointError,
    clear_run,
    load_file,
    load_latest,
    load_model,
    save_checkpoint,
)

LOGGER = "model.training.checkpoint"


class NotAllowlisted:
    """A plain Python object: torch.save pickles it, torch.load(weights_only=True) must refuse it."""

    def __init__(self, value=1):
        self.value = value


def _state(step: int) -> dict:
    return {"model": {"w": torch.full((3, 4), float(step))}, "step": step}


def _save_four(run_dir, keep_last=2):
    return [save_checkpoint(run_dir, step, _state(step), keep_last=keep_last) for step in (10, 20, 30, 40)]


def _latest_json(run_dir) -> dict:
    return json.loads((run_dir / "latest").read_text())


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _assert_is_step(found, run_dir, step):
    assert found is not None
    path, state = found
    assert path == run_dir / f"ckpt-{step:08d}.pt"
    assert state["step"] == step
    assert torch.equal(state["model"]["w"], torch.full((3, 4), float(step)))


def test_keep_last_rotation_and_latest_pointer(tmp_path):
    paths = _save_four(tmp_path, keep_last=2)
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.pt")) == ["ckpt-00000030.pt", "ckpt-00000040.pt"]
    assert not paths[0].exists() and not paths[1].exists()
    latest = _latest_json(tmp_path)
    assert latest["file"] == "ckpt-00000040.pt" and latest["step"] == 40
    assert latest["sha256"] == _sha256(paths[3])
    assert {c["file"]: c["sha256"] for c in latest["checkpoints"]} == {p.name: _sha256(p) for p in paths[2:]}
    assert not list(tmp_path.glob(".*tmp*"))  # no temp files left behind


def test_load_latest_returns_newest(tmp_path):
    _save_four(tmp_path)
    _assert_is_step(load_latest(tmp_path), tmp_path, 40)


def test_load_latest_on_empty_or_missing_dir(tmp_path):
    assert load_latest(tmp_path) is None
    assert load_latest(tmp_path / "nope") is None


def test_truncated_newest_falls_back_with_warning(tmp_path, caplog):
    paths = _save_four(tmp_path)
    raw = paths[3].read_bytes()
    paths[3].write_bytes(raw[: len(raw) // 2])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        found = load_latest(tmp_path)
    _assert_is_step(found, tmp_path, 30)
    assert any(r.levelno == logging.WARNING and paths[3].name in r.getMessage() for r in caplog.records)


def test_flipped_bytes_detected_by_checksum_and_fallback(tmp_path, caplog):
    paths = _save_four(tmp_path)
    good_sha = _latest_json(tmp_path)["sha256"]
    raw = bytearray(paths[3].read_bytes())
    mid = len(raw) // 2
    raw[mid:mid + 8] = bytes(b ^ 0xFF for b in raw[mid:mid + 8])  # same length, different content
    paths[3].write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="checksum"):
        load_file(paths[3], sha256=good_sha)
    load_file(paths[2], sha256=_sha256(paths[2]))  # a good file with its right checksum loads
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        found = load_latest(tmp_path)
    _assert_is_step(found, tmp_path, 30)
    assert any("checksum" in r.getMessage() for r in caplog.records)


def test_missing_latest_scans_the_directory(tmp_path):
    _save_four(tmp_path)
    (tmp_path / "latest").unlink()
    _assert_is_step(load_latest(tmp_path), tmp_path, 40)


def test_unreadable_latest_scans_the_directory(tmp_path):
    _save_four(tmp_path)
    (tmp_path / "latest").write_text("{not json")
    _assert_is_step(load_latest(tmp_path), tmp_path, 40)


def test_newest_listed_but_deleted_falls_back(tmp_path, caplog):
    paths = _save_four(tmp_path)
    paths[3].unlink()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _assert_is_step(load_latest(tmp_path), tmp_path, 30)
    assert any("missing" in r.getMessage() for r in caplog.records)


def test_all_corrupt_is_an_error_not_a_fresh_start(tmp_path, caplog):
    paths = _save_four(tmp_path)
    for p in paths[2:]:
        p.write_bytes(p.read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(CheckpointError, match="--restart"):
        load_latest(tmp_path)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) >= 2


def test_all_corrupt_without_latest_is_an_error(tmp_path):
    paths = _save_four(tmp_path)
    (tmp_path / "latest").unlink()
    for p in paths[2:]:
        p.write_bytes(p.read_bytes()[:100])  # truncated zip: unreadable even without a checksum
    with pytest.raises(CheckpointError, match="none of its 2 checkpoint"):
        load_latest(tmp_path)


def test_clear_run_removes_the_training_state_only(tmp_path):
    _save_four(tmp_path)
    (tmp_path / "dcp").mkdir()
    (tmp_path / ".ckpt-00000050.pt.abc.tmp").write_bytes(b"half")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    clear_run(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "notes.txt"]
    assert load_latest(tmp_path) is None


def test_non_allowlisted_object_is_refused(tmp_path):
    path = tmp_path / "ckpt-00000001.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": NotAllowlisted(3)}, path)
    with pytest.raises(CheckpointError, match="(?i)weights.only") as refused:
        load_file(path)
    assert "\n" not in str(refused.value)  # one line naming the file, not torch's page of advice
    assert torch.load(path, weights_only=False)["extra"].value == 3  # the file itself is fine; only the policy refuses
    with pytest.raises(CheckpointError, match="none of its 1 checkpoint"):
        load_latest(tmp_path)  # and load_latest skips it rather than unpickling


def test_state_without_model_entry_is_refused(tmp_path):
    path = tmp_path / "ckpt-00000001.pt"
    torch.save({"step": 1}, path)
    with pytest.raises(CheckpointError, match="model"):
        load_file(path)


def test_load_model_rebuilds_identical_model(tmp_path):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=50, context_length=16, d_model=32, n_layers=1, n_heads=2)
    model = TransformerLM(cfg).eval()
    run_dir = tmp_path / "run"
    path = save_checkpoint(run_dir, 1, {"model": model.state_dict(), "model_config": cfg.to_dict(), "step": 1})
    tokens = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(tokens)
    for source in (run_dir, path):  # a run directory or one ckpt file
        torch.manual_seed(123)  # a different init, so equality means the weights were loaded
        loaded = load_model(source)
        assert isinstance(loaded, TransformerLM)
        assert not loaded.training
        assert loaded.cfg == cfg
        with torch.no_grad():
            assert torch.equal(loaded(tokens), expected)


def test_load_model_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "does-not-exist")
    (tmp_path / "empty-run").mkdir()
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "empty-run")


def test_a_checkpoint_half_written_by_a_killed_run_is_removed_by_the_next_save(tmp_path):
    stale = tmp_path / ".ckpt-00000400.pt.k1ll3d.tmp"  # atomic_open's temporary name, left by a SIGKILL mid-write
    stale.write_bytes(b"\0" * 4096)
    _save_four(tmp_path, keep_last=2)
    assert not stale.exists() and not list(tmp_path.glob(".*.tmp"))


def test_the_checkpoint_just_written_is_never_pruned_and_latest_names_it(tmp_path):
    save_checkpoint(tmp_path, 400, _state(400), keep_last=1)  # another, longer run's checkpoint
    path = save_checkpoint(tmp_path, 3, _state(3), keep_last=1)
    assert path.exists() and _latest_json(tmp_path)["file"] == path.name
    assert (tmp_path / _latest_json(tmp_path)["file"]).exists()
