"""``python -m pipeline.filters.stage``: documents → kept documents + rejected-with-reason, one file per input file.

The chain is a list of steps (pipeline/runtime/steps.py) in a fixed order, each switched on or off in ``params.yaml``:
``langid`` → ``gopher`` (quality rules) → ``gopher_rep`` (repetition rules) → ``c4`` (line filters) →
``quality`` / ``toxicity`` / ``nsfw`` (fastText classifiers) → ``pii`` (masking, last so that dropped documents
are never masked and classifiers see the original text). A step's setting is ``false`` (off), ``true`` (paper
defaults) or a mapping of constructor arguments.

Each input file is one task for the executor (workbench/executor.py), run by the document-stage base
(pipeline/runtime/document_stage.py on workbench/stage.py: resume, writers, records, metrics). A task reads its
file (bad input by the policy of workbench/bad_input.py: a malformed JSONL line is counted as ``bad_json`` and named
file:line in a warning; a file that is unreadable or holds no document is named in the summary; only when no input
is readable does the stage fail), runs the chain, writes the kept documents to ``out_dir/<name>`` and the dropped
ones, each with its ``reason``, to ``rejected_dir/<name>``, both atomically, then writes its record last
(``out_dir/_done/<name>.json``, workbench/ledger.py: its stats, the input's identity and the chain's settings and
classifier models), so a rerun skips finished files, redoes every file when a step's settings or a model changed,
and a killed run never leaves half-written outputs. Stats carry no timings, so a rerun is byte-identical; seconds
and docs/s go to the stage metrics: the headline in ``metrics/filter.json``, every count (per step, per reason) in
``metrics/details/filter.json``.

Provenance: a classifier whose sidecar says it was trained on generated text (pipeline/classifiers/models.py) is refused
on documents that do not come from the generated crawl (workbench/documents.py ``from_generated_crawl``): its scores
on real pages are arbitrary. ``allow_generated_classifiers: true`` (``--allow-generated-classifiers``) lets it run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from dataclasses import dataclass
from pathlib import Path

from pipeline.classifiers.models import ClassifierFilter, provenance_path, trained_on_generated
from pipeline.runtime.document_stage import DocumentStage
from pipeline.runtime.steps import Step
from workbench.bad_input import summary_note
from workbench.documents import from_generated_crawl, input_files
from workbench.executor import ExecutorSettings, LocalExecutor, make_executor
from workbench.ledger import identity
from workbench.params import Checked, config_from_args, override, setting
from workbench.stage_cli import RejectingStageFiles, StageCommand, need, optional_path, paths

log = logging.getLogger(__name__)

# step name -> (module, class), in chain order
STEPS = {
    "langid": ("pipeline.filters.langid", "LanguageFilter"),
    "gopher": ("pipeline.filters.quality_rules", "GopherQualityFilter"),
    "gopher_rep": ("pipeline.filters.quality_rules", "GopherRepetitionFilter"),
    "c4": ("pipeline.filters.quality_rules", "C4LineFilter"),
    "quality": ("pipeline.classifiers.models", "ClassifierFilter"),
    "toxicity": ("pipeline.classifiers.models", "ClassifierFilter"),
    "nsfw": ("pipeline.classifiers.models", "ClassifierFilter"),
    "pii": ("pipeline.filters.pii", "PIIMasker"),
}
CLASSIFIER_STEPS = ("quality", "toxicity", "nsfw")


@dataclass(frozen=True)
class FilterConfig(Checked):
    SECTION = "filter"

    steps: dict = setting({"langid": True, "gopher": True, "gopher_rep": True, "pii": True},
                          "the chain: step name -> true/false/settings (params.yaml only)", params_only=True)
    workers: int = setting(1, "processes; each input file is one task", at_least=1)
    allow_generated_classifiers: bool = setting(False, "apply classifiers trained on generated text to documents "
                                                       "that do not come from the generated crawl (refused by "
                                                       "default: their scores on real pages are arbitrary)")

    def __post_init__(self):  # the chain's mapping: its keys are step names, its values a step's own settings
        super().__post_init__()
        if not isinstance(self.steps, dict):
            raise ValueError(f"filter.steps must be a mapping of step name -> true/false/settings, got {self.steps!r}")
        unknown = sorted(set(self.steps) - set(STEPS))
        if unknown:
            raise ValueError(f"filter.steps: unknown step(s) {unknown} (known: {list(STEPS)})")
        for name, chosen in self.steps.items():
            if not isinstance(chosen, (bool, dict)):
                raise ValueError(f"filter.steps.{name} must be true, false or a mapping, got {chosen!r}")

    def enabled(self) -> list[tuple[str, dict]]:
        """(name, constructor kwargs) of every step switched on, in chain order."""
        out = []
        for name in STEPS:
            chosen = self.steps.get(name, False)
            if chosen is False:
                continue
            kwargs = {} if chosen is True else dict(chosen)
            if name in CLASSIFIER_STEPS:
                kwargs.setdefault("task", name)
            out.append((name, kwargs))
        return out

    def settings(self) -> dict:
        """What decides the outputs: the chain (each step on, with its arguments; a step set false and one left
        out are the same chain). Not ``workers``, nor ``allow_generated_classifiers``, which only refuses."""
        return {"steps": dict(self.enabled())}


def build_steps(cfg: FilterConfig) -> list[Step]:
    steps = []
    for name, kwargs in cfg.enabled():
        module, cls = STEPS[name]
        try:
            steps.append(getattr(importlib.import_module(module), cls)(**kwargs))
        except TypeError as e:
            raise ValueError(f"filter.steps.{name}: {e}") from None
    return steps


def check_provenance(files: list[Path], steps: list[Step], allow: bool = False) -> None:
    """A one-line ValueError when a classifier trained on generated text would score documents that do not come
    from the generated crawl (unless ``allow``)."""
    generated = [s for s in steps if isinstance(s, ClassifierFilter) and trained_on_generated(s.model_path)]
    real = [f for f in files if not from_generated_crawl(f)] if generated and not allow else []
    if real:
        step = generated[0]
        raise ValueError(f"filter.steps.{step.name}: {step.model_path} was trained on generated text "
                         f"({provenance_path(step.model_path)}) and {real[0]} does not come from the generated crawl; "
                         f"train it on real labels (README \"Run on real Common Crawl\", params-cc.yaml), switch the "
                         f"step off, or set filter.allow_generated_classifiers: true")


class FilterStage(DocumentStage):
    """The filter stage: the configured chain of steps (``build_steps``) over each documents file, on the
    document-stage base (pipeline/runtime/document_stage.py)."""

    name = "filter"
    bar_for_one_file = False

    def __init__(self, files: list[Path], out_dir: Path, rejected_dir: Path, cfg: FilterConfig, force: bool = False):
        super().__init__(files, out_dir, rejected_dir, force)
        self.cfg = cfg
        self._built = build_steps(cfg)  # fail fast on bad settings or missing models, before any task starts

    def __getstate__(self) -> dict:  # a task builds its own chain: the loaded models do not travel
        return {k: v for k, v in self.__dict__.items() if k != "_built"}

    def steps(self) -> list[Step]:
        return getattr(self, "_built", None) or build_steps(self.cfg)

    def step_names(self) -> list[str]:
        return [name for name, _ in self.cfg.enabled()]

    def settings(self) -> dict:
        """The chain's settings and the identity of each classifier's model (a retrained model at the same path
        decides differently)."""
        models = {s.name: identity(s.model_path) for s in self.steps()
                  if isinstance(s, ClassifierFilter) and s.model_path.is_file()}
        return {**self.cfg.settings(), "models": models}

    def check(self, todo: list[Path]) -> None:
        check_provenance(todo, self.steps(), self.cfg.allow_generated_classifiers)


def run_filter(inputs: list[Path], out_dir: Path, rejected_dir: Path, metrics_path: Path | None, cfg: FilterConfig,
               executor=None, force: bool = False) -> dict:
    """Filter every input file (skipping finished ones unless ``force``); write and return the stage metrics."""
    stage = FilterStage(input_files(inputs), Path(out_dir), Path(rejected_dir), cfg, force)
    return stage.run(executor or LocalExecutor(cfg.workers), metrics_path)


# -- CLI ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FilterFiles(RejectingStageFiles):
    out_dir: str = override(RejectingStageFiles, "out_dir", "filter")
    rejected_dir: str = override(RejectingStageFiles, "rejected_dir", "rejected/filter")


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "inputs", "out_dir", "rejected_dir")
    cfg = config_from_args(FilterConfig, args, params_only=section)
    # the stage builds the steps: bad settings or a missing model fail here, before a cluster starts
    stage = FilterStage(input_files([Path(p) for p in paths(args.inputs)]), Path(args.out_dir),
                        Path(args.rejected_dir), cfg, args.force)
    with make_executor(args.executor, cfg.workers, args.address, args.task_timeout_s) as executor:
        m = stage.run(executor, optional_path(args.metrics))
    return (f"filter: {m['docs_in']} -> {m['docs_out']} documents in {args.out_dir} ({m['docs_per_s']} docs/s); "
            f"drops {m['drops']}{summary_note(m)}")


main = StageCommand("python -m pipeline.filters.stage", "filter",
                    "Run the filter chain (pipeline/filters/stage.py) over every documents file; the chain is the "
                    "`steps` mapping of the params section.",
                    (FilterFiles, FilterConfig, ExecutorSettings), run_command, extra_keys=("steps",))


if __name__ == "__main__":
    raise SystemExit(main())
