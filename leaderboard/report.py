"""The final report of the whole pipeline: leaderboard, markdown summary, training-curve plot and headline metrics.

``python -m leaderboard.report`` reads what the stages already wrote — ``metrics/*.json``, the default training run
(``summary.json``, ``config.json``, ``metrics.csv``), the sweep's ``results.csv``, the fit's ``predictions.csv``
(or ``metrics/fit.json``), ``reports/alignment.csv`` and ``reports/data_funnel.csv`` — and writes:

- ``leaderboard.csv``: one row per run (the default pretraining run, every sweep run, every aligned model) plus
  one per scaling-law prediction, with the columns of the CS336 leaderboards (data recipe, tokenizer, model
  shape, params, tokens, FLOPs (C = 6·N·D for every run, the accounting of the sweep and the fits, so runs and
  predictions compare), wall-clock, hardware, validation loss; accuracy for aligned models);
- ``summary.md``: per-stage seconds, the data funnel, the training result, the scaling predictions, alignment
  accuracy, the top of the leaderboard, and links to every plot (relative paths);
- ``training_curves.png`` (leaderboard/plots.py), and ``scaling.png`` only when the fit's PNGs are missing;
- ``--metrics`` (``metrics/report.json``): headline numbers for ``dvc metrics show``.

Alignment results are read as files, never imported (DESIGN.md: ``scaling`` and ``alignment`` do not import each
other). A missing input leaves its rows or table out with one ``warning:`` line; an unreadable one (corrupt JSON
or CSV, a missing column) is bad input: one ``error:`` line naming the file, exit 2. Defaults come from the
``leaderboard:`` section of ./params.yaml, then flags; the recipe is read from its filter/dedup/tokenizer sections.
Every output is written to a temporary file and renamed into place; the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

COLUMNS = ["run_id", "kind", "data_recipe", "tokenizer", "preset", "d_model", "n_layers", "n_heads", "params",
           "tokens", "flops", "wall_clock_s", "hardware", "val_loss", "val_perplexity", "task", "accuracy",
           "target_flops", "n_opt", "d_opt", "predicted_loss"]
DEFAULTS = {"out_dir": "reports", "metrics": "metrics/report.json", "metrics_dir": "metrics",
            "train_run": "data/runs/default", "sweep_results": "data/sweep/results.csv",
            "sweep_runs": "data/sweep/runs", "fit_dir": "data/sweep/fit", "alignment": "reports/alignment.csv",
            "funnel": "reports/data_funnel.csv", "top": 10}
INTEGER_COLUMNS = ("d_model", "n_layers", "n_heads", "params", "tokens", "flops")
FIT_PNGS = ("isoflop_curves.png", "optimal_allocation.png", "parametric_contours.png")
STAGE_ORDER = ("extract", "filter", "dedup", "tokenizer", "shards", "train", "sweep", "fit", "sft", "dpo", "grpo",
               "alignment")


class ReportError(ValueError):
    """Bad input: one line naming the file."""


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------- readers: None when absent, ReportError when bad
def read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: invalid JSON ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_csv(path: Path, required: tuple[str, ...] = ()) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReportError(f"{path}: not a readable CSV ({first})") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ReportError(f"{path}: missing columns {missing}")
    return frame


def _num(value) -> float | None:
    """A finite float, or None (missing, empty, non-numeric)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


