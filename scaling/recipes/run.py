"""``python -m scaling.recipes recipes.yaml``: run every data recipe's stages and the shared ladder on each, then
compare them (scaling/compare.py).

For each recipe, in ``<out_dir>/<recipe>/``: its params (the base with the recipe's overlay, its paths redirected
here), its extraction when it changes the extractor, its pool (the crawl's pages less the validation share and
their near-duplicates: scaling/recipes/texts.py), filter, dedup (unless switched off) and tokens (the base's
tokenizer, shared), then ``shards/`` (its training tokens beside the one validation text) and the ladder
(scaling/sweep.py with the recipes file's ``ladder:`` over the base's ``sweep:``). Every stage is the pipeline's own
and keeps its markers, so a rerun redoes only what changed: a changed recipe reruns its stages, and its ladder
starts again only when its tokens changed (``sweep.data.json``); a killed ladder resumes from its finished runs.
Then ``runs.csv`` (every recipe's runs with a ``recipe`` column; ``loss`` in bits per byte of the validation text,
``loss_nats`` per token beside it) and ``compare/`` (``python -m scaling.compare``'s files). ``--metrics`` (default
metrics/recipes.json) holds each recipe's predicted loss and each verdict, for ``dvc metrics show``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pipeline.dedup.stage import main as dedup_main
from pipeline.filters.stage import main as filter_main
from pipeline.web.extract import main as extract_main
from scaling.compare import main as compare_main
from scaling.recipes.spec import Recipe, RecipeError, RecipesSpec, load_spec
from scaling.recipes.texts import assemble_shards, check_overlap, decontaminate, read_docs, split_pages
from scaling.sweep import load_config, plan_runs
from scaling.sweep import main as sweep_main
from tokenizer.shards import main as shards_main
from workbench.files import read_json, write_json, write_jsonl, write_text
from workbench.ledger import Ledger, identity
from workbench.params import add_config_flags, config_from_args, read_params, setting

DEFAULT_FRACTION = 0.05


def _write_params(path: Path, params: dict) -> Path:
    import yaml

    write_text(path, yaml.safe_dump(params, sort_keys=False))
    return path


STAGES = {"pipeline.web.extract": extract_main, "pipeline.filters.stage": filter_main,
          "pipeline.dedup.stage": dedup_main, "tokenizer.shards": shards_main, "scaling.sweep": sweep_main}


def _stage(module: str, params: Path, where: str) -> None:
    """Run one pipeline stage's CLI in this process on ``params``; a RecipeError when it fails."""
    code = STAGES[module](["--params", str(params)])
    if code:
        raise RecipeError(f"{where}: python -m {module} --params {params} failed (exit {code})")


def redirect(params: dict, folder: Path, pool: Path, tokenizer: str, dedup: bool) -> dict:
    """A recipe's params with every data path inside ``folder``: its filter reads ``pool``, its tokens use the
    shared ``tokenizer`` and keep everything for training (the validation text is shared, not split off)."""
    p = {k: (dict(v) if isinstance(v, dict) else v) for k, v in params.items()}
    metrics = folder / "metrics"
    p["extract"] |= {"out_dir": str(folder / "documents"), "metrics": str(metrics / "extract.json")}
    p["filter"] |= {"inputs": [str(pool)], "out_dir": str(folder / "filtered"),
                    "rejected_dir": str(folder / "rejected" / "filter"), "metrics": str(metrics / "filter.json")}
    p["dedup"] |= {"inputs": [str(folder / "filtered")], "out_dir": str(folder / "deduped"),
                   "rejected_dir": str(folder / "rejected" / "dedup"), "metrics": str(metrics / "dedup.json")}
    p["shards"] |= {"input": str(folder / ("deduped" if dedup else "filtered")), "tokenizer": tokenizer,
                    "out_dir": str(folder / "tokens"), "metrics": str(metrics / "tokens.json"),
                    "val_fraction": 0.0}
    return p


STAGE_FOLDERS = {"extract": ("documents", "pool"), "filter": ("filtered", "rejected/filter"),
                 "dedup": ("deduped", "rejected/dedup"), "shards": ("tokens", "shards")}
SETTINGS_RECORD = "stage_settings.json"


def clear_changed(folder: Path, settings: dict[str, object]) -> None:
    """Remove the outputs of every data stage whose settings differ from those ``folder`` recorded, and of every
    stage after it: the per-file markers of the stages know their inputs, not their settings, so a changed
    threshold would otherwise keep the old outputs."""
    record = folder / SETTINGS_RECORD
    old = read_json(record) if record.is_file() else {}
    changed = False
    for stage, value in settings.items():
        changed = changed or old.get(stage) != value
        if changed and (old or any((folder / f).exists() for f in STAGE_FOLDERS[stage])):
            for name in STAGE_FOLDERS[stage]:
                shutil.rmtree(folder / name, ignore_errors=True)
    if changed and old:
        print(f"recipes: {folder.name}: settings changed since its data were made: its stages from "
              f"{next(s for s in settings if old.get(s) != settings[s])} on run again")


