"""Documents → token shards: ``train.bin`` / ``val.bin`` (flat little-endian uint16/uint32) + ``meta.json``.

Each document is encoded, followed by the end-of-text id, and appended to the split chosen by a
seeded hash of its id, so the split does not depend on file order, worker count or chunking.
Each input file is one task (``encode_file``: its documents' tokens into train/val parts in the stage ledger's work
folder, ``out_dir/_work/<key>``, written atomically, then a ``done`` record) on an executor (workbench/executor.py:
the local pool of ``workers`` processes, Ray or Dask), and the parts are joined in file order, so the shards are
byte-identical for any executor and worker count. A killed run redoes only the files without a ``done`` record
beside their parts (the folder's key hashes the files' identities and the settings, so no part of another input
is joined). The stage's record (``_done/tokenize.json``, workbench/ledger.py) lists every input's identity (size,
SHA-256), the settings and the token counts: a rerun encodes only the inputs that changed (saying so) and copies
the others' tokens from the shards it replaces. Read the shards with
``np.memmap(path, dtype=meta["dtype"])``
(the layout nanoGPT's ``prepare.py`` uses). ``python -m tokenizer.shards`` is the tokenize stage (defaults: the
``shards`` section of params.yaml). Bad lines and files are skipped and counted (``workbench.bad_input``).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenizer.encoder import Tokenizer
from workbench.bad_input import InputIssues, merged_stats, plural, require_readable, summary_note
from workbench.documents import EOT, document_paths, iter_texts
from workbench.executor import ExecutorSettings, LocalExecutor, make_executor
from workbench.files import atomic_path, tokenizer_identity, write_json
from workbench.ledger import Ledger, finished_task, mark_task_done
from workbench.params import override, setting
from workbench.stage import TaskWriter, map_tasks, remove_leftovers, write_stage_metrics
from workbench.stage_cli import StageCommand, StageInput, need, optional_path

log = logging.getLogger(__name__)

def is_val(doc_id: str, val_fraction: float, seed: int) -> bool:
    digest = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < val_fraction


def load_tokenizer(tokenizer_dir: str | Path, special_tokens: list[str] | None = None) -> Tokenizer:
    d = Path(tokenizer_dir)
    for name in ("vocab.json", "merges.txt"):
        if not (d / name).is_file():
            raise FileNotFoundError(f"tokenizer file missing: {d / name}")
    return Tokenizer.from_files(d / "vocab.json", d / "merges.txt", special_tokens or [EOT])


def _dtype(tokenizer: Tokenizer) -> np.dtype:
    return np.dtype("<u2") if tokenizer.vocab_size <= 2**16 else np.dtype("<u4")


def encode_file(task: tuple) -> dict:
    """A cluster task: one documents file's tokens into ``<work>/<index>.train.bin`` and ``.val.bin`` (each
    document's ids and the end-of-text id, in file order), then ``<index>.done.json`` with its counts and bad
    input; a file with that record is not encoded again."""
    index, path, tokenizer_dir, work, val_fraction, seed = task
    part = Path(work) / f"{index:06d}"
    done = part.with_suffix(".done.json")
    finished = finished_task(done, part.with_suffix(".train.bin"), part.with_suffix(".val.bin"))
    if finished is not None:  # a done record counts only beside its parts: a kill can cut the folder's removal short
        return finished
    tokenizer = load_tokenizer(tokenizer_dir)
    eot, dtype = tokenizer.special_token_ids[EOT], _dtype(tokenizer)
    counts = {"train": [0, 0], "val": [0, 0]}
    issues = InputIssues()
    with TaskWriter(train=part.with_suffix(".train.bin"), val=part.with_suffix(".val.bin")) as out:
        for doc_id, text in iter_texts(path, issues):
            ids = np.asarray(tokenizer.encode(text) + [eot], dtype=dtype)
            split = "val" if is_val(doc_id, val_fraction, seed) else "train"
            out.files[split].write(ids.tobytes())
            counts[split][0] += 1
            counts[split][1] += len(ids)
    issues.warn(log)
    result = {"index": index, "input": str(path), "counts": counts, "skipped": len(issues.skipped),
              **issues.stats()}
    return mark_task_done(done, result)


def tokenize_ledger(out_dir: Path, tokenizer_dir, val_fraction: float, seed: int) -> Ledger:
    """The stage's ledger in ``out_dir``: its settings are what decides the tokens besides the inputs."""
    return Ledger("tokenize", out_dir, {"tokenizer_sha256": tokenizer_identity(tokenizer_dir)["sha256"],
                                        "val_fraction": val_fraction, "seed": seed})


