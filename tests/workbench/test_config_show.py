"""python -m lmw_cli.config show: a setting's value and where it comes from (default < params.yaml < profile)."""

from pathlib import Path

import yaml

from lmw_cli import config
from workbench.params import SECTIONS

ROOT = Path(__file__).resolve().parents[2]


def test_every_params_section_has_its_cli():
    sections = list(yaml.safe_load((ROOT / "params.yaml").read_text()))
    assert sections == list(config.SECTION_CLIS)
    assert set(SECTIONS) == set(config.SECTION_CLIS)  # the sections workbench checks a params file against


def test_layers_in_order_of_precedence(tmp_path):
    (tmp_path / "params.yaml").write_text("train: {lr: 0.006, model: {d_model: 64, n_heads: 2}}\n"
                                          "filter: {steps: {gopher: false}}\n")
    (tmp_path / "gpu.yaml").write_text("base: params.yaml\ntrain: {lr: 0.0006, model: {d_model: null}}\n")
    default_lr = config.built_in_defaults("train")["lr"]
    value, source, sources = config.provenance("train.lr", tmp_path / "gpu.yaml")
    assert (value, source) == (0.0006, str(tmp_path / "gpu.yaml"))
    assert [v for _, v in sources] == [0.0006, 0.006, default_lr]
    value, source, _ = config.provenance("train.model.d_model", tmp_path / "gpu.yaml")  # the profile drops the key
    assert value is None and source.startswith("the built-in default of python -m model.train")
    assert config.provenance("train.model.d_model", tmp_path / "params.yaml")[:2] == (64, str(tmp_path / "params.yaml"))
    assert config.provenance("train.model.n_heads", tmp_path / "gpu.yaml")[:2] == (2, str(tmp_path / "params.yaml"))
    assert config.provenance("filter.steps.gopher", tmp_path / "gpu.yaml")[0] is False  # nested: from the files
    text = config.describe("train.model.d_model", tmp_path / "gpu.yaml")
    assert "dropped by" in text and "over " in text and ": 64" in text


def test_unknown_section_is_a_clear_error(capsys):
    assert config.main(["show", "nope.lr"]) == 2
    assert "unknown section 'nope'" in capsys.readouterr().err


def test_an_unknown_key_is_an_error_that_suggests_the_nearest(capsys):
    # a typo: exit 2, one line, the nearest key named
    assert config.main(["show", "train.warmup_step"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such key in section 'train'" in err
    assert "did you mean train.warmup_steps?" in err
    # nothing near: the section's keys are listed (lr among them)
    assert config.main(["show", "train.learning_rate"]) == 2
    assert "keys: " in (err := capsys.readouterr().err) and " lr," in err
    # a nested key the files do not set keeps its answer: its default lives in the stage's code
    assert config.main(["show", "filter.steps.langid.min_score"]) == 0


def test_a_trainer_section_inherits_the_shared_alignment_section(tmp_path):
    """sft's own key wins, then alignment:'s, then the built-in default; the report takes only the keys it knows."""
    from workbench.params import load_section

    (tmp_path / "params.yaml").write_text("alignment: {task: arithmetic, n_train: 6000, n_test: 50}\n"
                                          "sft: {n_train: 4000}\nalignment_report: {n: 10}\n")
    assert config.provenance("sft.task", tmp_path / "params.yaml")[:2] == \
        ("arithmetic", f"{tmp_path / 'params.yaml'} (alignment:)")
    assert config.provenance("sft.n_train", tmp_path / "params.yaml")[:2] == (4000, str(tmp_path / "params.yaml"))
    report = load_section("alignment_report", tmp_path / "params.yaml", known=("task", "n"))
    assert report == {"task": "arithmetic", "n": 10}  # n_train and n_test are not the report's
    from alignment.sft import SFTConfig
    from workbench.params import parse_config

    cfg, _ = parse_config(SFTConfig, "sft", ["--params", str(tmp_path / "params.yaml"), "--model", "m"])
    assert (cfg.task, cfg.n_train, cfg.n_test) == ("arithmetic", 4000, 50)
