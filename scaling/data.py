"""The files at the edges of the scaling fits: a results table in, fit.json / predictions.csv / a summary out.

Results are read into one validated table with canonical columns ``params``, ``tokens``, ``flops``, ``loss``.

The contract is DESIGN.md "Scaling results": a CSV (or a JSON list of objects, as in the CS336 assignment-3
``isoflops_curves.json``) with at least N, D and the loss; extra columns (d_model, n_layers, lr, …) are kept.
Whichever of D and C is missing is filled in with the training-compute approximation C = 6·N·D
(Kaplan et al. 2020, §2.1; Hoffmann et al. 2022, §3).

Several tables (one sweep under several seeds) are read as one by ``load_many``: runs that repeat an (N, D, C)
point become one row with their mean loss (``average_repeats``).

Held-out runs come in the same way (``load_holdout``: the same aliases and checks, plus ``run_id``) or from a
``python -m model.train`` summary.json, counted as the sweep counted its runs (``sweep_counting``,
``load_summary_holdout``).

The output side lives here too: the fit outputs (fit.json, predictions.csv and holdout.csv, each written to a
temporary file and renamed into place; the DVC metrics: the flat ``headline`` in metrics/fit.json, every prediction
and the held-out runs in metrics/details/fit.json; the printed summary), the grouping of runs into compute budgets
and the stacking of bootstrap samples, so that scaling/isoflop.py, parametric.py and gadre.py hold the math,
scaling/validate.py the checks and scaling/fit.py the CLI.

Every problem raises ``ValueError`` with one line naming the file, the column and the row. Rows count from 1
over the data rows (the CSV header is not a row; in JSON row k is the k-th object).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.files import write_metrics, write_text

CANONICAL = ("params", "tokens", "flops", "loss")
# canonical name -> accepted spellings, in order of preference (the canonical name wins when several are present)
ALIASES: dict[str, tuple[str, ...]] = {
    "params": ("params", "n", "parameters"),
    "tokens": ("tokens", "d"),
    "flops": ("flops", "c", "compute_budget"),
    "loss": ("loss", "final_loss", "val_loss"),
}
# the fit whose prediction headlines metrics/fit.json (and the report's predicted_loss), in order of preference
HEADLINE_METHODS = ("parametric", "isoflop", "isoflop_grid", "gadre")


def parse_columns(specs) -> dict[str, str]:
    """``["params=Model Size", "flops=Training FLOP"]`` -> {canonical: the file's column}; the keys may be the
    canonical names or any alias (N, D, C, loss, ...). A ValueError names a bad spec."""
    out = {}
    for spec in specs or ():
        key, sep, column = str(spec).partition("=")
        canonical = next((name for name, aliases in ALIASES.items() if key.strip().lower() in aliases), None)
        if not sep or canonical is None or not column.strip():
            raise ValueError(f"--columns {spec!r}: expected KEY=COLUMN with KEY one of "
                             f"{', '.join(a for aliases in ALIASES.values() for a in aliases)}")
        out[canonical] = column.strip()
    return out


def load_results(path: str | Path, columns: dict[str, str] | None = None) -> pd.DataFrame:
    """Read a results CSV (any suffix but ``.json``) or JSON list of objects and return ``canonicalize(...)``;
    ``columns`` maps canonical names to the file's own column names (``parse_columns``)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    if path.suffix.lower() == ".json":
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError(f"{path}: expected a JSON list of objects, one per run")
        frame = pd.DataFrame.from_records(records)
    else:
        try:
            frame = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"{path}: not a readable CSV ({msg})") from None
    return canonicalize(frame, source=str(path), columns=columns)


def load_many(paths: list[str | Path], columns: dict[str, str] | None = None) -> pd.DataFrame:
    """One or several results tables (the same sweep under other seeds, say) as one: ``load_results`` of each,
    stacked, then ``average_repeats``; with several, every row keeps the file it came from in ``source``."""
    if len(paths) == 1:
        return average_repeats(load_results(paths[0], columns))
    frames = [load_results(p, columns).assign(source=str(p)) for p in paths]
    return average_repeats(pd.concat(frames, ignore_index=True))