# ---------------------------------------------------------------- recipe and tokenizer
def data_recipe(params: dict, metrics: dict) -> str | None:
    """"filters: langid(en)+gopher+...; dedup: exact+minhash(5-gram, J>=0.8); tokens kept N" from what is enabled."""
    parts = []
    steps = (params.get("filter") or {}).get("steps")
    names = ([name for name, value in steps.items() if value not in (False, None)] if isinstance(steps, dict)
             else (metrics.get("filter") or {}).get("step_order"))
    if names:
        langs = (steps or {}).get("langid") if isinstance(steps, dict) else None
        langs = langs.get("languages") if isinstance(langs, dict) else None
        parts.append("filters: " + "+".join(f"langid({','.join(map(str, langs))})" if n == "langid" and langs
                                            else str(n) for n in names))
    dedup = params.get("dedup") or (metrics.get("dedup") or {}).get("settings")
    if dedup:
        kinds = ["exact"] if dedup.get("exact", True) else []
        kinds.append(f"minhash({dedup.get('ngrams', '?')}-gram, J>={dedup.get('jaccard_threshold', '?')})")
        if dedup.get("line_dedup", "none") != "none":
            kinds.append(f"lines({dedup['line_dedup']})")
        parts.append("dedup: " + "+".join(kinds))
    shards = metrics.get("shards") or {}
    if "train_tokens" in shards:
        parts.append(f"tokens kept {int(shards['train_tokens']) + int(shards.get('val_tokens', 0)):,}")
    return "; ".join(parts) or None


def tokenizer_label(params: dict, metrics: dict) -> str | None:
    """"bpe-<vocab> sha:<8 hex>" from the shards' metadata (tokenizer metrics / params as fallbacks)."""
    shards = metrics.get("shards") or {}
    vocab = (shards.get("vocab_size") or (metrics.get("tokenizer") or {}).get("vocab_size")
             or (params.get("tokenizer") or {}).get("vocab_size"))
    if vocab is None:
        return None
    sha = shards.get("tokenizer_sha256")
    return f"bpe-{vocab}" + (f" sha:{sha[:8]}" if sha else "")


# ---------------------------------------------------------------- leaderboard rows
def _shape(d_model, n_layers, n_heads, preset=None) -> dict:
    d_model, n_layers, n_heads = (int(v) if _num(v) is not None else None for v in (d_model, n_layers, n_heads))
    shape = {"d_model": d_model, "n_layers": n_layers, "n_heads": n_heads}
    label = preset or (f"d{d_model}-L{n_layers}-H{n_heads}" if d_model is not None else None)
    return shape | {"preset": label}


def flops_6nd(record: dict) -> float | None:
    """C = 6·N·D (Kaplan et al. 2020 §2.1), the accounting of the sweep budgets and the fits, for every run row."""
    n, d = _num(record.get("params")), _num(record.get("tokens"))
    return 6 * n * d if n is not None and d is not None else None


def pretrain_rows(run_dir: Path, common: dict) -> list[dict]:
    summary = read_json(run_dir / "summary.json")
    if summary is None:
        warn(f"no {run_dir / 'summary.json'}: pretrain row left out")
        return []
    config = read_json(run_dir / "config.json") or {}
    model, train = config.get("model") or {}, config.get("train") or {}
    shape = _shape(model.get("d_model"), model.get("n_layers"), model.get("n_heads"), train.get("preset"))
    return [common | shape | {"run_id": run_dir.name, "kind": "pretrain", "params": summary.get("params"),
                              "tokens": summary.get("tokens"), "flops": flops_6nd(summary),
                              "wall_clock_s": summary.get("seconds"),
                              "hardware": summary.get("hardware") or summary.get("device"),
                              "val_loss": summary.get("val_loss"), "val_perplexity": summary.get("val_perplexity")}]


def sweep_rows(results: Path, runs_dir: Path, common: dict) -> list[dict]:
    frame = read_csv(results, ("run_id", "params", "tokens"))
    if frame is None:
        warn(f"no {results}: sweep rows left out")
        return []
    rows = []
    for rec in frame.to_dict("records"):
        summary = read_json(runs_dir / str(rec["run_id"]) / "summary.json") or {}
        val = _num(rec.get("val_loss", rec.get("loss")))
        rows.append(common | _shape(rec.get("d_model"), rec.get("n_layers"), rec.get("n_heads")) | {
            "run_id": rec["run_id"], "kind": "sweep", "params": rec["params"], "tokens": rec["tokens"],
            "flops": flops_6nd(rec), "wall_clock_s": _num(rec.get("seconds")),
            "hardware": summary.get("hardware") or summary.get("device"), "val_loss": val,
            "val_perplexity": math.exp(val) if val is not None else None})
    return rows


