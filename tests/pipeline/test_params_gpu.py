"""params-gpu.yaml (the H100 profile) merged onto params.yaml stays a valid drop-in for it: same sections, and every
section the model, scaling and alignment CLIs read is accepted by their config classes."""

import dataclasses
import importlib
from pathlib import Path

import pytest
import yaml

from alignment.report import ReportConfig
from model.training.train_config import TrainConfig
from scaling.sweep import SweepConfig, sweep_section
from workbench.params import load_section, read_params

ROOT = Path(__file__).resolve().parents[2]
CPU = yaml.safe_load((ROOT / "params.yaml").read_text())
GPU = read_params(ROOT / "params-gpu.yaml")  # merged onto params.yaml, its base


def test_same_sections_as_params_yaml():
    assert list(GPU) == list(CPU)


def test_pipeline_sections_keep_every_key():
    """The data stages' CLIs take the same keys; only values change for the GPU profile."""
    for section in ("sample", "extract", "filter", "classify", "dedup", "report", "tokenizer", "shards"):
        assert set(GPU[section]) == set(CPU[section]), section


def test_train_and_sweep_sections_are_valid_train_configs():
    train = TrainConfig.from_dict(GPU["train"])
    assert (train.device, train.model.kernels) == ("cuda", "auto")  # per op the winner (lmw_kernels/selection.json)
    TrainConfig.from_dict({**GPU["sweep"]["train"], "data": "x", "out_dir": "y"})


def test_scaling_sections_are_valid():
    sweep = SweepConfig.from_dict(sweep_section(ROOT / "params-gpu.yaml"))  # its runs inherit the GPU train section
    assert sweep.train["device"] == "cuda" and sweep.train["schedule"] == "wsd"
    assert sweep.train["model"] == {"context_length": 512, "kernels": "auto"}  # the shape is the sweep's
    assert set(GPU["scaling_fit"]) == set(CPU["scaling_fit"])


@pytest.mark.parametrize("section,module,cls", [("sft", "alignment.sft", "SFTConfig"),
                                                ("dpo", "alignment.dpo", "DPOConfig"),
                                                ("grpo", "alignment.grpo", "GRPOConfig"),
                                                ("rft", "alignment.rft", "RFTConfig")])
def test_alignment_sections_are_valid_configs(section, module, cls):
    """Each trainer's section over the shared `alignment:` section (workbench.params.SECTION_BASES) it inherits."""
    config_cls = getattr(importlib.import_module(module), cls)
    known = {f.name for f in dataclasses.fields(config_cls)}
    assert set(GPU[section]) <= known, sorted(set(GPU[section]) - known)
    assert set(GPU["alignment"]) <= known, sorted(set(GPU["alignment"]) - known)
    config = config_cls(**load_section(section, ROOT / "params-gpu.yaml", known=config_cls))
    assert config.task in ("gsm8k", "none") and config.device == "cuda"
    assert config.tokenizer == "/models/Qwen2.5-Math-1.5B" and config.max_new_tokens == 1024  # inherited


def test_alignment_report_section_is_valid():
    known = {f.name for f in dataclasses.fields(ReportConfig)}
    assert set(GPU["alignment_report"]) <= known
    report = load_section("alignment_report", ROOT / "params-gpu.yaml", known=ReportConfig)
    assert (report["task"], report["template"], report["device"]) == ("gsm8k", "r1_zero", "cuda")  # inherited
    assert "n_test" not in report  # the shared keys the report does not take are not inherited
    assert set(GPU["alignment_report"]["models"]) == set(CPU["alignment_report"]["models"])


def _same_as_base(profile: dict, base: dict, path: str = "") -> list[str]:
    """Keys of a profile whose value the base already has (a profile states only what differs)."""
    same = []
    for key, value in profile.items():
        if key == "base" and not path:
            continue
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            same += _same_as_base(value, base[key], f"{path}{key}.")
        elif key in base and base[key] == value:
            same.append(path + key)
        elif key not in base and value is None:
            same.append(path + key + " (null for a key the base lacks)")
    return same


@pytest.mark.parametrize("name", ["params-gpu.yaml", "params-cc.yaml"])
def test_profiles_state_only_their_differences(name):
    raw = yaml.safe_load((ROOT / name).read_text())
    assert raw["base"] == "params.yaml"
    assert _same_as_base(raw, CPU) == []
