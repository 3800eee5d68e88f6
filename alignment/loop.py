"""What the SFT, DPO and GRPO loops share: loading, metrics rows, checkpoints, report rows and the CLI.

Each loop is a frozen dataclass config (fields ``model``, ``tokenizer``, ``out_dir``, ``device``, ``report``
...) and a ``train_xxx(cfg, model=None, tokenizer=None) -> summary`` function; the CLI is built from the
config's fields, so every field is a flag (``--grad-accum``, ``--normalize-by-std false`` ...).
Checkpoints of our models are written with ``model.checkpoint.save_checkpoint`` in the format
``model.train`` writes (``model.checkpoint.load_model(out_dir)`` reads them); Hugging Face models are
saved with ``save_pretrained`` under ``out_dir/hf``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import MISSING, asdict, fields
from datetime import datetime, timezone
from pathlib import Path

ENGINES = ("ours", "trl")
METRIC_KEYS = ("task", "n", "accuracy", "format_rate", "mean_response_tokens", "pref_accuracy", "margin", "seconds")


def check_choices(cfg, tasks: tuple[str, ...]) -> None:
    """The checks every loop config shares: engine, task, and the arithmetic digits / held_out options."""
    from alignment.tasks import HELD_OUT

    name = type(cfg).__name__
    for field, allowed in (("engine", ENGINES), ("task", tasks), ("held_out", HELD_OUT)):
        if getattr(cfg, field) not in allowed:
            raise ValueError(f"{name}.{field} must be one of {', '.join(allowed)}, got {getattr(cfg, field)!r}")
    if not isinstance(cfg.digits, int) or not 1 <= cfg.digits <= 9:
        raise ValueError(f"{name}.digits must be an int in 1..9, got {cfg.digits!r}")


def is_ours(model) -> bool:
    return hasattr(model, "cfg") and hasattr(model, "new_cache")


def load_model_and_prepare(cfg, stage: str, model=None, tokenizer=None):
    """(model, tokenizer, ours, context length or None, out_dir): loads ``cfg.model`` unless a model is
    given, creates ``cfg.out_dir`` and writes ``config.json`` (the model's config and the loop's)."""
    from alignment.evaluate import load_model_and_tokenizer
    from model.checkpoint import write_json_atomically

    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
    ours = is_ours(model)
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomically(out_dir / "config.json", {"model": model.cfg.to_dict() if ours else {}, stage: asdict(cfg)})
    return model, tokenizer, ours, model.cfg.context_length if ours else None, out_dir


def write_metrics_row(path: Path, columns: tuple[str, ...], row: dict, new: bool) -> None:
    """Append ``row`` to the CSV at ``path`` (a new file with a header when ``new``)."""
    with open(path, "w" if new else "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, columns, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def plot_metrics(csv_path: Path, png_path: Path, panels: dict[str, tuple[str, ...]]) -> Path | None:
    """One panel per entry (title -> metrics.csv columns against step); None when there is nothing to draw."""
    import pandas as pd
    from matplotlib.figure import Figure

    frame = pd.read_csv(csv_path)
    panels = {title: [c for c in cols if c in frame and frame[c].notna().any()] for title, cols in panels.items()}
    panels = {title: cols for title, cols in panels.items() if cols}
    if not panels or "step" not in frame:
        return None
    fig = Figure(figsize=(4.2 * len(panels), 3.4), layout="constrained")
    for ax, (title, cols) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels.items(), strict=False):
        for col in cols:
            points = frame[["step", col]].dropna()
            ax.plot(points["step"], points[col], label=col, marker="o" if len(points) < 12 else None, markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    tmp = png_path.with_name(f".{png_path.stem}.tmp{png_path.suffix}")
    fig.savefig(tmp, dpi=100)
    tmp.replace(png_path)
    return png_path


def save_trained(cfg, stage: str, model, tokenizer, optimizer, summary: dict, started: float) -> dict:
    """Checkpoint the trained model, append the final eval row to ``cfg.report`` and write the headline
    numbers to ``cfg.metrics`` (JSON) when set; returns ``summary`` plus ``checkpoint`` and ``seconds``."""
    from alignment.evaluate import append_report_row
    from model.checkpoint import save_checkpoint

    model.eval()
    out_dir = Path(cfg.out_dir)
    if is_ours(model):
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": cfg.steps,
                 "model_config": model.cfg.to_dict(), f"{stage}_config": asdict(cfg),
                 "seconds": time.perf_counter() - started}
        path = save_checkpoint(out_dir, cfg.steps, state, keep_last=1)
    else:
        path = out_dir / "hf"
        model.save_pretrained(path)
        if hasattr(tokenizer, "save_pretrained"):
            tokenizer.save_pretrained(path)
    summary = {**summary, "checkpoint": str(path), "seconds": round(time.perf_counter() - started, 3)}
    if getattr(cfg, "metrics", None):  # the stage's headline numbers for `dvc metrics show`
        from model.checkpoint import write_json_atomically

        Path(cfg.metrics).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(cfg.metrics, {k: summary.get(k) for k in METRIC_KEYS if k in summary})
    if cfg.report and summary.get("task"):
        append_report_row(cfg.report, {**summary, "stage": stage, "model": str(path), "outputs": "",
                                       "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    return summary


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


_NONE = object()  # a flag given as 'none': unlike an absent flag (None), it overrides params.yaml


def _optional(kind):
    def parse(text: str):
        return _NONE if text.strip().lower() in ("", "none", "null") else kind(text)
    parse.__name__ = kind.__name__
    return parse


def build_parser(config_cls, prog: str, doc: str, helps: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """A parser with one flag per field of ``config_cls`` (types from the annotations; ``X | None`` fields
    accept ``none``), every flag defaulting to None so that params.yaml fills what the command line leaves."""
    helps = {"model": "our run folder / ckpt-*.pt, or a local Hugging Face model folder",
             "tokenizer": "tokenizer folder (vocab.json + merges.txt); HF default: the model folder",
             "report": "also append the final eval row to this CSV", **(helps or {})}
    p = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])
    p.add_argument("--params", default="params.yaml",
                   help="params file whose section of this stage's name gives the defaults (default params.yaml; "
                        "flags win; 'none': only the built-in defaults)")
    for f in fields(config_cls):
        annotation = str(f.type)
        kind = {"int": int, "float": float, "bool": _parse_bool}.get(annotation.split(" ")[0], str)
        if "None" in annotation:
            kind = _optional(kind)
        default = "required" if f.default is MISSING else f"default {f.default}"
        p.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None,
                       help=f"{helps.get(f.name, f.name.replace('_', ' '))} ({default})")
    return p


def config_from_sources(config_cls, section: str, args: argparse.Namespace):
    """Dataclass defaults < the ``section`` of ``args.params`` (when the file exists) < flags given."""
    import yaml

    path = Path(args.params)
    values: dict = {}
    if args.params.lower() != "none" and path.exists():
        with open(path, encoding="utf-8") as fh:
            loaded = yaml.safe_load(fh) or {}
        values = dict(loaded.get(section) or {}) if isinstance(loaded, dict) else {}
        known = {f.name for f in fields(config_cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: section {section!r} has unknown key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
    for f in fields(config_cls):
        flag = getattr(args, f.name, None)
        if flag is not None:
            values[f.name] = None if flag is _NONE else flag
    missing = [f.name for f in fields(config_cls) if f.default is MISSING and f.name not in values]
    if missing:
        raise ValueError(f"--{missing[0].replace('_', '-')} is required (flag or {section}.{missing[0]} in {path})")
    return config_cls(**values)


def cli_main(config_cls, train_fn, stage: str, argv: list[str] | None = None, doc: str = "",
             helps: dict[str, str] | None = None) -> int:
    """Parse flags (over params.yaml) into ``config_cls``, load the model, run ``train_fn``; bad input is one
    line and exit 2."""
    args = build_parser(config_cls, f"python -m alignment.{stage}", doc, helps).parse_args(argv)
    try:
        cfg = config_from_sources(config_cls, stage, args)
        from alignment.evaluate import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
    except Exception as exc:
        what = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        print(f"error: {what}".splitlines()[0], file=sys.stderr)
        return 2
    try:
        summary = train_fn(cfg, model, tokenizer)
    except ValueError as exc:  # bad data or an engine that cannot take this model: one line, exit 2
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    pref = (f", held-out preference accuracy {summary['pref_accuracy']}, margin {summary.get('margin')}"
            if "pref_accuracy" in summary else "")
    print(f"{stage}: {cfg.steps} steps, held-out accuracy {summary.get('accuracy')}, format rate "
          f"{summary.get('format_rate')}{pref}, checkpoint {summary['checkpoint']} ({summary['seconds']:.1f} s)")
    return 0
