"""The one completion ledger of the data stages: what each piece of finished work was made from, so that a rerun
redoes exactly the work whose inputs or settings changed, and nothing else.

Every data stage (extract, filter, dedup, tokenize, the recipes' validation split) records its work the same way:

- **the same input** is the same bytes: its size and SHA-256 (``identity``), never its path or its mtime. A copy,
  a ``touch`` or a fresh checkout is the same input; one changed byte, even at the same size, is another.
- **a record** (``Record``) is ``<out_dir>/_done/<name>.json``, written last, after the outputs it vouches for
  (each written atomically): the inputs (path and identity), the settings that decide the outputs and what the
  stage adds (its stats, counts). No timings: it sits in a DVC output whose bytes must not change between runs.
  A per-file task keeps one record per input file (named for its output), a global step one for the stage.
- **a record counts** when it and every output it vouches for exist and its settings are the stage's now; then,
  per input, the input is done when the record holds it with the bytes it has now. An input recorded with other
  bytes is said in one line and done again.
- **a work folder** (``Ledger.work``) holds the intermediate files of a stage whose work runs as many tasks (the
  sharded dedup, tokenize): ``<out_dir>/_work/<key>``, the key a hash of the inputs' identities and the settings,
  so tasks of other inputs or settings are never mixed in (another key's folder is a stale run, removed). A task
  in it marks itself done with ``mark_task_done`` and needs no identity of its own: its folder's key has them.
  The stage removes the folder (``remove_work``) only after its record is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from workbench.files import file_sha256, read_json, write_json

DONE_FOLDER = "_done"  # beside a stage's outputs: the records of its finished work
WORK_FOLDER = "_work"  # beside a stage's outputs: the intermediate files of its unfinished tasks
BOOKKEEPING = ("inputs", "settings")  # what a record holds besides the fields its stage writes


def identity(path: Path | str) -> dict:
    """What makes an input the same input: its size and the SHA-256 of its bytes (not its path or mtime, so a
    record is the same bytes on every machine and a touched file is not redone)."""
    return {"size": Path(path).stat().st_size, "sha256": file_sha256(path)}


def record_path(out_dir: Path | str, name: str) -> Path:
    """The record of finished work ``name`` (an output's name, or a stage's) in ``out_dir``."""
    return Path(out_dir) / DONE_FOLDER / f"{name}.json"


def finished_task(record: Path, *outputs: Path) -> dict | None:
    """The result a finished task wrote to ``record``, when it and every one of ``outputs`` exist; else None (a
    record without its outputs: a kill cut the removal of a work folder short)."""
    if Path(record).exists() and all(Path(p).exists() for p in outputs):
        return read_json(record)
    return None


def mark_task_done(record: Path, result: dict) -> dict:
    """Write a task's ``result`` to ``record``, key-sorted and atomically, after every output of the task."""
    write_json(record, result)
    return result


def _plain(value: dict) -> dict:
    """``value`` as it reads back from JSON (tuples as lists, paths as strings), so a record compares equal."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@dataclass(frozen=True)
class Ledger:
    """The records of one stage's finished work in ``out_dir``, and the ``settings`` that decide its outputs
    (plain JSON values; a changed one redoes everything). Small and picklable: per-file tasks carry it to the
    workers that write their records."""

    stage: str
    out_dir: Path
    settings: dict = field(default_factory=dict)

    def __post_init__(self):  # normalizes (a str folder, settings as plain JSON values); validates nothing
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "settings", _plain(self.settings))

    def record(self, name: str, inputs: list[Path]) -> Record:
        """The record of work ``name`` made from ``inputs``."""
        return Record(self, name, inputs)

    def work(self, fresh: bool = False, **what) -> Path:
        """The work folder of the tasks that make this stage's outputs from ``what`` (the inputs' identities, and
        whatever else shapes the tasks) with these settings: ``_work/<key>``, kept from an interrupted run with the
        same key; every other folder there is removed (all of them when ``fresh``)."""
        key = hashlib.sha256(json.dumps(_plain({"settings": self.settings, **what}), sort_keys=True).encode())
        folder = self.out_dir / WORK_FOLDER / key.hexdigest()[:16]
        for other in folder.parent.iterdir() if folder.parent.is_dir() else ():
            if fresh or other != folder:
                _remove(other)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def remove_work(self) -> None:
        """Remove the work folders: only once the stage's record is written (a kill before keeps the tasks)."""
        shutil.rmtree(self.out_dir / WORK_FOLDER, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


class Record:
    """One record of a ``Ledger``: ``<out_dir>/_done/<name>.json``, for work made from ``inputs`` (their identities
    computed once, on first use, and shared with the work folder's key)."""

    def __init__(self, ledger: Ledger, name: str, inputs: list[Path]):
        self.ledger, self.name, self.path = ledger, name, record_path(ledger.out_dir, name)
        self.files, self.inputs = [Path(p) for p in inputs], [str(p) for p in inputs]
        self._identities: list[dict] | None = None

    @property
    def identities(self) -> list[dict]:
        if self._identities is None:
            self._identities = [identity(f) for f in self.files]
        return self._identities

    def read(self, *outputs: Path) -> tuple[dict | None, list[bool]]:
        """The record as written, when it and every one of ``outputs`` exist and its settings are the ledger's
        (else None), and, per input, whether the record holds it with the bytes it has now. An input recorded
        with other bytes is said in one line."""
        found = finished_task(self.path, *outputs)
        if found is None or found.get("settings") != self.ledger.settings:
            return None, [False] * len(self.files)
        old = {i.get("path"): {k: v for k, v in i.items() if k != "path"} for i in found.get("inputs", [])}
        same = [old.get(p) == now for p, now in zip(self.inputs, self.identities, strict=True)]
        changed = [p for p, unchanged in zip(self.inputs, same, strict=True) if not unchanged and p in old]
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            tqdm.write(f"{self.ledger.stage}: {changed[0]}{more} changed since {self.ledger.out_dir} was made: "
                       "doing it again")
        return found, same

    def done(self, *outputs: Path) -> dict | None:
        """What the stage recorded (without the inputs and settings), when the work is done: the record counts
        (``read``) and holds exactly these inputs, each unchanged; else None."""
        found, same = self.read(*outputs)
        if found is None or not all(same) or [i.get("path") for i in found.get("inputs", [])] != self.inputs:
            return None
        return {k: v for k, v in found.items() if k not in BOOKKEEPING}

    def write(self, **fields) -> dict:
        """The record, written last (after every output): the inputs with their identities, the settings and
        ``fields`` (no timings). Returns ``fields``."""
        clash = sorted(set(fields) & set(BOOKKEEPING))
        if clash:
            raise ValueError(f"{self.ledger.stage}: a record's own fields may not be named {clash}")
        inputs = [{"path": p, **i} for p, i in zip(self.inputs, self.identities, strict=True)]
        write_json(self.path, {"inputs": inputs, "settings": self.ledger.settings, **fields})
        return fields