def aligned_rows(alignment: Path, metrics: dict, tokenizer: str | None) -> list[dict]:
    frame = read_csv(alignment, ("stage", "accuracy"))
    if frame is None:
        warn(f"no {alignment}: aligned rows left out")
        return []
    frame = frame.drop_duplicates(subset=[c for c in ("stage", "task") if c in frame], keep="last")
    return [{"run_id": str(rec["stage"]), "kind": "aligned", "tokenizer": tokenizer, "task": rec.get("task"),
             "accuracy": _num(rec["accuracy"]), "wall_clock_s": (metrics.get(str(rec["stage"])) or {}).get("seconds")}
            for rec in frame.to_dict("records")]


def predictions(fit_dir: Path, metrics: dict) -> pd.DataFrame | None:
    """method, target_flops, n_opt, d_opt, loss: the fit's predictions.csv, else metrics/fit.json's {method}@{C}."""
    frame = read_csv(fit_dir / "predictions.csv", ("method", "target_flops", "n_opt", "d_opt", "loss"))
    if frame is not None:
        return frame[["method", "target_flops", "n_opt", "d_opt", "loss"]]
    fit = metrics.get("fit")
    if not fit:
        return None
    rows = []
    for key, value in fit.items():
        method, _, budget = key.partition("@")
        rows.append({"method": method, "target_flops": _num(budget)} | {k: value.get(k) for k in
                                                                       ("n_opt", "d_opt", "loss")})
    return pd.DataFrame(rows)


def _integer_columns(board: pd.DataFrame) -> pd.DataFrame:
    """Counts as nullable integers (128, not 128.0) when every value is a whole number."""
    for col in INTEGER_COLUMNS:
        values = pd.to_numeric(board[col], errors="coerce")
        if values.notna().any() and (values.dropna() % 1 == 0).all():
            board[col] = values.round().astype("Int64")
    return board


def prediction_rows(frame: pd.DataFrame | None, fit_dir: Path) -> list[dict]:
    if frame is None:
        warn(f"no {fit_dir / 'predictions.csv'} or fit metrics: scaling_prediction rows left out")
        return []
    return [{"run_id": f"{r['method']}@{r['target_flops']:.3g}", "kind": "scaling_prediction",
             "target_flops": r["target_flops"], "n_opt": r["n_opt"], "d_opt": r["d_opt"],
             "predicted_loss": r["loss"]} for r in frame.to_dict("records")]


# ---------------------------------------------------------------- summary.md
def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if float(value).is_integer() and abs(value) < 1e9:
            return f"{int(value):,}"
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def md_table(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_fmt(v) for v in rec) + " |" for rec in frame.astype(object).itertuples(index=False)]
    return "\n".join(lines)


def stage_seconds(metrics: dict, sweep: Path) -> pd.DataFrame:
    """One row per metrics JSON with a numeric ``seconds``, plus the sweep's summed run seconds; pipeline order."""
    rows = {name: data["seconds"] for name, data in metrics.items() if _num(data.get("seconds")) is not None}
    frame = read_csv(sweep) if sweep.is_file() else None
    if frame is not None and "seconds" in frame:
        rows["sweep"] = float(pd.to_numeric(frame["seconds"], errors="coerce").sum())
    order = sorted(rows, key=lambda n: (STAGE_ORDER.index(n) if n in STAGE_ORDER else len(STAGE_ORDER), n))
    return pd.DataFrame({"stage": order, "seconds": [float(rows[n]) for n in order]})


