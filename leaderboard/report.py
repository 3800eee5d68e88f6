"""The final report of the whole pipeline: leaderboard, markdown summary, training-curve plot and headline metrics.

``python -m leaderboard.report`` reads what the stages already wrote — their detailed metrics
``metrics/details/*.json`` (the flat ``metrics/*.json`` beside them are only for ``dvc metrics show``), the default
training run (``summary.json``, ``config.json``, ``metrics.csv``), the sweep's ``results.csv``, the fit's
``predictions.csv`` and ``holdout.csv`` (or ``metrics/details/fit.json``), ``reports/alignment.csv`` and
``reports/data_funnel.csv`` — and writes:

- ``leaderboard.csv``: one row per run (the default pretraining run, every sweep run, every aligned model) plus
  one per scaling-law prediction of a valid fit (scaling/select.py; an invalid fit's rows are left out) and one
  ``holdout_check`` per held-out run the fit predicted (the fit's selected method's ``predicted_loss`` beside the
  run's measured ``val_loss``, its ``rel_error``, and N, D, C as the fit counted them), with the columns of the
  CS336 leaderboards (data recipe, tokenizer, model shape, params, tokens, FLOPs (C = 6·N·D for every run, the
  accounting of the sweep and the fits, so runs and predictions compare), wall-clock, hardware, validation loss;
  accuracy for aligned models);
- ``summary.md``: per-stage seconds, the data funnel, the training result, the scaling predictions (with the fit's
  fit.json: the selected law and why, each law left out and why, a sweep still in a transient), predicted vs
  actual loss of the held-out runs (every method), alignment accuracy, the top of the leaderboard, and links to
  every plot (relative paths);
- ``training_curves.png`` (leaderboard/plots.py), and ``scaling.png`` only when the fit's PNGs are missing;
- ``--metrics`` (``metrics/report.json``): the flat ``headline`` for ``dvc metrics show``; the full numbers
  (``report_stats``: every method's prediction, every aligned model's accuracy) go to ``metrics/details/report.json``.

Alignment results are read as files, never imported (DESIGN.md: ``scaling`` and ``alignment`` do not import each
other). A missing input leaves its rows or table out with one ``warning:`` line; an unreadable one (corrupt JSON
or CSV, a missing column) is bad input: one ``error:`` line naming the file, exit 2. Defaults: LeaderboardConfig <
the ``leaderboard:`` section of --params (params.yaml; an unknown key is an error) < flags; the recipe is read from
its filter/dedup/tokenizer sections.
Every output is written to a temporary file and renamed into place; the same inputs give the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pandas as pd

from leaderboard import plots
from scaling.report import frontier_note
from workbench.files import details_path, write_bytes, write_metrics
from workbench.params import Checked, ParamsError, params_path, parse_config, read_params, setting

COLUMNS = ["run_id", "kind", "data_recipe", "tokenizer", "preset", "d_model", "n_layers", "n_heads", "params",
           "tokens", "flops", "wall_clock_s", "hardware", "val_loss", "val_perplexity", "task", "accuracy",
           "refusal_rate", "target_flops", "n_opt", "d_opt", "predicted_loss", "rel_error"]
INTEGER_COLUMNS = ("d_model", "n_layers", "n_heads", "params", "tokens", "flops")
FIT_PNGS = ("isoflop_curves.png", "optimal_allocation.png", "parametric_contours.png")
STAGE_ORDER = ("extract", "filter", "dedup", "tokenizer", "shards", "train", "sweep", "fit", "sft", "dpo", "grpo",
               "alignment")


class ReportError(ValueError):
    """Bad input: one line naming the file."""


@dataclass(frozen=True)
class LeaderboardConfig(Checked):
    """The ``leaderboard:`` section of params.yaml; every field is also a flag."""

    SECTION = "leaderboard"

    out_dir: str = setting("reports", "writes leaderboard.csv, summary.md, training_curves.png")
    metrics: str = setting("metrics/report.json", "headline metrics JSON for dvc (the full report metrics go to "
                                                  "details/)")
    metrics_dir: str = setting("metrics", "folder of stage metrics JSON (reads details/)")
    train_run: str = setting("data/runs/default", "the default training run folder")
    sweep_results: str = setting("data/sweep/results.csv", "the sweep's results CSV")
    sweep_runs: str = setting("data/sweep/runs", "the sweep's run folders (for hardware)")
    fit_dir: str = setting("data/sweep/fit", "scaling.fit output folder")
    alignment: str = setting("reports/alignment.csv", "alignment.report CSV")
    funnel: str = setting("reports/data_funnel.csv", "pipeline report data_funnel.csv")
    top: int = setting(10, "leaderboard rows in summary.md", at_least=1)

    def __post_init__(self) -> None:  # a non-empty path: no declaration states it
        super().__post_init__()
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "top" and (not isinstance(value, str) or not value):
                raise ReportError(f"leaderboard.{f.name} must be a path, got {value!r}")


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
             "accuracy": _num(rec["accuracy"]), "refusal_rate": _num(rec.get("refusal_rate")),
             "wall_clock_s": (metrics.get(str(rec["stage"])) or {}).get("seconds")}
            for rec in frame.to_dict("records")]


def predictions(fit_dir: Path, metrics: dict) -> pd.DataFrame | None:
    """method, target_flops, n_opt, d_opt, loss, selected of the valid fits: the fit's predictions.csv, else
    metrics/fit.json's {method}@{C} entries. A row marked ``valid`` false (scaling/select.py) is left out."""
    frame = read_csv(fit_dir / "predictions.csv", ("method", "target_flops", "n_opt", "d_opt", "loss"))
    if frame is not None:
        frame = frame.assign(valid=_flags(frame, "valid", True), selected=_flags(frame, "selected", False))
        return frame[frame["valid"]][["method", "target_flops", "n_opt", "d_opt", "loss", "selected"]]
    fit = metrics.get("fit")
    if not fit:
        return None
    rows = []
    for key, value in fit.items():
        method, at, budget = key.partition("@")
        if not at or not isinstance(value, dict) or value.get("valid") is False:
            continue  # the holdout section, or an invalid fit
        rows.append({"method": method, "target_flops": _num(budget)} | {k: value.get(k) for k in
                                                                       ("n_opt", "d_opt", "loss")}
                    | {"selected": bool(value.get("selected", False))})
    return pd.DataFrame(rows, columns=["method", "target_flops", "n_opt", "d_opt", "loss", "selected"])


