"""Every data step reads its params.yaml section strictly: a key it does not know is a one-line error naming the key,
the section and the file (exit 2); ``--help`` shows the section's values; each step runs as ``python -m pipeline.X``."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline import classify, report
from pipeline.__main__ import main
from pipeline.dedup import stage as dedup
from pipeline.filters import stage as filter_step
from pipeline.sample import crawl
from pipeline.web import extract
from tokenizer import shards
from tokenizer import train as train_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def _params(tmp_path: Path, sections: dict) -> str:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(sections))
    return str(path)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_typo_in_the_dedup_section_is_a_one_line_error(tmp_path, capsys):
    params = _params(tmp_path, {"dedup": {"inputs": [str(tmp_path)], "jacard_threshold": 0.7}})
    assert main(["--params", params, "dedup"]) == 2
    err = _one_error_line(capsys)
    assert "jacard_threshold" in err and "'dedup'" in err and params in err
    assert dedup.main(["--params", params]) == 2  # the step's own command says the same
    assert _one_error_line(capsys) == err


@pytest.mark.parametrize("section,step_main", [("extract", extract.main), ("filter", filter_step.main),
                                               ("report", report.main), ("tokenizer", train_tokenizer.main),
                                               ("shards", shards.main)])
def test_every_step_rejects_unknown_keys(tmp_path, capsys, section, step_main):
    params = _params(tmp_path, {section: {"wrokers": 2}})
    assert step_main(["--params", params]) == 2
    err = _one_error_line(capsys)
    assert "wrokers" in err and repr(section) in err and params in err


def test_classify_and_sample_reject_unknown_keys(tmp_path, capsys):
    params = _params(tmp_path, {"classify": {"quality": {"mimn": 3}}, "sample": {"page": 10}})
    for step_main, key in ((classify.main, "mimn"), (crawl.main, "page")):
        with pytest.raises(SystemExit) as e:
            step_main(["--params", params])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert key in err and params in err and len([line for line in err.splitlines() if "error:" in line]) == 1


def test_help_shows_the_sections_values(tmp_path, capsys):
    params = _params(tmp_path, {"dedup": {"num_bands": 28, "out_dir": "somewhere/deduped"},
                                "classify": {"generate": 1234, "quality": {"minn": 2}}})
    with pytest.raises(SystemExit):
        dedup.main(["--params", params, "--help"])
    out = capsys.readouterr().out
    assert "(default: 28)" in out and "somewhere/deduped" in out
    with pytest.raises(SystemExit):
        classify.main(["--params", params, "--help"])
    out = capsys.readouterr().out
    assert "1234" in out and "quality 2, toxicity 0, nsfw 0" in out  # --minn: classify.quality.minn, else built-in


def test_each_step_is_a_module_command(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pipeline.dedup.stage", "--params", "none", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "--jaccard-threshold" in done.stdout