def summary_markdown(board: pd.DataFrame, seconds: pd.DataFrame, funnel: pd.DataFrame | None,
                     images: list[Path], out_dir: Path, top: int) -> str:
    out = ["# Pipeline report", ""]

    def section(title: str, body: str | None, missing: str) -> None:
        out.extend([f"## {title}", "", body if body else f"_{missing}_", ""])

    if len(seconds):
        seconds = pd.concat([seconds, pd.DataFrame({"stage": ["**total**"], "seconds": [seconds["seconds"].sum()]})])
    section("Stage wall-clock (s)", md_table(seconds) if len(seconds) else None, "no stage metrics")
    section("Data funnel", md_table(funnel) if funnel is not None else None, "no data_funnel.csv")
    runs = board[board["kind"] == "pretrain"]
    train_cols = ["run_id", "preset", "params", "tokens", "flops", "wall_clock_s", "hardware", "val_loss",
                  "val_perplexity"]
    section("Training", md_table(runs[train_cols]) if len(runs) else None, "no pretraining run")
    preds = board[board["kind"] == "scaling_prediction"].copy()
    if len(preds):
        preds.insert(0, "method", preds["run_id"].str.partition("@")[0])
    section("Scaling-law predictions", md_table(preds[["method", "target_flops", "n_opt", "d_opt", "predicted_loss"]])
            if len(preds) else None, "no fit predictions")
    aligned = board[board["kind"] == "aligned"].rename(columns={"run_id": "stage"})
    section("Alignment accuracy", md_table(aligned[["stage", "task", "accuracy", "wall_clock_s"]])
            if len(aligned) else None, "no alignment results")
    ranked = board[board["kind"].isin(["pretrain", "sweep"])].sort_values("val_loss", kind="stable").head(top)
    section(f"Leaderboard (pretrain + sweep, top {top} by val_loss)",
            md_table(ranked[["run_id", "kind", "preset", "params", "tokens", "flops", "wall_clock_s", "val_loss"]])
            if len(ranked) else None, "no runs")
    links = [f"![{p.stem}]({Path(os.path.relpath(p.resolve(), out_dir.resolve())).as_posix()})" for p in images]
    section("Plots", "\n".join(links) if links else None, "no plots")
    return "\n".join(out)


def headline(board: pd.DataFrame, seconds: pd.DataFrame) -> dict:
    """val_loss, val_perplexity, best sweep loss, predicted loss at the largest budget, accuracies, total seconds."""
    out: dict = {}
    runs = board[board["kind"] == "pretrain"]
    if len(runs):
        out |= {k: _num(runs.iloc[0][k]) for k in ("val_loss", "val_perplexity")}
    sweep = board[board["kind"] == "sweep"]["val_loss"].dropna()
    if len(sweep):
        out["best_sweep_loss"] = float(sweep.min())
    preds = board[board["kind"] == "scaling_prediction"]
    if len(preds):
        last = preds[preds["target_flops"] == preds["target_flops"].max()]
        out["predicted_loss"] = {r: _num(v) for r, v in zip(last["run_id"], last["predicted_loss"], strict=False)}
    aligned = board[board["kind"] == "aligned"]
    if len(aligned):
        out["accuracy"] = {r: _num(v) for r, v in zip(aligned["run_id"], aligned["accuracy"], strict=False)}
    if len(seconds):
        out["pipeline_seconds"] = round(float(seconds["seconds"].sum()), 3)
    return out