def record_settings(folder: Path, settings: dict[str, object]) -> None:
    write_json(folder / SETTINGS_RECORD, settings)


def data_settings(params: dict, dedup: bool, extract: bool) -> dict[str, object]:
    """What decides each data stage's outputs, in stage order (paths included: they name the inputs)."""
    out = {"extract": params["extract"]} if extract else {}
    out["filter"] = params["filter"]
    out["dedup"] = params["dedup"] if dedup else False
    out["shards"] = params["shards"]
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def restart_if_tokens_changed(runs: Path, shards: Path, what: str) -> None:
    """Remove the run folder ``runs`` when the tokens it was trained on (``shards``' train.bin and val.bin, by
    content: ``<runs>.data.json`` beside it) are not the tokens there now; then record them."""
    tokens = {name: identity(shards / name) for name in ("train.bin", "val.bin")}
    record = runs.parent / f"{runs.name}.data.json"
    if record.exists() and read_json(record) != tokens:
        print(f"recipes: {what} was trained on other tokens: training it again")
        shutil.rmtree(runs, ignore_errors=True)
    write_json(record, tokens)


class Runner:
    def __init__(self, spec: RecipesSpec, base: dict):
        self.spec, self.base = spec, base
        self.out = spec.out_dir
        self.documents = Path(base["extract"]["out_dir"])
        self.tokenizer = str(base["tokenizer"]["out_dir"])
        self.fraction = float(spec.validation.get("fraction", DEFAULT_FRACTION))
        self.seed = int(spec.validation.get("seed", 0))
        self.own_validation = spec.validation.get("path")

    def check_inputs(self) -> None:
        for what, path in (("the crawl's extracted pages", self.documents), ("the shared tokenizer",
                                                                              Path(self.tokenizer))):
            if not path.exists():
                raise RecipeError(f"{self.spec.path}: {what} ({path}) are missing: run make repro (or dvc repro "
                                  f"train_tokenizer) first")

    def validation(self) -> tuple[list[dict], Path, int]:
        """The validation documents (as scored), their tokens' folder and their UTF-8 bytes."""
        folder = self.out / "_validation"
        if self.own_validation:
            given = Path(self.own_validation)
            if not given.exists():
                raise RecipeError(f"{self.spec.path}: validation: path {given} does not exist")
            docs = read_docs(given)
            if not docs:
                raise RecipeError(f"{self.spec.path}: validation: {given} holds no documents")
            pages, pool = folder / "pages", self.documents
            write_jsonl(pages / "pages.jsonl.gz", docs)  # any documents file or folder, as one jsonl.gz
        else:
            pages, pool = folder / "pages", self.out / "_pool"
            record = Ledger("split", pool, {"fraction": self.fraction, "seed": self.seed}).record(
                "split", sorted(self.documents.glob("*.jsonl*")))
            if record.done(pool / "pages.jsonl.gz", pages / "pages.jsonl.gz") is None:
                counts = split_pages(self.documents, self.fraction, self.seed, pages, pool)
                record.write(**counts)
                print(f"recipes: validation share {counts['validation_pages']} of {counts['pages']} pages; "
                      f"{counts['decontaminated']} near-duplicate page(s) of it taken out of the training pool")
        self.pool = pool
        params = redirect(self.base, folder, pages, self.tokenizer, dedup=False)
        path = _write_params(folder / "params.yaml", params)
        settings = {"filter": params["filter"], "shards": params["shards"]}
        clear_changed(folder, json.loads(json.dumps(settings, sort_keys=True, default=str)))
        _stage("pipeline.filters.stage", path, "validation text")
        _stage("tokenizer.shards", path, "validation text")
        record_settings(folder, json.loads(json.dumps(settings, sort_keys=True, default=str)))
        docs = read_docs(folder / "filtered")
        return docs, folder / "tokens", sum(len(d["text"].encode("utf-8")) for d in docs)

    def data(self, recipe: Recipe, validation: list[dict], tokens: Path, nbytes: int) -> Path:
        """The recipe's data stages and its shards (training tokens + the shared validation tokens)."""
        folder = self.out / recipe.name
        pool = self.pool
        dedup = "dedup" not in recipe.skipped
        params = redirect(recipe.params, folder, pool, self.tokenizer, dedup)
        if recipe.changes_stage("extract"):
            pool = folder / "pool"
            params = redirect(recipe.params, folder, pool, self.tokenizer, dedup)
            clear_changed(folder, data_settings(params, dedup, extract=True))
            path = _write_params(folder / "params.yaml", params)
            _stage("pipeline.web.extract", path, f"recipe '{recipe.name}'")
            if self.own_validation:
                pool = folder / "documents"
                params = redirect(recipe.params, folder, pool, self.tokenizer, dedup)
            else:
                decontaminate(folder / "documents", validation, self.fraction, self.seed, pool)
        path = _write_params(folder / "params.yaml", params)
        if not recipe.changes_stage("extract"):
            clear_changed(folder, data_settings(params, dedup, extract=False))
        _stage("pipeline.filters.stage", path, f"recipe '{recipe.name}'")
        if dedup:
            _stage("pipeline.dedup.stage", path, f"recipe '{recipe.name}'")
        _stage("tokenizer.shards", path, f"recipe '{recipe.name}'")
        check_overlap(recipe.name, Path(params["shards"]["input"]), validation)
        assemble_shards(folder / "tokens", tokens, folder / "shards", nbytes)
        record_settings(folder, data_settings(params, dedup, recipe.changes_stage("extract")))
        return path

    def ladder_params(self, recipe: Recipe, params_path: Path) -> Path:
        """The recipe's params with the ladder: the base's sweep: section under the recipes file's ladder:."""
        import yaml

        folder = self.out / recipe.name
        params = yaml.safe_load(params_path.read_text(encoding="utf-8"))
        params["sweep"] = {**params["sweep"], **self.spec.ladder, "data": str(folder / "shards"),
                           "out_dir": str(folder / "sweep" / "runs"), "results": str(folder / "sweep" / "results.csv")}
        return _write_params(folder / "params.yaml", params)

    def check_epochs(self, recipe: Recipe, params_path: Path) -> None:
        cfg, _ = load_config(["--params", str(params_path)])
        runs, _ = plan_runs(cfg)
        unique = read_json(self.out / recipe.name / "shards" / "meta.json")["train_tokens"]
        need = max(r.tokens for r in runs) / max(unique, 1)
        if need > self.spec.max_epochs:
            raise RecipeError(f"recipe '{recipe.name}': {unique:,} unique training tokens; the ladder's largest run "
                              f"needs {max(r.tokens for r in runs):,} tokens = {need:.1f} epochs, beyond max_epochs "
                              f"{self.spec.max_epochs:g} (a smaller ladder, a less strict recipe, or a larger "
                              f"max_epochs)")

    def ladder(self, recipe: Recipe, params_path: Path) -> Path:
        """Train the ladder on the recipe's shards; a ladder trained on other tokens is removed first."""
        folder = self.out / recipe.name
        restart_if_tokens_changed(folder / "sweep", folder / "shards", f"{recipe.name}: its ladder")
        _stage("scaling.sweep", params_path, f"recipe '{recipe.name}'")
        return folder / "sweep" / "results.csv"

    def runs_table(self, results: dict[str, Path], val_tokens: dict[str, int], nbytes: int) -> Path:
        """Every recipe's ladder runs with a recipe column, loss in bits per byte of the validation text."""
        frames = []
        for name, path in results.items():
            frame = pd.read_csv(path)
            frame.insert(0, "recipe", name)
            frame["loss_nats"] = frame["loss"]
            frame["loss"] = frame["loss_nats"] * val_tokens[name] / nbytes / math.log(2)
            frames.append(frame)
        path = self.out / "runs.csv"
        write_text(path, pd.concat(frames, ignore_index=True).to_csv(index=False))
        return path


