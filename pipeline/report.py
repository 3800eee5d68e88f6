"""The data funnel: how many records, documents, characters and tokens survive each data step.

``python -m pipeline.report`` reads the stages' detailed metrics (``metrics/details/{extract,filter,dedup,
shards}.json``, beside each stage's headline metrics; a stage that did not run is left out) and writes
``data_funnel.csv`` (pandas-readable, one row per step) and ``data_funnel.png`` (documents and estimated tokens
kept after each step, as horizontal bars).

Tokens are only counted by the tokenizer at the end; for the earlier steps ``tokens_est`` scales each step's
characters by the final corpus's tokens per character (exact for the last row, an estimate before it, since
dropped text tokenizes a little differently).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from workbench.files import atomic_path, details_path, read_json, write_text
from workbench.params import setting
from workbench.stage_cli import StageCommand, need

COLUMNS = ["stage", "step", "docs", "dropped", "kept_share", "chars", "tokens", "tokens_est"]


def funnel_rows(metrics_dir: Path) -> list[dict]:
    """One row per step, in pipeline order, with the documents (and characters, tokens where known) after it.
    ``metrics_dir`` is the stages' metrics folder; the counts come from its ``details`` folder."""
    def load(name):
        path = details_path(Path(metrics_dir) / f"{name}.json")
        return read_json(path) if path.exists() else None

    rows = []

    def add(stage, step, docs, chars=None, tokens=None):
        dropped = rows[-1]["docs"] - docs if rows else 0
        rows.append({"stage": stage, "step": step, "docs": int(docs), "dropped": int(dropped), "chars": chars,
                     "tokens": tokens})

    extract, filt, dedup, shards = (load(n) for n in ("extract", "filter", "dedup", "shards"))
    if extract:
        add("extract", "records", extract["records_read"])
        add("extract", "extracted", extract["docs_out"])
    if filt:
        if not rows:
            add("filter", "input", filt["docs_in"], filt.get("chars_in"))
        else:
            rows[-1]["chars"] = filt.get("chars_in")
        for name in filt.get("step_order") or filt["steps"]:  # metrics JSON sorts its keys
            step = filt["steps"][name]
            add("filter", name, step["docs_out"], step.get("chars_out"))
    if dedup:
        if not rows:
            add("dedup", "input", dedup["docs_in"], dedup.get("chars_in"))
        exact = dedup["drops"].get("exact_duplicate", 0)
        add("dedup", "exact", dedup["docs_in"] - exact)
        add("dedup", "minhash", dedup["docs_out"], dedup.get("chars_out"))
    if shards:
        docs = shards["train_docs"] + shards["val_docs"]
        tokens = shards["train_tokens"] + shards["val_tokens"]
        if rows and rows[-1]["docs"] == docs:
            rows[-1]["tokens"] = tokens
        else:
            add("tokenize", "tokenized", docs, tokens=tokens)
    if not rows:
        raise FileNotFoundError(f"no stage metrics (extract/filter/dedup/shards .json) in {metrics_dir}/details")
    first = rows[0]["docs"] or 1
    last_chars = next((r["chars"] for r in reversed(rows) if r["chars"]), None)
    per_char = rows[-1]["tokens"] / last_chars if rows[-1]["tokens"] and last_chars else None
    for r in rows:
        r["kept_share"] = round(r["docs"] / first, 4)
        r["tokens_est"] = round(r["chars"] * per_char) if per_char and r["chars"] else None
    return rows


def write_funnel(metrics_dir: Path, out_dir: Path):
    """Write data_funnel.csv and data_funnel.png; return the frame and the paths."""
    import pandas as pd

    frame = pd.DataFrame(funnel_rows(metrics_dir), columns=COLUMNS)
    out_dir = Path(out_dir)
    csv_path, png_path = out_dir / "data_funnel.csv", out_dir / "data_funnel.png"
    write_text(csv_path, frame.to_csv(index=False))
    plot_funnel(frame, png_path)
    return frame, [csv_path, png_path]


def plot_funnel(frame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{s}: {t}" for s, t in zip(frame["stage"], frame["step"], strict=False)][::-1]
    tokens = frame["tokens"].fillna(frame["tokens_est"])
    panels = [("documents kept", frame["docs"])] + ([("tokens (est. before tokenize)", tokens)]
                                                    if tokens.notna().any() else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 0.45 * len(frame) + 1.5), sharey=True)
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, (title, values) in zip(axes, panels, strict=False):
        values = values.to_numpy(dtype=float)[::-1]
        ax.barh(labels, values, color="#4c72b0")
        top = max(v for v in values if v == v) if any(v == v for v in values) else 1
        for y, v in enumerate(values):
            if v == v:
                ax.text(v + 0.01 * top, y, f"{v:,.0f}", va="center", fontsize=8)
        ax.set_title(title)
        ax.set_xlim(0, top * 1.2)
    fig.suptitle("Data funnel: what survives each step")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


# -- CLI ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FunnelFiles:
    metrics_dir: str | None = setting(None, "folder of stage metrics JSON, details in its details/ folder")
    out_dir: str | None = setting(None, "writes data_funnel.csv and data_funnel.png")


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "metrics_dir", "out_dir")
    frame, paths = write_funnel(Path(args.metrics_dir), Path(args.out_dir))
    return f"report: {len(frame)} funnel rows -> {', '.join(map(str, paths))}"


main = StageCommand("python -m pipeline.report", "report",
                    "How many records, documents, characters and tokens survive each data step.",
                    (FunnelFiles,), run_command)


if __name__ == "__main__":
    raise SystemExit(main())
