"""The files at the edges of the scaling fits: a results table in, fit.json / predictions.csv / a summary out.

Results are read into one validated table with canonical columns ``params``, ``tokens``, ``flops``, ``loss``.

The contract is DESIGN.md "Scaling results": a CSV (or a JSON list of objects, as in the CS336 assignment-3
``isoflops_curves.json``) with at least N, D and the loss; extra columns (d_model, n_layers, lr, …) are kept.
Whichever of D and C is missing is filled in with the training-compute approximation C = 6·N·D
(Kaplan et al. 2020, §2.1; Hoffmann et al. 2022, §3).

A budget column (``budget``, ``budget_flops``, ``compute_budget``, ...) says which IsoFLOP budget each run belongs to
(scaling/runs.py: without one, budgets are inferred only where the runs were laid out on them).

Optional ``unique_tokens`` (U, the unique training tokens a run drew its D from) and ``epochs`` (D / U) say how much a
run repeated its data; either gives the other, and the data-constrained law (scaling/laws/data_constrained.py) is
fitted only where they are known.

Several tables (one sweep under several seeds) are read as one by ``load_many``. Runs that repeat an (N, D, C)
point are collapsed (``collapse_runs``): true repeats (other seeds, identical settings) become one row with their
mean loss; runs that differ in a hyperparameter column (lr, warmup, ...: a tuning sweep) keep the best per (N, D).

Held-out runs come in the same way (``load_holdout``: the same aliases and checks, plus ``run_id``) or from a
``python -m model.train`` summary.json, counted as the sweep counted its runs (``sweep_counting``,
``load_summary_holdout``).

The output side (fit.json, predictions.csv, the printed summary) is scaling/report.py.

Every problem raises ``ValueError`` with one line naming the file, the column and the row. Rows count from 1
over the data rows (the CSV header is not a row; in JSON row k is the k-th object).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

CANONICAL = ("params", "tokens", "flops", "loss")
# canonical name -> accepted spellings, in order of preference (the canonical name wins when several are present)
ALIASES: dict[str, tuple[str, ...]] = {
    "params": ("params", "n", "parameters"),
    "tokens": ("tokens", "d"),
    "flops": ("flops", "c", "compute_budget"),
    "loss": ("loss", "final_loss", "val_loss"),
}
# the IsoFLOP budget a run belongs to (optional; compute_budget also stands for C when there is no other C column)
BUDGET_ALIASES = ("budget", "budget_flops", "flops_budget", "isoflop_budget", "compute_budget")
# how much of a run's data was unique (optional): canonical name -> accepted spellings
REPEAT_ALIASES: dict[str, tuple[str, ...]] = {"unique_tokens": ("unique_tokens",),
                                              "epochs": ("epochs",)}
COLUMN_ALIASES = ALIASES | REPEAT_ALIASES
# columns that name a run, not its experiment: runs of one (N, D, C) may differ in them
MAX_SPLIT_VALUES = 8  # a text column with at most this many values may split the runs into experiments
IDENTIFIERS = ("run_id", "id", "run", "name", "run_name", "source", "path", "file", "trunk")
# columns that make runs of one (N, D) different experiments, not repeats: the best of them is kept
HYPERPARAMETERS = ("lr", "learning_rate", "peak_lr", "max_lr", "min_lr", "lr_max", "warmup", "warmup_steps",
                   "warmup_tokens", "warmup_ratio", "warmup_fraction", "batch_size", "batch", "bs", "beta1", "beta2",
                   "adam_beta1", "adam_beta2", "weight_decay", "wd", "schedule", "lr_schedule", "scheduler", "decay",
                   "cooldown", "cooldown_fraction", "dropout", "init_std", "optimizer", "hparams", "z_loss")


def results_paths(results, what: str) -> list[Path]:
    """The results files a command was given, as paths; a ValueError asking for ``what`` when there is none."""
    if not results:
        raise ValueError(f"no results file: give one or more {what}")
    return [Path(p) for p in results]


def parse_columns(specs) -> dict[str, str]:
    """``["params=Model Size", "flops=Training FLOP"]`` -> {canonical: the file's column}; the keys may be the
    canonical names or any alias (N, D, C, loss, ...). A ValueError names a bad spec."""
    out = {}
    for spec in specs or ():
        key, sep, column = str(spec).partition("=")
        canonical = "budget" if key.strip().lower() in BUDGET_ALIASES else \
            next((name for name, aliases in COLUMN_ALIASES.items() if key.strip().lower() in aliases), None)
        if not sep or canonical is None or not column.strip():
            raise ValueError(f"--columns {spec!r}: expected KEY=COLUMN with KEY one of "
                             f"{', '.join(a for aliases in ALIASES.values() for a in aliases)}, budget, unique_tokens "
                             "or epochs")
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


def load_many(paths: list[str | Path], columns: dict[str, str] | None = None,
              where: dict[str, str] | None = None) -> pd.DataFrame:
    """One or several results tables (the same sweep under other seeds, say) as one: ``load_results`` of each, its
    rows narrowed to ``where`` ({column: value}, ``parse_where``), checked for mixed experiments (``check_unmixed``),
    stacked, then ``collapse_runs``; with several, every row keeps the file it came from in ``source``. What was
    collapsed is said in ``frame.attrs["notes"]`` (one line each)."""
    frames = []
    for p in paths:
        frame = select_rows(load_results(p, columns), where or {}, str(p))
        check_unmixed(frame, str(p))
        frames.append(frame.assign(**({"source": str(p)} if len(paths) > 1 else {})))
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    mixed = varying_note(frame)
    frame, notes = collapse_runs(frame)
    frame.attrs["notes"] = ([mixed] if mixed else []) + notes
    return frame


def load_groups(paths: list[str | Path], by: str, columns: dict[str, str] | None = None,
                 where: dict[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """{group: its canonical runs} from the results files, split on the ``by`` column (a recipe, a dataset; a
    ValueError names a file without it); within a group, runs at one (N, D, C) that differ in a text column are an
    error and repeats are averaged (``check_unmixed``, ``collapse_runs``), as ``load_many`` does for one experiment.
    What was collapsed is said in each frame's ``attrs["notes"]``."""
    frames = []
    for path in paths:
        frame = select_rows(load_results(path, columns), where or {}, str(path))
        if by not in frame.columns:
            raise ValueError(f"{path}: no column '{by}' to group the runs by (columns: {', '.join(map(str, frame))}); "
                             f"name it with --by")
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    names = frame[by].astype(str)
    groups = {}
    for name in sorted(names.unique()):
        group = frame[names == name].drop(columns=[by]).reset_index(drop=True)
        check_unmixed(group, f"{', '.join(map(str, paths))} ({by}={name})")
        mixed = varying_note(group)
        groups[name], notes = collapse_runs(group)
        groups[name].attrs["notes"] = ([mixed] if mixed else []) + notes
    return groups


def parse_where(specs) -> dict[str, str]:
    """``["dataset=c4", "loss_split=val"]`` -> {column: value}; a ValueError names a bad spec."""
    out = {}
    for spec in specs or ():
        column, sep, value = str(spec).partition("=")
        if not sep or not column.strip():
            raise ValueError(f"--where {spec!r}: expected COLUMN=VALUE")
        out[column.strip()] = value.strip()
    return out


def select_rows(frame: pd.DataFrame, where: dict[str, str], source: str) -> pd.DataFrame:
    """The rows whose every ``where`` column holds its value (compared as text, or as numbers when both are)."""
    keep = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        if column not in frame.columns:
            raise ValueError(f"{source}: --where {column}={value}: no such column (found: "
                             f"{', '.join(map(str, frame.columns))})")
        values = frame[column]
        try:
            keep &= np.isclose(pd.to_numeric(values, errors="raise").to_numpy(dtype=float), float(value))
        except (TypeError, ValueError):
            keep &= (values.astype(str).str.strip() == value).to_numpy()
        if not keep.any():
            held = ", ".join(sorted(map(str, values.dropna().unique()))[:8])
            raise ValueError(f"{source}: --where {column}={value}: no run left (the column holds {held})")
    return frame.loc[keep].reset_index(drop=True)


def mixed_columns(frame: pd.DataFrame, keys: list[str]) -> dict[str, list[str]]:
    """Text columns (not hyperparameters, not identifiers: a name in IDENTIFIERS, or one value per run) that take
    several values among the runs of one (N, D, C), with their values: such runs are different experiments
    (datasets, loss splits), not repeats of one."""
    shared = frame[frame.duplicated(keys, keep=False)]
    if shared.empty:
        return {}
    out = {}
    for column in frame.columns:
        if column in keys or str(column).strip().lower() in (*HYPERPARAMETERS, *IDENTIFIERS) or \
                pd.api.types.is_numeric_dtype(frame[column]) or frame[column].nunique(dropna=False) == len(frame):
            continue
        if (shared.groupby(keys, sort=False)[column].nunique(dropna=False) > 1).any():
            out[str(column)] = sorted(map(str, shared[column].dropna().unique()))
    return out


def varying_note(frame: pd.DataFrame) -> str | None:
    """A note when a text column with a few values (not an identifier or hyperparameter) varies among runs that
    are fitted together, such as a loss split whose values sit at different (N, D): one fit then mixes them."""
    varying = {}
    for column in frame.columns:
        if str(column).strip().lower() in (*HYPERPARAMETERS, *IDENTIFIERS) or \
                pd.api.types.is_numeric_dtype(frame[column]):
            continue
        values = frame[column].dropna().astype(str).unique()
        if 1 < len(values) <= MAX_SPLIT_VALUES and len(values) < len(frame):
            varying[str(column)] = sorted(values)
    if not varying:
        return None
    listed = "; ".join(f"'{c}' ({', '.join(v)})" for c, v in varying.items())
    first, values = next(iter(varying.items()))
    return (f"note: the runs fitted together differ in {listed}: one fit mixes them; --where {first}={values[0]} "
            f"or --by {first} separates them")


def check_unmixed(frame: pd.DataFrame, source: str) -> None:
    """A ValueError naming each text column whose values split the runs of one (N, D, C) (``mixed_columns``)."""
    mixed = mixed_columns(frame, ["params", "tokens", "flops"])
    if mixed:
        listed = "; ".join(f"'{c}' ({', '.join(v[:4])}{', ...' if len(v) > 4 else ''})" for c, v in mixed.items())
        first, values = next(iter(mixed.items()))
        raise ValueError(f"{source}: runs at one N, D and C differ in {listed}: different experiments, not repeats of "
                         f"one; fit one at a time, e.g. --where {first}={values[0]}")


def hyperparameter_columns(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    """The HYPERPARAMETERS columns that take more than one value among the runs of one (N, D, C)."""
    named = [c for c in frame.columns if str(c).strip().lower() in HYPERPARAMETERS]
    return [c for c in named if (frame.groupby(keys, sort=False)[c].nunique(dropna=False) > 1).any()]


def average_repeats(frame: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """Rows that repeat one point (``keys``, default N, D, C), e.g. one sweep run under several seeds, as one row:
    their mean loss, ``repeats`` (how many) and ``loss_sd`` (their sample standard deviation, 0 for one), the other
    columns from the first of them. A fit then weighs each point once, and an IsoFLOP grid minimum is not the
    luckiest seed."""
    keys = keys or ["params", "tokens", "flops"]
    groups = frame.groupby(keys, sort=False, dropna=False)["loss"]
    if groups.ngroups == len(frame):
        return frame
    out = frame.drop_duplicates(keys, keep="first").copy()
    stats = groups.agg(["mean", "count", "std"])
    index = pd.MultiIndex.from_frame(out[keys])
    out["loss"] = stats["mean"].reindex(index).to_numpy()
    out["repeats"] = stats["count"].reindex(index).to_numpy()
    out["loss_sd"] = stats["std"].reindex(index).fillna(0.0).to_numpy()
    return out.reset_index(drop=True)


def collapse_runs(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Runs of one (N, D, C) as one point: true repeats (a seed column, or identical settings) averaged
    (``average_repeats``); runs that differ in a hyperparameter column (``hyperparameter_columns``) kept as the best
    (lowest loss) per (N, D, C) after averaging their repeats. Returns (frame, one note per collapse)."""
    keys = ["params", "tokens", "flops"]
    if not frame.duplicated(keys).any():
        return frame, []
    tuned = hyperparameter_columns(frame, keys)
    notes = []
    before = len(frame)
    frame = average_repeats(frame, keys + tuned)
    if len(frame) < before:
        seeded = [c for c in frame.columns if "seed" in str(c).lower()]
        why = f"a {seeded[0]} column" if seeded else "identical settings"
        notes.append(f"averaged {before} runs into {len(frame)} points (repeats of one N, D, C: {why})")
    if tuned:
        settings = len(frame)
        best = frame.loc[frame.groupby(keys, sort=False)["loss"].idxmin().sort_values()].reset_index(drop=True)
        notes.append(f"kept the best of the {', '.join(map(str, tuned))} settings per (N, D): {settings} runs -> "
                     f"{len(best)} points (runs that differ in a hyperparameter are a tuning sweep, not repeats)")
        frame = best
    return frame, notes


def _find_column(frame: pd.DataFrame, canonical: str) -> str | None:
    """The input column that supplies ``canonical`` (case-insensitive alias match), or None."""
    by_lower = {}
    for col in frame.columns:
        by_lower.setdefault(str(col).strip().lower(), col)
    for alias in COLUMN_ALIASES[canonical]:
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
    found = {name: (columns or {}).get(name) or _find_column(frame, name) for name in COLUMN_ALIASES}
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
    budget_col = (columns or {}).get("budget") or next(
        (col for alias in BUDGET_ALIASES for col in frame.columns if str(col).strip().lower() == alias), None)
    if "tokens" not in values:
        values["tokens"] = values["flops"] / (6.0 * values["params"])
    if "flops" not in values:
        values["flops"] = 6.0 * values["params"] * values["tokens"]
    out = pd.DataFrame({name: values[name] for name in CANONICAL}, index=range(len(frame)))
    if budget_col is not None:
        out["budget"] = _numeric_column(frame, budget_col, "budget", source)
    if "unique_tokens" in values or "epochs" in values:
        unique = values.get("unique_tokens")
        out["unique_tokens"] = unique if unique is not None else out["tokens"] / values["epochs"]
        out["epochs"] = out["tokens"] / out["unique_tokens"]
    used = {col for col in found.values() if col is not None} | ({budget_col} if budget_col is not None else set())
    named = (*COLUMN_ALIASES, "budget")
    extras = frame.loc[:, [c for c in frame.columns if c not in used and str(c) not in named]]
    return pd.concat([out, extras.reset_index(drop=True)], axis=1)


def load_holdout(path: str | Path, columns: dict[str, str] | None = None) -> pd.DataFrame:
    """Held-out runs (``--holdout``): a table read as the results are (same aliases, ``columns`` and checks), with
    ``run_id`` (``<stem>:<row>`` when it has none); columns run_id, params, tokens, flops, loss."""
    path = Path(path)
    frame = load_results(path, {k: v for k, v in (columns or {}).items() if k != "budget"})
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