def work_folder(ledger: Ledger, identities: list[dict], todo: list[int]) -> Path:
    """The work folder of the files ``todo`` (indices into the inputs, whose ``identities`` they are): keyed on
    each one's index and bytes and the settings, so a part is joined only into the shards of the input it was
    encoded from."""
    return ledger.work(inputs=[{"index": i, **identities[i]} for i in todo])


def _encode_on(executor, input_path, tokenizer_dir, out_dir: Path, val_fraction: float, seed: int,
               itemsize: int) -> tuple:
    """Every input file not in the shards already (the stage's record, ``_done/tokenize.json``, holds it with
    these bytes and settings) as one ``encode_file`` task on ``executor``; then train.bin and val.bin joined in file
    order from the new parts and the replaced shards' ranges, and the record with each file's counts. Returns
    (counts, merged bad-input stats, files reused). The work folder goes once the shards are written."""
    paths = document_paths(input_path)
    ledger = tokenize_ledger(out_dir, tokenizer_dir, val_fraction, seed)
    record = ledger.record("tokenize", paths)
    done, unchanged = record.read(out_dir / "train.bin", out_dir / "val.bin")
    finished = _token_ranges(done, out_dir, itemsize)
    finished = {i: finished[path] for i, (path, same) in enumerate(zip(record.inputs, unchanged, strict=True))
                if same and path in finished}
    todo = [i for i in range(len(paths)) if i not in finished]
    work = work_folder(ledger, record.identities, todo)
    tasks = [(i, str(paths[i]), str(tokenizer_dir), str(work), val_fraction, seed) for i in todo]
    fresh = {r["index"]: r for r in map_tasks(executor, encode_file, tasks, desc="tokenize", disable=not tasks)}
    record.path.unlink(missing_ok=True)  # the shards change below: a kill from here on leaves no record to trust
    results = [fresh.get(i) or finished[i] for i in range(len(paths))]
    for split in ("train", "val"):
        with atomic_path(out_dir / f"{split}.bin") as tmp, open(tmp, "wb") as out:
            for i, r in enumerate(results):
                if i in fresh:
                    with open(work / f"{i:06d}.{split}.bin", "rb") as part:
                        shutil.copyfileobj(part, out)
                else:  # this file's tokens in the shard being replaced
                    _copy_range(out_dir / f"{split}.bin", r["at"][split] * itemsize, r["counts"][split][1] * itemsize,
                                out)
    ledger.remove_work()
    record.write(files=[{k: v for k, v in r.items() if k not in ("index", "at", "input")} for r in results])
    counts = {split: [sum(r["counts"][split][k] for r in results) for k in (0, 1)] for split in ("train", "val")}
    stats, skipped = merged_stats(results), sum(r["skipped"] for r in results)
    return counts, (stats | {"bad_json": skipped}) if skipped else stats, len(finished)


def _token_ranges(done: dict | None, out_dir: Path, itemsize: int) -> dict[str, dict]:
    """Per input the record ``done`` holds, its counts and where its tokens start in train.bin and val.bin
    (``at``); none when the shards in ``out_dir`` are not the length the record says."""
    if done is None or "files" not in done:
        return {}
    starts, out = {"train": 0, "val": 0}, {}
    for recorded, stats in zip(done["inputs"], done["files"], strict=True):
        out[recorded["path"]] = {**stats, "at": dict(starts)}
        for split in starts:
            starts[split] += stats["counts"][split][1]
    if any((out_dir / f"{split}.bin").stat().st_size != n * itemsize for split, n in starts.items()):
        return {}
    return out


