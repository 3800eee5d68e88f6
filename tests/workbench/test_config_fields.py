"""Each setting is declared once: a field shared by two config classes comes from a base they share.

A subclass may restate a field its base declares to give it another default (workbench.params.override); that
is not a second declaration. Independent knobs of different components that happen to share a generic name
(a dedup seed and a trainer seed) are not the same setting: GENERIC lists them. KNOWN lists the duplicates still
to be removed, with the reason; the test fails on any new duplicate and on a KNOWN entry that is gone (so the
list only shrinks).
"""

import dataclasses
import importlib
import re
from pathlib import Path

import alignment.config
from model.training.run_settings import RunSettings
from workbench import import_names
from workbench.params import override

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tuple(p for p in import_names.PACKAGES if p != "bench")

# generic names of unrelated per-component knobs (each component's own seed, output folder, workers, engine, ...;
# model: an alignment loop's starting checkpoint, the LM trainer's ModelConfig)
GENERIC = {"seed", "out_dir", "metrics", "device", "data", "workers", "lr", "loss", "steps", "eval_interval",
           "grad_clip", "warmup_steps", "weight_decay", "grad_accum", "engine", "model"}
# still declared twice; remove an entry when its duplicate goes
KNOWN = {
    "batch_size": "three units: SFT sequences, DPO pairs, RFT kept responses per step (and the LM trainer's "
                  "sequences); one name per unit would change params.yaml keys",
}


def config_classes() -> list[type]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            names = re.findall(r"^class (\w*Config)\b", path.read_text(encoding="utf-8"), re.M)
            if names:
                module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
                found += [getattr(module, n) for n in names if dataclasses.is_dataclass(getattr(module, n))]
    return found


def declaring_root(cls: type, name: str) -> type:
    """The highest dataclass in cls's MRO that declares `name` (a restated default in a subclass is not a new one)."""
    return [k for k in cls.__mro__ if dataclasses.is_dataclass(k) and name in k.__dict__.get("__annotations__", {})][-1]


def duplicates(classes: list[type]) -> dict[str, list[str]]:
    roots: dict[str, set[type]] = {}
    for cls in classes:
        for f in dataclasses.fields(cls):
            roots.setdefault(f.name, set()).add(declaring_root(cls, f.name))
    return {name: sorted(f"{r.__module__}.{r.__qualname__}" for r in rs) for name, rs in roots.items()
            if len(rs) > 1 and name not in GENERIC}


def test_no_setting_is_declared_twice_outside_a_shared_base():
    found = duplicates(config_classes())
    new = {name: where for name, where in found.items() if name not in KNOWN}
    assert not new, f"declared in more than one config class outside a shared base: {new}"
    gone = sorted(set(KNOWN) - set(found))
    assert not gone, f"no longer duplicated: remove from KNOWN: {gone}"


def test_the_alignment_trainers_share_their_settings():
    """The 24 settings every trainer has are declared once, in alignment.config.LoopConfig or, for those the report
    shares too, its base TaskConfig, or, for those model.train shares, RunSettings, with help text."""
    from alignment.dpo import DPOConfig
    from alignment.grpo import GRPOConfig
    from alignment.rft import RFTConfig
    from alignment.sft import SFTConfig

    shared = [f.name for f in dataclasses.fields(alignment.config.LoopConfig)]
    assert len(shared) == 24
    for cls in (SFTConfig, DPOConfig, GRPOConfig, RFTConfig):
        for name in shared:
            assert declaring_root(cls, name) in (alignment.config.LoopConfig, alignment.config.TaskConfig,
                                                 RunSettings), \
                (cls.__name__, name)
        assert all(f.metadata.get("help") for f in dataclasses.fields(cls)), cls.__name__
        assert cls(model="m", **({"token_budget": 1} if cls is RFTConfig else {})).task == "digits"


def test_a_planted_duplicate_is_found_and_an_override_is_not():
    @dataclasses.dataclass(frozen=True)
    class PlantedConfig:
        group_size: int = 8

    @dataclasses.dataclass(frozen=True)
    class OverridingConfig(alignment.config.RolloutConfig):
        group_size: int = override(alignment.config.RolloutConfig, "group_size", 4)

    found = duplicates([alignment.config.RolloutConfig, PlantedConfig, OverridingConfig])
    assert list(found) == ["group_size"] and len(found["group_size"]) == 2


def test_every_train_key_of_the_params_files_is_one_train_setting():
    """params.yaml's train section (a profile's merged onto it) names TrainConfig settings, the model's nested
    under `model:`; no name is a setting at both levels (context_length is the model's only)."""
    from model.training.train_config import TrainConfig
    from workbench.params import field_names, flatten, read_params

    settings = field_names(TrainConfig)
    leaves = [name.rsplit(".", 1)[-1] for name in settings]
    assert len(set(leaves)) == len(leaves), sorted({n for n in leaves if leaves.count(n) > 1})
    for name in ("params.yaml", "params-gpu.yaml"):
        section = read_params(ROOT / name)["train"]
        assert set(flatten(section, settings)) <= set(settings), name
        assert "model.d_model" in settings and "context_length" in section["model"]


def test_the_alignment_clis_share_one_token_limit_that_fits_the_default_model():
    """sft, dpo, grpo, rft, the report and evaluate (generated tasks) once defaulted to 64, 24, 1024, 64, 32 and 64
    new tokens; GRPO's 1024 on the default 128-token model scored 0.000 without a word. One default now, and it
    leaves room for the default digits prompt in the default context."""
    from alignment.dpo import DPOConfig
    from alignment.evaluate import build_parser
    from alignment.grpo import GRPOConfig
    from alignment.report import ReportConfig
    from alignment.rft import RFTConfig
    from alignment.sft import SFTConfig
    from model.core.config import ModelConfig

    defaults = {cls.__name__: {f.name: f.default for f in dataclasses.fields(cls)}["max_new_tokens"]
                for cls in (SFTConfig, DPOConfig, GRPOConfig, RFTConfig, ReportConfig)}
    assert set(defaults.values()) == {alignment.config.TaskConfig.max_new_tokens}, defaults
    assert str(alignment.config.TaskConfig.max_new_tokens) in build_parser().format_help().replace("\n", " ")
    prompt = "User: 4 7 + 3 8\nAssistant: <think>"  # the short template's digits prompt
    assert len(prompt.encode()) + 1 + alignment.config.TaskConfig.max_new_tokens <= ModelConfig().context_length
