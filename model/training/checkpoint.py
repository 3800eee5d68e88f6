"""Checkpoints: one directory per run with ``config.json``, ``ckpt-<step>.pt`` files and ``latest``.

Each checkpoint is written to a temp file, fsynced and renamed, then ``latest`` (JSON: the newest
file, its SHA-256 and those of the other kept checkpoints) is replaced the same way, so a crash
at any moment leaves the previous good checkpoint reachable. Loading uses
``torch.load(weights_only=True)``: plain tensors and Python containers, never arbitrary pickles.
A checkpoint whose checksum does not match (truncated, corrupt) is skipped with a one-line warning naming it and
the previous good one is used; a run none of whose checkpoints loads is an error (``CheckpointError``), never a
silent start from scratch: ``clear_run`` starts over on purpose (the CLIs' ``--restart``).
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from workbench.files import atomic_open, file_sha256, write_json

log = logging.getLogger(__name__)

LATEST = "latest"
_CKPT_RE = re.compile(r"^ckpt-(\d+)\.pt$")


class CheckpointError(RuntimeError):
    pass


def rng_state() -> dict:
    """Every random stream a training step may draw from: torch's (and CUDA's), Python's and NumPy's global ones.
    NumPy's as plain ints, which ``torch.load(weights_only=True)`` reads back."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Put back what ``rng_state`` recorded (a checkpoint without NumPy's state leaves it as it is)."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def read_latest(run_dir: Path) -> dict:
    """The ``latest`` pointer, or {} when it is missing or unreadable."""
    path = Path(run_dir) / LATEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def remove_stale_temps(run_dir: str | Path) -> list[Path]:
    """Remove what killed writes left in a run folder: ``atomic_open``'s temporary files (``.<name>.<random>.tmp``;
    a half-written checkpoint is megabytes). Only the run writes its folder, so no other writer's file is open."""
    stale = sorted(Path(run_dir).glob(".*.tmp")) if Path(run_dir).is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


RUN_STATE = ("ckpt-*.pt", LATEST, "dcp", ".*.tmp")  # what clear_run removes: a run's training state, not its inputs