def _flags(frame: pd.DataFrame, column: str, default: bool) -> pd.Series:
    """A true/false column of predictions.csv as booleans (``default`` when the column is absent)."""
    if column not in frame:
        return pd.Series(default, index=frame.index)
    return frame[column].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


def holdout(fit_dir: Path, metrics: dict) -> tuple[pd.DataFrame | None, str | None]:
    """The held-out runs the fit predicted (scaling.fit --holdout / --holdout-summary), one row per run and method
    (run_id, N, D, C, loss, method, predicted_loss, rel_error), and the fit's selected method: the fit's holdout.csv
    and fit.json, else the ``holdout`` section of metrics/fit.json; (None, None) when the fit had none."""
    columns = ["run_id", "N", "D", "C", "loss", "method", "predicted_loss", "rel_error"]
    frame = read_csv(fit_dir / "holdout.csv", tuple(columns))
    if frame is not None and {"pi_lo", "pi_hi"} <= set(frame.columns):
        columns += ["pi_lo", "pi_hi"]
    fit_json = (read_json(fit_dir / "fit.json") or {}) if frame is not None else {}
    details = metrics.get("fit") or {}
    section = fit_json.get("holdout") or details.get("holdout")
    if frame is None and isinstance(section, dict):
        frame = pd.DataFrame([{"run_id": run["run_id"], "N": run["n"], "D": run["d"], "C": run["flops"],
                               "loss": run["actual_loss"], "method": method, "predicted_loss": value,
                               "rel_error": run["rel_error"].get(method)}
                              for run in section.get("runs", []) for method, value in run["predicted_loss"].items()],
                             columns=columns)
    if frame is None:
        return None, None
    selected = section.get("selected_method") if isinstance(section, dict) else None
    if selected not in set(frame["method"]):
        selected = None  # no valid law: no prediction is the selected one
    # each method's validity: fit.json's ``validity``, else the ``valid`` flags of the metrics' predictions
    valid = {m: bool(v.get("valid")) for m, v in (fit_json.get("validity") or {}).items() if isinstance(v, dict)}
    for key, value in details.items():
        if "@" in key and isinstance(value, dict) and "valid" in value:
            valid.setdefault(key.partition("@")[0], bool(value["valid"]))
    return frame[columns].assign(valid=[valid.get(m) for m in frame["method"]]), selected


