"""Every `python -m` command in README.md and docs/ names a module that exists and only flags its CLI has
(lmw_cli.doc_commands; nothing runs), and the check itself catches what it should, on a page written here."""

from __future__ import annotations

from pathlib import Path

from lmw_cli import doc_commands


def test_every_documented_command_parses():
    assert doc_commands.check() == []


def test_a_removed_flag_a_missing_module_and_a_bad_step_are_caught(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("Run `python -m scaling.fit runs.csv --method auto` first.\n\n```bash\n"
                    "python -m model.train --preset micro \\\n    --d-model 64   # the old flag\n"
                    "python -m bench.kernel_ops --quick | tee log.txt\n"
                    "python -m pipeline extract crawl.warc.gz --no-such-flag\n"
                    "python -m pipeline nope\n"
                    "python -m model.train --model.d-model 64 > out.txt  # fine: the redirect is not a flag\n"
                    "python -m lmw_cli.config show train.lr --params params.yaml\n```\n")
    monkeypatch.setattr(doc_commands, "ROOT", tmp_path)
    monkeypatch.setattr(doc_commands, "doc_files", lambda: [page])
    problems = doc_commands.check()
    assert len(problems) == 4, problems
    assert "page.md:4: python -m model.train --preset micro --d-model 64" in problems[0]
    assert problems[0].endswith("unrecognized flag(s) --d-model")
    assert problems[1].endswith("no module bench.kernel_ops")
    assert "pipeline.web.extract: unrecognized flag(s) --no-such-flag" in problems[2]
    assert problems[3].endswith("python -m pipeline has no step 'nope'")


def test_generated_results_lines_are_checked_for_their_module_only(tmp_path, monkeypatch):
    page = tmp_path / "bench.md"
    page.write_text("<!-- results area=x -->\nMeasured by `python -m bench.benchmarks.model_train --only gqa`.\n"
                    "<!-- /results -->\nNow `python -m bench.benchmarks.model_train --only gqa`.\n")
    monkeypatch.setattr(doc_commands, "ROOT", tmp_path)
    monkeypatch.setattr(doc_commands, "doc_files", lambda: [page])
    assert [p.split(" -- ")[1] for p in doc_commands.check()] == [
        "bench.benchmarks.model_train: unrecognized flag(s) --only"]
    assert Path(doc_commands.__file__).name == "doc_commands.py"
