"""The fit's outputs: fit.json, predictions.csv and holdout.csv (each written to a temporary file and renamed into
place), the DVC metrics (the flat ``headline`` in metrics/fit.json, every prediction and the held-out runs in
metrics/details/fit.json) and the printed summary, all from the report of scaling/predict.py ``fit_and_predict``.

Every printed interval is a 95 % prediction interval (scaling/intervals.py), never a bound <= 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.files import write_metrics, write_text


def jsonable(value: object) -> object:
    """numpy → Python, NaN/inf → None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value


def holdout_table(section: dict) -> pd.DataFrame:
    """holdout.csv: one row per held-out run and law, with its 95 % prediction interval."""
    columns = ["run_id", "N", "D", "C", "loss", "method", "predicted_loss", "pi_lo", "pi_hi", "rel_error", "covered",
               "valid", "selected"]
    rows = [{"run_id": r["run_id"], "N": r["n"], "D": r["d"], "C": r["flops"], "loss": r.get("actual_loss"),
             "method": m, "predicted_loss": v, "pi_lo": r["interval"][m]["pi95"][0],
             "pi_hi": r["interval"][m]["pi95"][1], "rel_error": (r.get("rel_error") or {}).get(m),
             "covered": (r.get("covered") or {}).get(m), "valid": r["valid"][m],
             "selected": m == section.get("selected_method")}
            for r in section["runs"] for m, v in r["predicted_loss"].items()]
    return pd.DataFrame(rows, columns=columns)


def write_outputs(report: dict, out_dir: Path) -> None:
    """fit.json, predictions.csv and (with held-out runs) holdout.csv."""
    write_text(out_dir / "fit.json", json.dumps(jsonable(report), indent=2) + "\n")
    write_text(out_dir / "predictions.csv", pd.DataFrame(jsonable(report["predictions"])).to_csv(index=False))
    if "holdout" in report:
        write_text(out_dir / "holdout.csv", holdout_table(report["holdout"]).to_csv(index=False))


def prediction_metrics(report: dict) -> dict:
    """metrics/details/fit.json: n_opt, d_opt, loss and its interval, valid and selected per ``{method}@{C}``, and
    the ``holdout`` section when there is one."""
    stats: dict = {f"{r['method']}@{r['target_flops']:.0e}": {k: r[k] for k in ("n_opt", "d_opt", "loss", "loss_lo",
                                                                                 "loss_hi")}
                   | {"valid": bool(r["valid"]), "selected": bool(r["selected"])} for r in report["predictions"]}
    if "holdout" in report:
        stats["holdout"] = report["holdout"]
    return jsonable(stats)


def headline(report: dict) -> dict:
    """The flat DVC metrics: the selected law's compute-optimal params and tokens and predicted loss (with its 95 %
    prediction interval) at the largest target C; with a held-out run, its measured loss, the selected law's
    relative error on it and whether its interval covers it. Empty of predictions when no law is valid."""
    method = report["selection"]["method"]
    rows = [r for r in report["predictions"] if r["method"] == method and r["valid"]]
    out: dict = {"selected": method or "none"}
    if rows:
        row = max(rows, key=lambda r: r["target_flops"])
        out |= {"flops": row["target_flops"], "params": row["n_opt"], "tokens": row["d_opt"], "loss": row["loss"],
                "loss_lo": row["loss_lo"], "loss_hi": row["loss_hi"]}
    holdout = report.get("holdout")
    if holdout and "actual_loss" in holdout:
        out["holdout_loss"] = holdout["actual_loss"]
        if method in holdout["rel_error"]:
            out |= {"holdout_rel_error": holdout["rel_error"][method], "holdout_covered": holdout["covered"][method]}
    return jsonable(out)


def write_fit_metrics(report: dict, path: Path) -> None:
    write_metrics(path, prediction_metrics(report), headline(report))


# ---------------------------------------------------------------- the printed summary
def _ci(ci, fmt: str) -> str:
    """" [lo, hi]", or "" without one (never "[nan, nan]")."""
    if ci is None:
        return ""
    lo, hi = (float(v) if v is not None else np.nan for v in ci)
    return f" [{lo:{fmt}}, {hi:{fmt}}]" if np.isfinite(lo) and np.isfinite(hi) else ""


def _law_lines(report: dict) -> list[str]:
    """One line per fitted law: its parameters with bootstrap 95 % CIs."""
    lines = []
    for name, section in report["laws"].items():
        shown = {k: v for k, v in section["parameters"].items() if k not in ("G",)}
        values = " ".join(f"{k}={v['value']:.4g}{_ci(v['ci95'], '.4g')}" for k, v in shown.items())
        lines.append(f"{name:<13} {values}")
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


def selection_line(report: dict) -> str:
    """One line: the selected law and why, or that no law is valid."""
    selection = report["selection"]
    if selection["method"] is None:
        return f"no valid law: nothing selected, no prediction to trust ({selection['why']})"
    line = f"selected: {selection['method']}: {selection['why']}"
    if selection.get("bound_limited"):
        line += (f"; WARNING: bound-limited: {', '.join(selection['bound_limited'])} at the optimizer's bound (the "
                 f"runs do not pin it down), so its predictions are set by that bound, not by the data")
    return line