def holdout_rows(frame: pd.DataFrame | None, selected: str | None) -> list[dict]:
    """One ``holdout_check`` row per held-out run: its measured loss beside the selected method's prediction."""
    if frame is None or selected is None:
        return []
    return [{"run_id": f"{selected}@{r['run_id']}", "kind": "holdout_check", "params": r["N"], "tokens": r["D"],
             "flops": r["C"], "val_loss": r["loss"], "predicted_loss": r["predicted_loss"],
             "rel_error": r["rel_error"]} for r in frame[frame["method"] == selected].to_dict("records")]


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


def holdout_markdown(frame: pd.DataFrame | None, selected: str | None) -> str | None:
    """Predicted against measured loss for each held-out run, every method (the selected one marked)."""
    if frame is None or not len(frame):
        return None
    table = frame.assign(method=[f"**{m}** (selected)" if m == selected else m for m in frame["method"]])
    table = table.rename(columns={"loss": "actual_loss"})
    table["rel_error"] = [f"{v:+.2%}" if _num(v) is not None else "" for v in table["rel_error"]]
    table["valid fit"] = [{True: "yes", False: "no"}.get(v, "") for v in table["valid"]]
    shown = ["run_id", "N", "D", "C", "method", "actual_loss", "predicted_loss", "rel_error", "valid fit"]
    if "pi_lo" in table:  # the 95 % prediction interval (scaling/intervals.py) and whether it holds the run
        table["95% PI"] = [f"[{lo:.4g}, {hi:.4g}]" if _num(lo) is not None else "" for lo, hi in
                           zip(table["pi_lo"], table["pi_hi"], strict=True)]
        table["inside"] = ["yes" if lo <= y <= hi else "no" if _num(lo) is not None else "" for lo, hi, y in
                           zip(table["pi_lo"], table["pi_hi"], table["actual_loss"], strict=True)]
        shown[7:7] = ["95% PI", "inside"]
    return md_table(table[shown])


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


def fit_notes(fit_dir: Path, train_tokens: float | None = None, sweep_tokens: float | None = None) -> str | None:
    """From the fit's fit.json: the selected law and why (or that no law is valid), each law left out and why, why
    this sweep extrapolates poorly when it does (a transient: scaling/frontier.py; repeated data: tokens over the
    ``train_tokens`` of the train split) with its measured rolling-origin error, and the frontier's warning; None
    without fit.json."""
    report = read_json(fit_dir / "fit.json")
    if not report:
        return None
    lines = []
    selection = report.get("selection") or {}
    if selection.get("method"):
        lines.append(f"- **selected: {selection['method']}**: {selection.get('why', '')}")
        if selection.get("bound_limited"):
            lines.append(f"- **bound-limited**: {', '.join(selection['bound_limited'])} of the selected law sits at "
                         f"the optimizer's bound: its predictions are set by that bound, not by the runs")
    else:
        lines.append(f"- **no valid law: nothing selected** ({selection.get('why', '')})")
    for method, check in (report.get("validity") or {}).items():
        if not check.get("valid", True):
            lines.append(f"- left out: {method}: {'; '.join(check.get('reasons') or [])}")
    poorly = extrapolation_note(report, train_tokens, sweep_tokens)
    if poorly:
        lines.append(f"- {poorly}")
    note = frontier_note(report.get("frontier"))
    if note:
        lines.append(f"- {note}")
    return "\n".join(lines) or None