def average_repeats(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows that repeat one (N, D, C) point, e.g. one sweep run under several seeds, as one row: their mean loss,
    ``repeats`` (how many) and ``loss_sd`` (their sample standard deviation, 0 for one), the other columns from the
    first of them. A fit then weighs each point once, and an IsoFLOP grid minimum is not the luckiest seed."""
    keys = ["params", "tokens", "flops"]
    groups = frame.groupby(keys, sort=False)["loss"]
    if groups.ngroups == len(frame):
        return frame
    out = frame.drop_duplicates(keys, keep="first").copy()
    stats = groups.agg(["mean", "count", "std"])
    index = pd.MultiIndex.from_frame(out[keys])
    out["loss"] = stats["mean"].reindex(index).to_numpy()
    out["repeats"] = stats["count"].reindex(index).to_numpy()
    out["loss_sd"] = stats["std"].reindex(index).fillna(0.0).to_numpy()
    return out.reset_index(drop=True)


def _find_column(frame: pd.DataFrame, canonical: str) -> str | None:
    """The input column that supplies ``canonical`` (case-insensitive alias match), or None."""
    by_lower = {}
    for col in frame.columns:
        by_lower.setdefault(str(col).strip().lower(), col)
    for alias in ALIASES[canonical]:
        if alias in by_lower:
            return by_lower[alias]
    return None


def _numeric_column(frame: pd.DataFrame, column: str, canonical: str, source: str) -> np.ndarray:
    """``frame[column]`` as float64; raises on the first missing, non-numeric, non-finite or non-positive value."""
    raw = frame[column]
    label = f"column '{canonical}'" + ("" if str(column) == canonical else f" (from '{column}')")
    values = pd.to_numeric(raw, errors="coerce").astype("float64").to_numpy()
    missing = raw.isna().to_numpy()
    non_numeric = (np.isnan(values) & ~missing) | raw.map(lambda v: isinstance(v, bool)).to_numpy(dtype=bool)
    bad = missing | non_numeric | ~np.isfinite(values) | (values <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        value = raw.iloc[i]
        value = value.item() if isinstance(value, np.generic) else value  # repr 5.0, not np.float64(5.0)
        if non_numeric[i]:
            problem = f"non-numeric value {value!r}"
        elif missing[i]:
            problem = "missing or NaN value"
        elif not np.isfinite(values[i]):
            problem = f"value {value!r} is not finite"
        else:
            problem = f"value {value!r} must be > 0"
        raise ValueError(f"{source}: {label} row {i + 1}: {problem}")
    return values


def canonicalize(frame: pd.DataFrame, source: str = "<results>", columns: dict[str, str] | None = None
                 ) -> pd.DataFrame:
    """Rename aliases (or the ``columns`` given: {canonical: the file's column}) to canonical columns, validate
    them, fill D = C/(6N) or C = 6ND; extra columns follow.

    Raises ValueError (one line: ``source``, column, row) on missing columns, empty input, non-numeric,
    missing, non-finite or non-positive values of N, D, C or the loss.
    """
    if len(frame) == 0:
        raise ValueError(f"{source}: no rows")
    for name, column in (columns or {}).items():
        if column not in frame.columns:
            raise ValueError(f"{source}: --columns {name}={column!r}: no such column (found: "
                             f"{', '.join(map(str, frame.columns))})")
    found = {name: (columns or {}).get(name) or _find_column(frame, name) for name in CANONICAL}
    for name in ("params", "loss"):
        if found[name] is None:
            raise ValueError(
                f"{source}: missing column '{name}' (accepted: {', '.join(ALIASES[name])}; "
                f"found: {', '.join(map(str, frame.columns))})"
            )
    if found["tokens"] is None and found["flops"] is None:
        raise ValueError(
            f"{source}: missing column 'tokens' or 'flops' (need one; accepted: "
            f"{', '.join(ALIASES['tokens'] + ALIASES['flops'])}; found: {', '.join(map(str, frame.columns))})"
        )
    values = {name: _numeric_column(frame, col, name, source) for name, col in found.items() if col is not None}
    if "tokens" not in values:
        values["tokens"] = values["flops"] / (6.0 * values["params"])
    if "flops" not in values:
        values["flops"] = 6.0 * values["params"] * values["tokens"]
    out = pd.DataFrame({name: values[name] for name in CANONICAL}, index=range(len(frame)))
    used = {col for col in found.values() if col is not None}
    extras = frame.loc[:, [c for c in frame.columns if c not in used and str(c) not in CANONICAL]]
    return pd.concat([out, extras.reset_index(drop=True)], axis=1)


def load_holdout(path: str | Path) -> pd.DataFrame:
    """Held-out runs (``--holdout``): a table read as the results are (same aliases and checks), with ``run_id``
    (``<stem>:<row>`` when it has none); columns run_id, params, tokens, flops, loss."""
    path = Path(path)
    frame = load_results(path)
    col = next((c for c in frame.columns if str(c).strip().lower() == "run_id"), None)
    ids = frame[col].astype(str).tolist() if col is not None else [f"{path.stem}:{i}" for i in
                                                                      range(1, len(frame) + 1)]
    return pd.DataFrame({"run_id": ids} | {k: frame[k].to_numpy() for k in CANONICAL})


def sweep_counting(frame: pd.DataFrame) -> dict[str, str]:
    """How a scaling.sweep results table counted N and C, read off its own columns (scaling/sweep.py result_row):
    ``params`` is the summary's ``params`` unless it equals ``params_non_embedding`` in every row; C per token is
    ``6N`` when ``flops_actual`` = 6·N·tokens in every row (or there is no ``flops_actual``), else ``exact``."""
    n, tokens = frame["params"].to_numpy(dtype=float), frame["tokens"].to_numpy(dtype=float)
    counting = {"params": "params", "flops": "6N"}
    if "params_non_embedding" in frame:
        non_embedding = pd.to_numeric(frame["params_non_embedding"], errors="coerce").to_numpy(dtype=float)
        if np.allclose(non_embedding, n, rtol=1e-9, atol=0):
            counting["params"] = "params_non_embedding"
    if "flops_actual" in frame:
        actual = pd.to_numeric(frame["flops_actual"], errors="coerce").to_numpy(dtype=float)
        if not np.allclose(actual / tokens, 6.0 * n, rtol=1e-6, atol=0):
            counting["flops"] = "exact"
    return counting


def load_summary_holdout(path: str | Path, counting: dict[str, str]) -> pd.DataFrame:
    """The held-out row of a ``python -m model.train`` summary.json, counted as the sweep counts its runs
    (``sweep_counting``): N = summary[counting["params"]], D = summary["tokens"], loss = summary["val_loss"] (the
    sweep's ``loss`` column), C = 6·N·D (``6N``) or summary["flops"] (``exact``: model/train.py's per-token count,
    6·N_matmul + 12·L·d·T, the sweep's exact mode). ``run_id``: the run folder's name."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    keys = (counting["params"], "tokens", "val_loss") + (("flops",) if counting["flops"] == "exact" else ())
    if not isinstance(summary, dict) or any(k not in summary for k in keys):
        raise ValueError(f"{path}: expected a python -m model.train summary.json with keys {', '.join(keys)}")
    n, d = summary[counting["params"]], summary["tokens"]
    row = {"run_id": path.parent.name or path.stem, "params": n, "tokens": d, "loss": summary["val_loss"],
           "flops": summary["flops"] if counting["flops"] == "exact" else None}
    try:
        if counting["flops"] == "6N":
            row["flops"] = 6.0 * float(n) * float(d)
    except (TypeError, ValueError):
        pass  # canonicalize names the bad value
    frame = canonicalize(pd.DataFrame([row]), source=str(path))
    return frame[["run_id", *CANONICAL]]


def budget_labels(flops: np.ndarray, rtol: float = 1e-2) -> np.ndarray:
    """Each run's compute budget: runs whose C are within ``rtol`` of a neighbour share one (their median)."""
    flops = np.asarray(flops, dtype=float)
    order = np.argsort(flops, kind="stable")
    breaks = np.flatnonzero(np.diff(np.log(flops[order])) > np.log1p(rtol)) + 1
    labels = np.empty_like(flops)
    for members in np.split(order, breaks):
        labels[members] = np.median(flops[members])
    return labels


def stack_samples(samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Bootstrap refits' stats (same keys each) stacked along a new first axis; {} when there are none."""
    return {k: np.stack([s[k] for s in samples]) for k in samples[0]} if samples else {}


def _jsonable(value: object) -> object:
    """numpy → Python, NaN/inf → None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value


def write_outputs(report: dict, out_dir: Path) -> None:
    """fit.json, predictions.csv and (with held-out runs) holdout.csv, each written to a temporary file and renamed
    into place."""
    write_text(out_dir / "fit.json", json.dumps(_jsonable(report), indent=2) + "\n")
    write_text(out_dir / "predictions.csv", pd.DataFrame(_jsonable(report["predictions"])).to_csv(index=False))
    if "holdout" in report:
        write_text(out_dir / "holdout.csv", holdout_table(report["holdout"]).to_csv(index=False))


def holdout_report(holdout: pd.DataFrame, predictions: dict[str, dict], selected: str | None,
                   counting: dict[str, str] | None = None) -> dict:
    """fit.json's ``holdout`` section: each held-out run's measured loss against every method's prediction.

    ``predictions`` ({method: {"value": one per run, "ci95": (lo, hi) or None}}) were made from N, D and C alone;
    this is the first place the held-out losses are read. The largest run (by C) is also spelt out at the top level
    (run_id, n, d, flops, actual_loss, predicted_loss, rel_error, ci95 by method); ``runs`` lists every run."""
    runs = []
    for i, rec in enumerate(holdout.to_dict("records")):
        predicted = {m: float(p["value"][i]) for m, p in predictions.items()}
        ci = {m: [float(p["ci95"][0][i]), float(p["ci95"][1][i])] for m, p in predictions.items()
              if p["ci95"] is not None}
        runs.append({"run_id": str(rec["run_id"]), "n": float(rec["params"]), "d": float(rec["tokens"]),
                     "flops": float(rec["flops"]), "actual_loss": float(rec["loss"]), "predicted_loss": predicted,
                     "rel_error": {m: v / float(rec["loss"]) - 1 for m, v in predicted.items()}, "ci95": ci})
    top = max(runs, key=lambda r: r["flops"])
    return top | {"selected_method": selected, "runs": runs} | ({"counting": counting} if counting else {})


def holdout_table(section: dict) -> pd.DataFrame:
    """holdout.csv: one row per held-out run and method."""
    rows = [{"run_id": r["run_id"], "N": r["n"], "D": r["d"], "C": r["flops"], "loss": r["actual_loss"],
             "method": m, "predicted_loss": v, "rel_error": r["rel_error"][m]}
            for r in section["runs"] for m, v in r["predicted_loss"].items()]
    return pd.DataFrame(rows, columns=["run_id", "N", "D", "C", "loss", "method", "predicted_loss", "rel_error"])


def prediction_metrics(report: dict) -> dict:
    """The detailed fit metrics (metrics/details/fit.json): n_opt, d_opt, loss, valid and selected per
    ``{method}@{target C}``, and the ``holdout`` section when there is one."""
    stats: dict = {f"{row['method']}@{row['target_flops']:.0e}": {k: float(row[k]) for k in ("n_opt", "d_opt", "loss")}
                   | {"valid": bool(row.get("valid", True)), "selected": bool(row.get("selected", False))}
                   for row in report["predictions"]}
    if "holdout" in report:
        stats["holdout"] = _jsonable(report["holdout"])
    return stats


def headline(report: dict) -> dict:
    """The fit's flat DVC metrics: the selected method's compute-optimal params and tokens and predicted loss at
    the largest target budget C (``flops``), when that fit is valid; with a held-out run, its measured loss
    (``holdout_loss``) and the selected method's relative error on it (``holdout_rel_error``)."""
    method = (report.get("selection") or {}).get("method")
    rows = [r for r in report["predictions"] if r["method"] == method and r.get("valid", True)]
    out: dict = {}
    if rows:
        row = max(rows, key=lambda r: r["target_flops"])
        out = {"flops": float(row["target_flops"]), "params": float(row["n_opt"]), "tokens": float(row["d_opt"]),
               "loss": float(row["loss"])}
    holdout = report.get("holdout")
    if holdout:
        out["holdout_loss"] = holdout["actual_loss"]
        if method in holdout["rel_error"]:
            out["holdout_rel_error"] = holdout["rel_error"][method]
    return out


def write_fit_metrics(report: dict, path: Path) -> None:
    """metrics/fit.json (``headline``) for ``dvc metrics show`` and metrics/details/fit.json (every prediction)."""
    write_metrics(path, prediction_metrics(report), _jsonable(headline(report)))


# ---------------------------------------------------------------- the printed summary
def _ci(ci: list, fmt: str) -> str:
    """" [lo, hi]", or "" without a bootstrap (no CI, never "[nan, nan]")."""
    lo, hi = (float(np.asarray(v)) if v is not None else np.nan for v in ci)
    return f" [{lo:{fmt}}, {hi:{fmt}}]" if np.isfinite(lo) and np.isfinite(hi) else ""


def _law_lines(report: dict) -> list[str]:
    """One line per fitted law: N_opt(C), D_opt(C) with exponent CIs, the loss law and its parameters."""
    def law(sec: dict, name: str) -> str:
        coef, exponent = sec[name]["coef"]["value"], sec[name]["exponent"]
        return f"{name[0].upper()}{name[1:]} = {float(coef):.4g}*C^{float(exponent['value']):.4f}" \
               f"{_ci(exponent['ci95'], '.4f')}"

    def values(sec: dict, names: tuple[str, ...]) -> str:
        return " ".join(f"{k}={float(sec[k]['value']):.4g}{_ci(sec[k]['ci95'], '.4g')}" for k in names)

    lines = []
    for variant in ("parabola", "grid_minimum") if "isoflop" in report else ():
        sec = report["isoflop"][variant]
        loss = {k: float(sec["loss"][k]["value"]) for k in ("E", "A", "gamma")}
        lines.append(f"isoflop/{variant:<13} {law(sec, 'n_opt')}   {law(sec, 'd_opt')}   "
                     f"L_opt = {loss['E']:.4g} + {loss['A']:.4g}*C^-{loss['gamma']:.4f}")
    for name, params in (("parametric", ("E", "A", "B", "alpha", "beta")), ("gadre", ("E", "a", "b", "eta"))):
        if name in report:
            sec = report[name]
            lines.append(f"{name:<21} {law(sec, 'n_opt')}   {law(sec, 'd_opt')}   "
                         f"max rel loss error {sec['max_rel_loss_error']:.2g}\n{'':<21} {values(sec, params)}")
    return lines


def frontier_note(frontier: dict | None) -> str | None:
    """The warning for a sweep whose best loss per budget falls faster at its larger budgets (fit.json's
    ``frontier``, scaling/frontier.py); None when it does not. The fit's summary and reports/summary.md print it."""
    if not (frontier or {}).get("accelerating"):
        return None
    drops = frontier.get("drop_per_doubling")
    speed = (f" ({np.mean(drops[:2]):.3f} at the smallest budgets to {np.mean(drops[-2:]):.3f} at the largest, in ln L "
             f"per doubling of C)") if drops else ""
    return (f"frontier accelerating: the best loss per budget falls faster at the larger budgets{speed}; curvature of "
            f"ln L against log2 C {frontier['curvature']:.4f} +- {frontier['curvature_se']:.4f}: the runs are still in "
            f"a transient that no law here can follow (each only falls slower with compute): do not trust their "
            f"extrapolations far beyond the sweep (scaling/frontier.py)")


def _validation_lines(report: dict) -> list[str]:
    """Leave-the-largest-budget-out errors, the selected method and why, the invalid fits."""
    lines = []
    lobo = {m: v for m, v in (report.get("leave_largest_budget_out") or {}).items() if "rel_error" in v}
    if lobo:
        first = next(iter(lobo.values()))
        lines.append(f"leave-the-largest-budget-out (the best run of C={first['budget']:.3g}, loss "
                     f"{first['run']['loss']:.4g}, predicted from the smaller budgets, [95% prediction interval]): "
                     + ", ".join(f"{m} {v['predicted_loss']:.4g}{_ci(v.get('pi95') or [None, None], '.4g')} "
                                 f"({v['rel_error']:+.2%})" for m, v in lobo.items()))
    rolling = report.get("rolling_origin") or {}
    if rolling.get("score"):
        lines.append(f"rolling origin (mean |error| predicting runs >= {rolling['distance']:g}x the compute fitted, "
                     f"{len(rolling['origins'])} origin(s); what to expect of an extrapolation that far): " +
                     ", ".join(f"{m} {v:.2%}" for m, v in sorted(rolling["score"].items(), key=lambda kv: kv[1])))
    note = frontier_note(report.get("frontier"))
    if note:
        lines.append(note)
    invalid = [m for m, v in (report.get("validity") or {}).items() if not v["valid"]]
    if invalid:
        lines.append(f"invalid fits, left out of the table below (reasons: the warnings; fit.json and predictions.csv "
                     f"keep them with valid=false): {', '.join(invalid)}")
    selection = report.get("selection") or {}
    if selection.get("method"):
        lines.append(f"selected: {selection['method']}{'' if selection['valid'] else ' (INVALID)'}: "
                     f"{selection['why']}")
    return lines


def _holdout_lines(report: dict) -> list[str]:
    holdout = report.get("holdout")
    if not holdout:
        return []
    selected = holdout.get("selected_method")
    lines = []
    for run in holdout["runs"]:
        lines.append(f"held-out run {run['run_id']}: N={run['n']:.4g} D={run['d']:.4g} C={run['flops']:.4g}, "
                     f"measured loss {run['actual_loss']:.4f}")
        for m, value in run["predicted_loss"].items():
            lines.append(f"  {m:<13} predicted {value:.4f}{_ci(run['ci95'].get(m, [None, None]), '.4f')}  "
                         f"error {run['rel_error'][m]:+.2%}{'  (selected)' if m == selected else ''}")
    return lines


def format_summary(report: dict) -> str:
    """The fitted laws (exponent 95% CIs), one table row per valid (method, target budget), the validation, the
    selected method and the held-out runs."""
    lines = _law_lines(report) + _validation_lines(report)
    skipped = (report.get("isoflop") or {}).get("skipped_budgets") or []
    if skipped:
        named = ", ".join(f"C={b['flops']:.3g} ({b['model_sizes']} size{'s' * (b['model_sizes'] != 1)})"
                          for b in skipped)
        lines.append(f"isoflop: {len(skipped)} budget(s) with < 3 model sizes left out of approach 2: {named}")
    unbracketed = (report.get("isoflop") or {}).get("unbracketed_budgets") or []
    if unbracketed:
        lines.append(f"isoflop: {len(unbracketed)} budget(s) whose runs do not bracket the optimum left out of "
                     f"approach 2: " + ", ".join(f"C={b['flops']:.3g} ({b['why']})" for b in unbracketed))
    if report.get("outliers"):
        out = report["outliers"]
        runs = ", ".join(f"N={r['params']:.3g} D={r['tokens']:.3g} loss={r['loss']:.4g}" for r in out["dropped"])
        lines.append(f"outliers ({out['rule']}, left out of every fit): {runs}")
    lines.append(f"{'method':<13}{'C':>9}  {'N_opt [95% CI]':<30}{'D_opt [95% CI]':<30}{'D/N':>7}  "
                 f"{'loss [95% CI]':<26}at bound")
    shown = [r for r in report["predictions"] if r.get("valid", True)]
    for r in shown:
        cell = {q: f"{r[q]:.3g}{_ci([r[q + '_lo'], r[q + '_hi']], '.3g')}" for q in ("n_opt", "d_opt", "loss")}
        lines.append(f"{r['method']:<13}{r['target_flops']:>9.3g}  {cell['n_opt']:<30}{cell['d_opt']:<30}"
                     f"{r['tokens_per_param']:>7.1f}  {cell['loss']:<26}{r.get('at_bound') or '-'}".rstrip())
    if not shown:
        lines.append("(no valid fit: no predictions)")
    return "\n".join(lines + _holdout_lines(report))