def _copy_range(path: Path, start: int, size: int, out) -> None:
    """``size`` bytes of ``path`` from byte ``start`` to ``out``, a chunk at a time."""
    with open(path, "rb") as fh:
        fh.seek(start)
        while size > 0:
            chunk = fh.read(min(size, 1 << 24))
            if not chunk:
                raise ValueError(f"{path}: shorter than its record says")
            out.write(chunk)
            size -= len(chunk)


def write_shards(input_path, tokenizer_dir, out_dir, val_fraction=0.05, seed=0, workers=1, executor=None) -> dict:
    """Tokenize every document into ``out_dir/{train,val}.bin`` + ``meta.json``: one task per input file on
    ``executor`` (workbench/executor.py; default the local pool of ``workers`` processes), joined in file order.

    Returns the meta plus this run's ``seconds`` and ``tokens_per_s`` (kept out of ``meta.json``,
    which must be byte-identical on a rerun).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"shards.val_fraction must be in [0, 1), got {val_fraction}")
    tokenizer = load_tokenizer(tokenizer_dir)
    eot = tokenizer.special_token_ids[EOT]
    dtype = _dtype(tokenizer)
    out_dir = Path(out_dir)
    remove_leftovers(out_dir)
    start = time.perf_counter()
    counts, stats, reused = _encode_on(executor or LocalExecutor(workers), input_path, tokenizer_dir, out_dir,
                                       val_fraction, seed, dtype.itemsize)
    seconds = time.perf_counter() - start
    require_readable(stats, len(document_paths(input_path)))
    meta = {
        "dtype": dtype.name,
        "vocab_size": tokenizer.vocab_size,
        "eot_id": eot,
        "train_tokens": counts["train"][1],
        "val_tokens": counts["val"][1],
        "train_docs": counts["train"][0],
        "val_docs": counts["val"][0],
        "val_fraction": val_fraction,
        "seed": seed,
        "tokenizer_sha256": tokenizer_identity(tokenizer_dir)["sha256"],
    }
    write_json(out_dir / "meta.json", meta)
    tokens = counts["train"][1] + counts["val"][1]
    return {**meta, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / max(seconds, 1e-9)),
            "files_reused": reused, **stats}


def headline(metrics: dict) -> dict:
    """The numbers ``dvc metrics show`` prints for the stage (the rest is in metrics/details/shards.json)."""
    return {"docs_in": metrics["train_docs"] + metrics["val_docs"],
            "tokens": metrics["train_tokens"] + metrics["val_tokens"], "vocab_size": metrics["vocab_size"],
            "seconds": metrics["seconds"], "tokens_per_s": metrics["tokens_per_s"]}


# -- CLI ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardSettings(StageInput):
    out_dir: str = override(StageInput, "out_dir", "shards", "writes train.bin, val.bin, meta.json")
    tokenizer: str = setting("tokenizer", "folder with vocab.json + merges.txt")
    val_fraction: float = setting(0.05, "share of documents in val.bin")
    seed: int = setting(0, "seed of the train/val split")
    workers: int = setting(1, "encoding processes")


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "input", "tokenizer", "out_dir")
    shards = (Path(args.input), Path(args.tokenizer), Path(args.out_dir), float(args.val_fraction), int(args.seed),
              int(args.workers))
    with make_executor(args.executor, int(args.workers), args.address, args.task_timeout_s) as executor:
        meta = write_shards(*shards, executor=executor)
    stats = {"stage": "shards", **meta}
    write_stage_metrics(optional_path(args.metrics), stats, headline(stats))
    reused = f"; {plural(meta['files_reused'], 'unchanged file')} reused" if meta["files_reused"] else ""
    return (f"tokenize: {meta['train_tokens']:,} train + {meta['val_tokens']:,} val tokens "
            f"({meta['dtype']}) at {meta['tokens_per_s']:,} tokens/s -> {args.out_dir}{reused}{summary_note(meta)}")


main = StageCommand("python -m tokenizer.shards", "shards",
                    "Encode documents into uint16/uint32 token shards plus meta.json.",
                    (ShardSettings, ExecutorSettings), run_command)


if __name__ == "__main__":
    raise SystemExit(main())