def extrapolation_note(report: dict, train_tokens: float | None, sweep_tokens: float | None) -> str | None:
    """One line: why this sweep extrapolates poorly (its frontier still in a transient, its runs repeating the train
    split), with the selected law's measured rolling-origin error and the held-out run's interval; None when neither
    cause is seen."""
    causes = []
    if (report.get("frontier") or {}).get("accelerating"):
        causes.append("its best loss per budget still falls faster at the larger budgets (a training transient no "
                      "law here can follow)")
    holdout = report.get("holdout") or {}
    epochs = {name: tokens / train_tokens for name, tokens in (("its largest runs", sweep_tokens),
                                                               ("the held-out run", holdout.get("d")))
              if tokens and train_tokens}
    if any(e > 1 for e in epochs.values()):
        causes.append("its runs repeat the train split (" + ", ".join(f"{k} {v:.1f} epochs" for k, v in
                                                                      epochs.items()) + ")")
    if not causes:
        return None
    method = (report.get("selection") or {}).get("method")
    rolling = report.get("rolling_origin") or {}
    score = (rolling.get("score") or {}).get(method)
    measured = f"; measured: the selected law ({method}) misses runs {rolling['distance']:.3g}x beyond what it was " \
               f"fitted on by {score:.1%} on average (rolling origin)" if score is not None else ""
    interval = ""
    if method and method in (holdout.get("interval") or {}):
        lo, hi = holdout["interval"][method]["pi95"]
        predicted = holdout["predicted_loss"][method]
        interval = (f"; the held-out run {holdout['run_id']}: predicted {predicted:.4g}, 95% prediction interval "
                    f"[{lo:.4g}, {hi:.4g}] (half-width {(hi - lo) / 2 / predicted:.0%})")
    return f"**This sweep extrapolates poorly**: {' and '.join(causes)}{measured}{interval}."


def summary_markdown(board: pd.DataFrame, seconds: pd.DataFrame, funnel: pd.DataFrame | None,
                     images: list[Path], out_dir: Path, top: int, held_out: str | None = None,
                     notes: str | None = None) -> str:
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
    table = md_table(preds[["method", "target_flops", "n_opt", "d_opt", "predicted_loss"]]) if len(preds) else None
    section("Scaling-law predictions", "\n\n".join(x for x in (table, notes) if x) or None, "no valid fit predictions")
    section("Held-out run: predicted vs actual loss", held_out,
            "no held-out run (python -m scaling.fit --holdout / --holdout-summary)")
    aligned = board[board["kind"] == "aligned"].rename(columns={"run_id": "stage"})
    rates = ["refusal_rate"] if aligned["refusal_rate"].notna().any() else []  # safety rows: refusal, no accuracy
    section("Alignment accuracy", md_table(aligned[["stage", "task", "accuracy", *rates, "wall_clock_s"]])
            if len(aligned) else None, "no alignment results")
    ranked = board[board["kind"].isin(["pretrain", "sweep"])].sort_values("val_loss", kind="stable").head(top)
    section(f"Leaderboard (pretrain + sweep, top {top} by val_loss)",
            md_table(ranked[["run_id", "kind", "preset", "params", "tokens", "flops", "wall_clock_s", "val_loss"]])
            if len(ranked) else None, "no runs")
    links = [f"![{p.stem}]({Path(os.path.relpath(p.resolve(), out_dir.resolve())).as_posix()})" for p in images]
    section("Plots", "\n".join(links) if links else None, "no plots")
    return "\n".join(out)


