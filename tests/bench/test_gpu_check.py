"""`python -m bench.tools.gpu_check --dry-run` lists the GPU checks without running them (CPU: no CUDA needed)."""

import json

import numpy as np
import pytest
import torch

from bench.tools import gpu_check
from model.train import parse_args


def test_dry_run_lists_every_part(capsys, tmp_path):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path / "gc")]) == 0
    out = capsys.readouterr().out
    for needle in ("-m pytest tests/lmw_kernels", "-m bench.benchmarks.kernel_ops --quick",
                   "-m bench.benchmarks.model_train --device cuda "
                   "--compile", "torch.distributed.run --standalone --nproc_per_node 1 -m model.train",
                   "--parallel ddp", "--parallel fsdp", "--preset small", "--max-steps 40"):
        assert needle in out, needle
    assert not (tmp_path / "gc").exists()  # nothing written, nothing run


def test_only_skip_and_unknown_parts(capsys, tmp_path):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path), "--only", "ddp,fsdp", "--skip", "fsdp"]) == 0
    out = capsys.readouterr().out
    assert "--parallel ddp" in out and "--parallel fsdp" not in out and "-m pytest" not in out
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--dry-run", "--only", "nope"])
    assert exit_.value.code == 2
    assert "unknown part(s) nope" in capsys.readouterr().err


def test_train_commands_parse_with_model_train(tmp_path):
    """The flags given to model.train are its own: the params-gpu.yaml section, shortened, on our shards."""
    parts = {p.name: p for p in gpu_check.build_parts(tmp_path)}
    cfg, _ = parse_args(parts["train"].command[parts["train"].command.index("model.train") + 1:])
    section = gpu_check.read_train_section(gpu_check.PARAMS_GPU)
    assert (cfg.preset, cfg.model.context_length, cfg.batch_size) == (
        section["preset"], section["model"]["context_length"], section["batch_size"])
    assert cfg.compile and cfg.model.kernels == "auto"
    assert cfg.max_steps == gpu_check.TRAIN_OVERRIDES["max_steps"]
    assert cfg.data == str(tmp_path / "shards")
    for mode in ("ddp", "fsdp"):
        cmd = parts[mode].command
        cfg, _ = parse_args(cmd[cmd.index("model.train") + 1:])
        assert cfg.parallel == mode and cfg.device == "cuda"


def test_train_section_read_without_pyyaml(monkeypatch):
    with_yaml = gpu_check.read_train_section(gpu_check.PARAMS_GPU)
    monkeypatch.setattr(gpu_check, "yaml", None)
    assert gpu_check.read_train_section(gpu_check.PARAMS_GPU) == with_yaml


def test_shards_and_parsers(tmp_path):
    shards = gpu_check.write_shards(tmp_path / "shards", train_tokens=10_000)
    meta = json.loads((shards / "meta.json").read_text())
    assert meta["vocab_size"] == gpu_check.SHARD_VOCAB
    assert np.fromfile(shards / "train.bin", dtype=np.uint16).max() < gpu_check.SHARD_VOCAB
    part = gpu_check.Part("train", [], 1)
    (tmp_path / "train_metrics.json").write_text(json.dumps({"tokens_per_s": 1e5, "mfu": 0.41, "loss": 3.2}))
    numbers = gpu_check.parse_train("done: val loss 3.1000 (perplexity 22.2) vs x: 1 nats below, 60 steps in 95s",
                                    part, tmp_path)
    assert numbers == {"val_loss": 3.1, "steps": 60, "train_s": 95, "tokens_per_s": 1e5, "mfu": 0.41, "loss": 3.2}
    assert gpu_check.parse_pytest("....\n12 passed, 3 skipped in 40.1s", part, tmp_path)["passed"] == 12


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_refuses_to_run_without_cuda(capsys, tmp_path):
    assert gpu_check.main(["--out", str(tmp_path / "gc")]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_part_args_extend_one_command(capsys, tmp_path):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path), "--only", "pytest,kernel_ops",
                           "--part-args", "pytest=-k 'flash or tied'", "--part-args", "kernel_ops=--only e2e"]) == 0
    out = capsys.readouterr().out
    assert "-k 'flash or tied'" in out and "--only attention,rmsnorm,ce --only e2e" in out  # the later --only wins
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--dry-run", "--part-args", "nope=-x"])
    assert exit_.value.code == 2
    assert "--part-args 'nope=-x'" in capsys.readouterr().err


def test_train_section_without_pyyaml_merges_the_profile(monkeypatch):
    """The GPU image may lack PyYAML: the hand parser merges params-gpu.yaml onto params.yaml as read_params does."""
    with_yaml = gpu_check.read_train_section(gpu_check.PARAMS_GPU)
    monkeypatch.setattr(gpu_check, "yaml", None)
    assert gpu_check.read_train_section(gpu_check.PARAMS_GPU) == with_yaml