@dataclass(frozen=True)
class RecipesRun:
    recipes: str = setting("recipes/default.yaml", "the recipes file (scaling/recipes/spec.py shows its keys)",
                           positional=True)
    only_data: bool = setting(False, "run the data stages and stop before the ladders")
    bootstrap: int = setting(200, "the comparison's paired bootstrap resamples")
    metrics: str = setting("metrics/recipes.json", "each recipe's predicted loss and each verdict, for dvc metrics "
                                                   "show ('' for none)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scaling.recipes", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    add_config_flags(parser, RecipesRun, bool_switches=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = config_from_args(RecipesRun, build_parser().parse_args(argv))
    start = time.perf_counter()
    try:
        spec = load_spec(args.recipes)
        runner = Runner(spec, read_params(spec.base))
        runner.check_inputs()
        validation, tokens, nbytes = runner.validation()
        paths = {name: runner.data(recipe, validation, tokens, nbytes) for name, recipe in spec.recipes.items()}
        paths = {name: runner.ladder_params(spec.recipes[name], p) for name, p in paths.items()}
        for name, path in paths.items():
            runner.check_epochs(spec.recipes[name], path)
        if args.only_data:
            seconds = time.perf_counter() - start
            print(f"recipes: data of {len(paths)} recipes ready in {spec.out_dir}/ [{seconds:.0f} s]")
            return 0
        results = {name: runner.ladder(spec.recipes[name], path) for name, path in paths.items()}
    except RecipeError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    val_tokens = {n: read_json(spec.out_dir / n / "shards" / "meta.json")["val_tokens"] for n in results}
    table = runner.runs_table(results, val_tokens, nbytes)
    argv_compare = [str(table), "--by", "recipe", "--out-dir", str(spec.out_dir / "compare"), "--bootstrap",
                    str(args.bootstrap), "--params", "none"] + (["--metrics", args.metrics] if args.metrics else [])
    code = compare_main(argv_compare)
    print(f"recipes: {len(results)} recipes, loss in bits per byte of {nbytes:,} validation bytes "
          f"[{time.perf_counter() - start:.0f} s] -> {table}, {spec.out_dir / 'compare'}/")
    return code