def report_stats(board: pd.DataFrame, seconds: pd.DataFrame) -> dict:
    """The report's full metrics (metrics/details/report.json): val_loss, val_perplexity, best sweep loss, each
    method's predicted loss at the largest budget, each aligned model's accuracy, total seconds."""
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
    checks = board[board["kind"] == "holdout_check"]
    if len(checks):
        out["holdout"] = {r["run_id"]: {"flops": _num(r["flops"]), "actual_loss": _num(r["val_loss"]),
                                        "predicted_loss": _num(r["predicted_loss"]), "rel_error": _num(r["rel_error"])}
                          for r in checks.to_dict("records")}
    out |= aligned_stats(board[board["kind"] == "aligned"])
    if len(seconds):
        out["pipeline_seconds"] = round(float(seconds["seconds"].sum()), 3)
    return out


def aligned_stats(aligned: pd.DataFrame) -> dict:
    """Each aligned model's accuracy (keyed by stage, or stage/task when a stage is scored on several tasks) and
    refusal rate: a task's own column only, so a safety row (no accuracy) never blanks a scored task's."""
    out = {}
    scored = aligned[aligned["accuracy"].notna()]
    if len(scored):
        several = scored.groupby("run_id")["task"].nunique().max() > 1
        out["accuracy"] = {f"{r}/{t}" if several else r: _num(v)
                           for r, t, v in zip(scored["run_id"], scored["task"], scored["accuracy"], strict=True)}
    safety = aligned[aligned["refusal_rate"].notna()]
    if len(safety):
        out["refusal_rate"] = {r: _num(v) for r, v in zip(safety["run_id"], safety["refusal_rate"], strict=True)}
    return out


def headline(stats: dict, selected: str | None = None) -> dict:
    """metrics/report.json for ``dvc metrics show``, flat: the default run's val_loss, the best aligned accuracy,
    the best sweep loss, the predicted loss at the largest budget (by the fit's selected law; none when no law is
    valid), the held-out run's relative error (``holdout_rel_error``, the largest
    held-out run by C) and the summed stage seconds."""
    out = {k: stats[k] for k in ("val_loss", "best_sweep_loss") if k in stats}
    predicted = stats.get("predicted_loss") or {}
    by_method = {run_id.partition("@")[0]: loss for run_id, loss in predicted.items()}
    method = selected if selected in by_method else None  # no valid law: no predicted loss
    if method is not None:
        out["predicted_loss"] = by_method[method]
    checks = list((stats.get("holdout") or {}).values())
    if checks:
        largest = max(checks, key=lambda c: c["flops"] or 0.0)
        if largest["rel_error"] is not None:
            out["holdout_rel_error"] = largest["rel_error"]
    accuracies = [v for v in (stats.get("accuracy") or {}).values() if v is not None]
    if accuracies:
        out["accuracy"] = max(accuracies)
    if "pipeline_seconds" in stats:
        out["pipeline_seconds"] = stats["pipeline_seconds"]
    return out


# ---------------------------------------------------------------- outputs and CLI
def stage_details(metrics_dir: Path, own_metrics: Path) -> dict[str, dict]:
    """Every stage's detailed metrics, ``<metrics_dir>/details/<stage>.json``, by stage (the report's own left out)."""
    own = details_path(own_metrics).resolve()
    folder = details_path(metrics_dir / "any.json").parent  # where workbench.files.write_metrics puts details
    metrics = {p.stem: read_json(p) for p in sorted(folder.glob("*.json")) if p.resolve() != own}
    if not metrics:
        warn(f"no metrics JSON in {folder}: recipe, stage seconds and fit metrics left out")
    return metrics