# ---------------------------------------------------------------- outputs and CLI
def atomic_write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def build_report(opts: dict, params: dict) -> tuple[pd.DataFrame, dict, list[Path]]:
    """Read every input, write leaderboard.csv, the PNGs and summary.md; return (leaderboard, headline, paths)."""
    from scaling import report_plots

    out_dir, metrics_out = Path(opts["out_dir"]), Path(opts["metrics"])
    metrics = {p.stem: read_json(p) for p in sorted(Path(opts["metrics_dir"]).glob("*.json"))
               if p.resolve() != metrics_out.resolve()}
    if not metrics:
        warn(f"no metrics JSON in {opts['metrics_dir']}: recipe, stage seconds and fit metrics left out")
    common = {"data_recipe": data_recipe(params, metrics), "tokenizer": tokenizer_label(params, metrics)}
    train_run, results, fit_dir = Path(opts["train_run"]), Path(opts["sweep_results"]), Path(opts["fit_dir"])
    preds = predictions(fit_dir, metrics)
    rows = (pretrain_rows(train_run, common) + sweep_rows(results, Path(opts["sweep_runs"]), common)
            + aligned_rows(Path(opts["alignment"]), metrics, common["tokenizer"]) + prediction_rows(preds, fit_dir))
    if not rows:
        raise ReportError("nothing to report: no training run, sweep results, alignment results or fit predictions")
    board = _integer_columns(pd.DataFrame(rows, columns=COLUMNS))
    written = [atomic_write(out_dir / "leaderboard.csv", board.to_csv(index=False).encode())]
    curves = read_csv(train_run / "metrics.csv", ("tokens", "loss"))
    sweep = read_csv(results) if results.is_file() else None
    drawn = [report_plots.training_curves(curves, sweep, out_dir / "training_curves.png", atomic_write)]
    fit_pngs = [fit_dir / name for name in FIT_PNGS if (fit_dir / name).is_file()]
    if not fit_pngs and preds is not None:
        drawn.append(report_plots.scaling_plot(preds, sweep, out_dir / "scaling.png", atomic_write))
    drawn = [p for p in drawn if p is not None]
    funnel_path = Path(opts["funnel"])
    linked = [p for p in (funnel_path.with_suffix(".png"), Path(opts["alignment"]).with_suffix(".png")) if p.is_file()]
    images = drawn + fit_pngs + linked
    funnel = read_csv(funnel_path)
    if funnel is None:
        warn(f"no {funnel_path}: data funnel table left out")
    seconds = stage_seconds(metrics, results)
    text = summary_markdown(board, seconds, funnel, images, out_dir, int(opts["top"]))
    written.append(atomic_write(out_dir / "summary.md", text.encode()))
    head = headline(board, seconds)
    written.append(atomic_write(metrics_out, (json.dumps(head, indent=2, sort_keys=True) + "\n").encode()))
    return board, head, written + drawn


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m leaderboard.report", description=__doc__.split("\n\n")[0],
                                     epilog="Defaults: built-in < `leaderboard:` section of --params < flags.")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default params.yaml)")
    helps = {"out_dir": "writes leaderboard.csv, summary.md, training_curves.png",
             "metrics": "headline metrics JSON for dvc", "metrics_dir": "folder of stage metrics JSON",
             "train_run": "the default training run folder", "sweep_results": "the sweep's results CSV",
             "sweep_runs": "the sweep's run folders (for hardware)", "fit_dir": "scaling.fit output folder",
             "alignment": "alignment.report CSV", "funnel": "pipeline report data_funnel.csv",
             "top": "leaderboard rows in summary.md"}
    for key, default in DEFAULTS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=int if key == "top" else str,
                            help=f"{helps[key]} (default {default})")
    return parser


def options(args: argparse.Namespace) -> tuple[dict, dict]:
    """(built-in < leaderboard: section < flags, the whole params file); ValueError names bad entries."""
    import yaml

    params = {}
    if args.params.is_file():
        try:
            params = yaml.safe_load(args.params.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ReportError(f"{args.params}: not valid YAML ({type(exc).__name__})") from None
        if not isinstance(params, dict):
            raise ReportError(f"{args.params}: not a YAML mapping")
    section = params.get("leaderboard") or {}
    if not isinstance(section, dict):
        raise ReportError(f"{args.params}: leaderboard: must be a mapping")
    unknown = sorted(set(section) - set(DEFAULTS))
    if unknown:
        raise ReportError(f"{args.params}: leaderboard: unknown keys {unknown} (known: {sorted(DEFAULTS)})")
    opts = {k: getattr(args, k) if getattr(args, k) is not None else section.get(k, v) for k, v in DEFAULTS.items()}
    if not isinstance(opts["top"], int) or isinstance(opts["top"], bool) or opts["top"] < 1:
        raise ReportError(f"leaderboard.top must be a positive integer, got {opts['top']!r}")
    for key, value in opts.items():
        if key != "top" and (not isinstance(value, str) or not value):
            raise ReportError(f"leaderboard.{key} must be a path, got {value!r}")
    return opts, params


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        opts, params = options(args)
        board, head, written = build_report(opts, params)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts = board["kind"].value_counts()
    print(", ".join(f"{counts.get(k, 0)} {k}" for k in ("pretrain", "sweep", "aligned", "scaling_prediction")))
    print(json.dumps(head, sort_keys=True))
    print(f"report: {len(board)} leaderboard rows -> {', '.join(map(str, written))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