def clear_run(run_dir: str | Path) -> list[str]:
    """Remove a run's checkpoints, ``latest`` and sharded checkpoints (``--restart``: start over on purpose); the
    names removed. The new run rewrites config.json and its metrics."""
    removed = []
    for pattern in RUN_STATE:
        for path in sorted(Path(run_dir).glob(pattern)) if Path(run_dir).is_dir() else ():
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def save_checkpoint(run_dir: str | Path, step: int, state: dict, keep_last: int = 3) -> Path:
    """Write ``state`` as ckpt-<step>.pt, point ``latest`` at it, keep the newest ``keep_last``."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(run_dir)
    path = run_dir / f"ckpt-{step:08d}.pt"
    # through a file handle: a path would name the zip's inner folder after the random temp file
    with atomic_open(path, "wb") as fh:
        torch.save(state, fh)
    entry = {"file": path.name, "step": step, "sha256": file_sha256(path)}

    previous = [c for c in read_latest(run_dir).get("checkpoints", []) if c.get("file") != path.name]
    older = sorted((c for c in previous if c["step"] < step), key=lambda c: c["step"], reverse=True)
    kept = [entry, *older][:max(1, keep_last)]  # the file just written is always kept, and `latest` names it
    write_json(run_dir / LATEST, {**entry, "checkpoints": kept}, sort_keys=False)

    keep = {c["file"] for c in kept}
    for old in run_dir.glob("ckpt-*.pt"):
        if _CKPT_RE.match(old.name) and old.name not in keep:
            old.unlink(missing_ok=True)
    return path


def load_file(path: str | Path, map_location="cpu", sha256: str | None = None) -> dict:
    """Load one checkpoint file, checking its SHA-256 when known."""
    path = Path(path)
    if sha256 is not None and file_sha256(path) != sha256:
        raise CheckpointError(f"{path}: checksum mismatch (truncated or corrupt checkpoint)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises several types for truncated zips / bad pickles
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {first})") from exc
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not a checkpoint (no 'model' entry)")
    return state


def load_latest(run_dir: str | Path, map_location="cpu") -> tuple[Path, dict] | None:
    """Newest good checkpoint of a run as (path, state); None when the run has none.

    Tries ``latest`` first, then older kept checkpoints, then any other ckpt-*.pt on disk, newest
    first; every bad one is reported in one line and skipped. A CheckpointError when there are checkpoints and
    none of them loads: starting over silently would throw the run away."""
    run_dir = Path(run_dir)
    known = {c["file"]: c.get("sha256") for c in read_latest(run_dir).get("checkpoints", []) if "file" in c}
    on_disk = [p.name for p in run_dir.glob("ckpt-*.pt") if _CKPT_RE.match(p.name)]
    candidates = sorted(set(known) | set(on_disk), key=lambda n: int(_CKPT_RE.match(n).group(1)), reverse=True)
    for name in candidates:
        path = run_dir / name
        if not path.exists():
            log.warning("%s: listed in %s but missing; trying an older checkpoint", path, LATEST)
            continue
        try:
            return path, load_file(path, map_location, known.get(name))
        except CheckpointError as exc:
            log.warning("%s; trying an older checkpoint", exc)
    if candidates:
        raise CheckpointError(f"{run_dir}: none of its {len(candidates)} checkpoint(s) loads (newest: "
                              f"{candidates[0]}): start the run over with --restart, or remove the folder")
    return None


def branch_from(trunk_dir: str | Path, step: int, run_dir: str | Path) -> Path:
    """Start ``run_dir`` from the trunk's checkpoint at ``step`` (checksum checked), so that ``--resume`` there goes
    on from that step: how a cooldown branch leaves a constant-LR trunk (scaling/sweep.py). The branch's clock
    starts at 0: its summary's seconds are its own."""
    trunk_dir = Path(trunk_dir)
    name = f"ckpt-{step:08d}.pt"
    known = {c["file"]: c.get("sha256") for c in read_latest(trunk_dir).get("checkpoints", []) if "file" in c}
    if not (trunk_dir / name).is_file():
        raise FileNotFoundError(f"{trunk_dir}: no checkpoint at step {step} to branch from")
    state = load_file(trunk_dir / name, sha256=known.get(name)) | {"seconds": 0.0}
    return save_checkpoint(run_dir, step, state, keep_last=1)


class TokenizerMismatch(ValueError):
    pass


def check_tokenizer(recorded: dict | None, given: dict, model: str | Path, tokenizer: str | Path) -> None:
    """A TokenizerMismatch (one line) when the tokenizer ``given`` (``workbench.files.tokenizer_identity``) is not
    the one the model ``recorded``; a checkpoint written before runs recorded it (None) passes with a warning."""
    if recorded is None:
        log.warning("%s records no tokenizer identity (an older checkpoint): %s cannot be checked", model, tokenizer)
        return
    if recorded["sha256"] != given["sha256"]:
        raise TokenizerMismatch(
            f"tokenizer {tokenizer} (vocab {given['vocab_size']}, sha256 {given['sha256'][:12]}) is not the one "
            f"{model} was trained with (vocab {recorded['vocab_size']}, sha256 {recorded['sha256'][:12]}): pass the "
            "tokenizer folder its shards were encoded with")


def load_model(path: str | Path, device="cpu", **overrides):
    """A TransformerLM from a run directory (its newest good checkpoint) or a ckpt-*.pt file; its
    ``tokenizer_identity`` is the checkpoint's record of its tokenizer (None in older checkpoints).

    ``overrides`` replace ModelConfig fields (e.g. attention='sdpa') before building."""
    path = Path(path)
    if path.is_dir():
        found = load_latest(path, map_location=device)
        if found is None:
            raise FileNotFoundError(f"{path}: no usable checkpoint (ckpt-*.pt) in this run directory")
        state = found[1]
    elif path.exists():
        state = load_file(path, map_location=device)
    else:
        raise FileNotFoundError(f"{path}: no such checkpoint or run directory")
    cfg = ModelConfig.from_dict(state["model_config"]).replace(**overrides)
    model = TransformerLM(cfg, device=device)
    model.load_state_dict(state["model"])
    model.tokenizer_identity = state.get("tokenizer")
    return model.eval()