def build_report(cfg: LeaderboardConfig, params: dict) -> tuple[pd.DataFrame, dict, list[Path]]:
    """Read every input, write leaderboard.csv, the PNGs, summary.md and the metrics; return (leaderboard, the
    report's full metrics, paths written)."""
    out_dir, metrics_out = Path(cfg.out_dir), Path(cfg.metrics)
    metrics = stage_details(Path(cfg.metrics_dir), metrics_out)
    common = {"data_recipe": data_recipe(params, metrics), "tokenizer": tokenizer_label(params, metrics)}
    train_run, results, fit_dir = Path(cfg.train_run), Path(cfg.sweep_results), Path(cfg.fit_dir)
    preds = predictions(fit_dir, metrics)
    held_out, selected = holdout(fit_dir, metrics)
    rows = (pretrain_rows(train_run, common) + sweep_rows(results, Path(cfg.sweep_runs), common)
            + aligned_rows(Path(cfg.alignment), metrics, common["tokenizer"]) + prediction_rows(preds, fit_dir)
            + holdout_rows(held_out, selected))
    if not rows:
        raise ReportError("nothing to report: no training run, sweep results, alignment results or fit predictions")
    board = _integer_columns(pd.DataFrame(rows, columns=COLUMNS))
    written = [write_bytes(out_dir / "leaderboard.csv", board.to_csv(index=False).encode())]
    drawn = draw_plots(cfg, preds)
    funnel_path = Path(cfg.funnel)
    linked = [p for p in (funnel_path.with_suffix(".png"), Path(cfg.alignment).with_suffix(".png")) if p.is_file()]
    images = drawn + [fit_dir / name for name in FIT_PNGS if (fit_dir / name).is_file()] + linked
    funnel = read_csv(funnel_path)
    if funnel is None:
        warn(f"no {funnel_path}: data funnel table left out")
    seconds = stage_seconds(metrics, results)
    sweep_tokens = _num(pd.to_numeric(board.loc[board["kind"] == "sweep", "tokens"], errors="coerce").max())
    train_tokens = _num((metrics.get("shards") or {}).get("train_tokens"))
    text = summary_markdown(board, seconds, funnel, images, out_dir, cfg.top, holdout_markdown(held_out, selected),
                            fit_notes(fit_dir, train_tokens, sweep_tokens))
    written.append(write_bytes(out_dir / "summary.md", text.encode()))
    stats = report_stats(board, seconds)
    chosen = preds[preds["selected"]]["method"] if preds is not None and len(preds) else []
    written.append(write_metrics(metrics_out, stats, headline(stats, next(iter(chosen), None))))
    return board, stats, written + drawn


def draw_plots(cfg: LeaderboardConfig, preds: pd.DataFrame | None) -> list[Path]:
    """training_curves.png, and scaling.png when the fit's own PNGs are missing; the paths drawn."""
    out_dir, train_run, results, fit_dir = (Path(p) for p in (cfg.out_dir, cfg.train_run, cfg.sweep_results,
                                                             cfg.fit_dir))
    curves = read_csv(train_run / "metrics.csv", ("tokens", "loss"))
    sweep = read_csv(results) if results.is_file() else None
    drawn = [plots.training_curves(curves, sweep, out_dir / "training_curves.png")]
    if not any((fit_dir / name).is_file() for name in FIT_PNGS) and preds is not None and len(preds):
        drawn.append(plots.scaling_plot(preds, sweep, out_dir / "scaling.png"))
    return [p for p in drawn if p is not None]


def load_config(argv: list[str] | None) -> tuple[LeaderboardConfig, dict]:
    """(LeaderboardConfig < ``leaderboard:`` section of --params < flags, the whole params file for the recipe)."""
    try:
        cfg, args = parse_config(LeaderboardConfig, "leaderboard", argv, prog="python -m leaderboard.report",
                                 description=__doc__.split("\n\n")[0])
        return cfg, read_params(args.params)
    except ParamsError as exc:
        if exc.unknown:  # the wording this CLI has always used
            known = sorted(f.name for f in fields(LeaderboardConfig))
            raise ReportError(f"{params_path(argv)}: leaderboard: unknown keys {exc.unknown} (known: {known})") \
                from None
        raise ReportError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, params = load_config(argv)
        board, stats, written = build_report(cfg, params)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts = board["kind"].value_counts()
    print(", ".join(f"{counts.get(k, 0)} {k}" for k in ("pretrain", "sweep", "aligned", "scaling_prediction",
                                                         "holdout_check")))
    print(json.dumps(stats, sort_keys=True))
    print(f"report: {len(board)} leaderboard rows -> {', '.join(map(str, written))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
