"""The files at the edges of the scaling fits: a results table in, fit.json / predictions.csv / a summary out.

Results are read into one validated table with canonical columns ``params``, ``tokens``, ``flops``, ``loss``.

The contract is DESIGN.md "Scaling results": a CSV (or a JSON list of objects, as in the CS336 assignment-3
``isoflops_curves.json``) with at least N, D and the loss; extra columns (d_model, n_layers, lr, …) are kept.
Whichever of D and C is missing is filled in with the training-compute approximation C = 6·N·D
(Kaplan et al. 2020, §2.1; Hoffmann et al. 2022, §3).

The output side lives here too: the fit outputs (fit.json and predictions.csv, each written to a temporary file
and renamed into place; the DVC metrics: the flat ``headline`` in metrics/fit.json, every prediction in
metrics/details/fit.json; the printed summary table), the grouping of runs into compute budgets and the stacking
of bootstrap samples, so that scaling/isoflop.py and scaling/parametric.py hold the math and scaling/fit.py the CLI.

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
HEADLINE_METHODS = ("parametric", "isoflop", "isoflop_grid")


def load_results(path: str | Path) -> pd.DataFrame:
    """Read a results CSV (any suffix but ``.json``) or JSON list of objects and return ``canonicalize(...)``."""
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
    return canonicalize(frame, source=str(path))


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


def canonicalize(frame: pd.DataFrame, source: str = "<results>") -> pd.DataFrame:
    """Rename aliases to canonical columns, validate them, fill D = C/(6N) or C = 6ND; extra columns follow.

    Raises ValueError (one line: ``source``, column, row) on missing columns, empty input, non-numeric,
    missing, non-finite or non-positive values of N, D, C or the loss.
    """
    if len(frame) == 0:
        raise ValueError(f"{source}: no rows")
    found = {name: _find_column(frame, name) for name in CANONICAL}
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
    """fit.json and predictions.csv, each written to a temporary file and renamed into place."""
    write_text(out_dir / "fit.json", json.dumps(_jsonable(report), indent=2) + "\n")
    write_text(out_dir / "predictions.csv", pd.DataFrame(report["predictions"]).to_csv(index=False))


def prediction_metrics(report: dict) -> dict:
    """The detailed fit metrics: n_opt, d_opt and loss per ``{method}@{target C}`` (metrics/details/fit.json)."""
    return {f"{row['method']}@{row['target_flops']:.0e}": {k: float(row[k]) for k in ("n_opt", "d_opt", "loss")}
            for row in report["predictions"]}


def headline(stats: dict) -> dict:
    """The fit's flat DVC metrics, from ``prediction_metrics``: the compute-optimal params and tokens and the
    predicted loss at the largest target budget C (``flops``), by the first method of HEADLINE_METHODS fitted."""
    rows = []
    for key, value in stats.items():
        method, _, budget = key.partition("@")
        rows.append((float(budget), method, value))
    if not rows:
        return {}
    flops = max(budget for budget, _, _ in rows)
    at_largest = {method: value for budget, method, value in rows if budget == flops}
    best = at_largest[next((m for m in HEADLINE_METHODS if m in at_largest), next(iter(at_largest)))]
    return {"flops": flops, "params": best["n_opt"], "tokens": best["d_opt"], "loss": best["loss"]}


def write_fit_metrics(report: dict, path: Path) -> None:
    """metrics/fit.json (``headline``) for ``dvc metrics show`` and metrics/details/fit.json (every prediction)."""
    stats = prediction_metrics(report)
    write_metrics(path, stats, headline(stats))


def format_summary(report: dict) -> str:
    """One line per fitted law (exponent 95% CIs), then one table row per (method, target budget)."""
    def law(sec: dict, name: str) -> str:
        coef, exponent, (lo, hi) = sec[name]["coef"]["value"], *(sec[name]["exponent"][k] for k in ("value", "ci95"))
        return f"{name[0].upper()}{name[1:]} = {coef:.4g}*C^{exponent:.4f} [{lo:.4f}, {hi:.4f}]"

    lines = []
    for variant in ("parabola", "grid_minimum") if "isoflop" in report else ():
        sec = report["isoflop"][variant]
        loss = {k: sec["loss"][k]["value"] for k in ("E", "A", "gamma")}
        lines.append(f"isoflop/{variant:<13} {law(sec, 'n_opt')}   {law(sec, 'd_opt')}   "
                     f"L_opt = {loss['E']:.4g} + {loss['A']:.4g}*C^-{loss['gamma']:.4f}")
    if "parametric" in report:
        sec = report["parametric"]
        params = " ".join(f"{k}={sec[k]['value']:.4g} [{sec[k]['ci95'][0]:.4g}, {sec[k]['ci95'][1]:.4g}]"
                          for k in ("E", "A", "B", "alpha", "beta"))
        lines.append(f"{'parametric':<21} {law(sec, 'n_opt')}   {law(sec, 'd_opt')}   "
                     f"max rel loss error {sec['max_rel_loss_error']:.2g}\n{'':<21} {params}")
    lines.append(f"{'method':<13}{'C':>9}  {'N_opt [95% CI]':<30}{'D_opt [95% CI]':<30}{'D/N':>7}  loss [95% CI]")
    for r in report["predictions"]:
        cell = {q: f"{r[q]:.3g} [{r[q + '_lo']:.3g}, {r[q + '_hi']:.3g}]" for q in ("n_opt", "d_opt", "loss")}
        lines.append(f"{r['method']:<13}{r['target_flops']:>9.3g}  {cell['n_opt']:<30}{cell['d_opt']:<30}"
                     f"{r['tokens_per_param']:>7.1f}  {cell['loss']}")
    return "\n".join(lines)