def _validation_lines(report: dict) -> list[str]:
    lines = [f"layout: {report['layout']}"]
    rolling = report.get("rolling_origin") or {}
    if rolling.get("score"):
        lines.append(f"rolling origin (mean |error| on the {rolling['score_rule']}, {len(rolling['origins'])} "
                     f"origin(s)): " + ", ".join(f"{m} {v:.2%}" for m, v in sorted(rolling["score"].items(),
                                                                                    key=lambda kv: kv[1])))
    note = frontier_note(report.get("frontier"))
    if note:
        lines.append(note)
    for name, check in report["validity"].items():
        if not check["valid"]:
            lines.append(f"invalid: {name}: {'; '.join(check['reasons'])}")
        elif check["notes"]:
            lines.append(f"{'at bound' if check['at_bound'] else 'not pinned'}: {name}: {'; '.join(check['notes'])}")
    return lines + [selection_line(report)]


def _holdout_lines(report: dict) -> list[str]:
    holdout = report.get("holdout")
    if not holdout:
        return []
    selected = holdout.get("selected_method")
    lines = []
    for run in holdout["runs"]:
        measured = f", measured loss {run['actual_loss']:.4f}" if "actual_loss" in run else ""
        lines.append(f"held-out run {run['run_id']}: N={run['n']:.4g} D={run['d']:.4g} C={run['flops']:.4g}"
                     f"{measured} [95% prediction interval]")
        for m, value in run["predicted_loss"].items():
            interval = run["interval"][m]
            error = f"  error {run['rel_error'][m]:+.2%}{'' if run['covered'][m] else ' (outside)'}" \
                if "rel_error" in run else ""
            tag = "  (selected)" if m == selected else "" if run["valid"][m] else "  (invalid)"
            lines.append(f"  {m:<13} predicted {value:.4f}{_ci(interval['pi95'], '.4f')}{error}  "
                         f"[{interval['distance']:.3g}x the sweep; widest part: {interval['dominant']}]{tag}")
    return lines


def trust_lines(rows: list[dict]) -> list[str]:
    """A note for each prediction beyond the distances its law's rolling origin checked, and a warning for each
    whose 95 % interval is wider than the loss itself."""
    lines = []
    for r in rows:
        where = f"{r['method']} at C={r['target_flops']:.3g} ({r.get('distance', np.nan):.3g}x the largest fitted C)"
        reach = r.get("calibrated_distance")
        if reach is not None and np.isfinite(reach) and r.get("distance", 0) > reach * (1 + 1e-9):
            lines.append(f"note: {where}: beyond the {reach:.3g}x its rolling origin checked, so the extrapolation "
                         f"part of the interval is scaled by ln distance, not measured")
        width = r["loss_hi"] - r["loss_lo"]
        if np.isfinite(width) and width > r["loss"]:
            lines.append(f"warning: {where}: the 95% interval [{r['loss_lo']:.3g}, {r['loss_hi']:.3g}] is wider than "
                         f"the loss itself: the sweep cannot speak for this target (a nearer target, or more budgets)")
    return lines


def format_summary(report: dict) -> str:
    """The fitted laws, the validation and selection, one table row per valid (law, target C) with its 95 %
    prediction interval and the part that dominates it, and the held-out runs."""
    lines = _law_lines(report) + _validation_lines(report)
    iso = report["laws"].get("isoflop") or {}
    for key, what in (("skipped_budgets", "with < 3 model sizes"), ("unbracketed_budgets", "whose runs do not "
                                                                                           "bracket the optimum")):
        if iso.get(key):
            lines.append(f"isoflop: {len(iso[key])} budget(s) {what} left out of approach 2: " + ", ".join(
                f"C={b['flops']:.3g}" + (f" ({b['why']})" if "why" in b else f" ({b['model_sizes']} sizes)")
                for b in iso[key]))
    for note in report.get("notes") or ():
        lines.append(note)
    lines.append(f"{'method':<13}{'C':>9}{'x sweep':>9}  {'N_opt [95% CI]':<30}{'D_opt [95% CI]':<30}{'D/N':>7}  "
                 f"{'loss [95% PI]':<26}{'widest part':<15}at bound")
    shown = [r for r in report["predictions"] if r["valid"]]
    for r in shown:
        cell = {q: f"{r[q]:.3g}{_ci([r[q + '_lo'], r[q + '_hi']], '.3g')}" for q in ("n_opt", "d_opt", "loss")}
        mark = " *" if r["selected"] else ""
        lines.append(f"{r['method'] + mark:<13}{r['target_flops']:>9.3g}{r.get('distance', np.nan):>9.3g}  "
                     f"{cell['n_opt']:<30}{cell['d_opt']:<30}{r['tokens_per_param']:>7.1f}  {cell['loss']:<26}"
                     f"{r['interval_dominant'] or '-':<15}{r['at_bound'] or '-'}".rstrip())
    if not shown:
        lines.append("(no valid law: no predictions)")
    lines += trust_lines([r for r in shown if r["selected"]] or shown)
    return "\n".join(lines + _holdout_lines(report))
