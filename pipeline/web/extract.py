"""WARC/WET files → documents: decode HTML, extract the main text, write gzip JSONL.

``extract_text`` decodes bytes (UTF-8 first, then the declared charset, then detection) and runs
a main-content extractor: ``distilled`` (the default: trees distilled from trafilatura keep or drop each block,
unsure pages go to trafilatura; its quality at about 3x its speed; ``pipeline.web.distilled``), trafilatura
(Barbaresi, ACL 2021; the teacher, best precision), Resiliparse (Bevendorff et al., 2018; ~13x faster, keeps more
boilerplate), or ``cascade`` (a lexbor pre-pass and trafilatura's fast mode, full trafilatura where that looks
unreliable; ``pipeline.web.extract_cascade``).
``run_extract`` streams every input file (or folder of them), fans records out to supervised worker processes
(``pipeline.runtime.supervised``: a worker that dies or hangs in C code is replaced and its record counted as
``extract_crash`` / ``extract_timeout``), bounds each record in bytes and seconds, counts every drop with its
reason, names unreadable or empty files (``workbench.bad_input``), and writes one ``<input>.jsonl.gz`` per input
atomically, so a rerun skips inputs that are already done (the data-stage base, ``workbench.stage``, runs the
files, resumes and writes the metrics).
``python -m pipeline.web.extract`` is the stage (defaults: the ``extract`` section of params.yaml).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import threading
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from pipeline.runtime.supervised import Lost, SupervisedPool
from pipeline.web.distilled import distilled_text, load_model
from pipeline.web.extract_cascade import fast_text, needs_fallback
from pipeline.web.warc import Payload, is_generated_crawl, iter_payloads
from workbench.bad_input import InputIssues, merged_stats, summary_note
from workbench.executor import ExecutorSettings, LocalExecutor, alarm_time_limit, make_executor, thread_time_limit
from workbench.files import check_unique_outputs, expand_inputs
from workbench.ledger import Ledger
from workbench.params import Checked, config_from_args, override, setting
from workbench.stage import FileStage, TaskWriter, sum_counts, sum_stats
from workbench.stage_cli import StageCommand, StageFiles, funnel_headline, need, optional_path, paths

log = logging.getLogger(__name__)

EXTRACTORS = ("trafilatura", "resiliparse", "cascade", "distilled")
WARC_SUFFIXES = (".warc.gz", ".warc", ".wet.gz", ".wet")  # what a folder given as input is searched for
# drop reasons that are the record's fault or the extractor's, named one by one (the rest are only counted)
_NAMED_DROPS = {"extract_crash": "its worker died", "extract_timeout": "over the time limit",
                "extract_error": "the extractor raised"}
_MAX_REPLACEMENT_SHARE = 0.02  # more U+FFFD than this after decoding: the charset was wrong


@dataclass(frozen=True)
class ExtractConfig(Checked):
    SECTION = "extract"

    extractor: str = setting("distilled", "main-text extractor", choices=EXTRACTORS)
    workers: int = setting(1, "extraction processes", at_least=1)
    max_bytes: int = setting(4 << 20, "per-record byte cap, also after Content-Encoding", at_least=1)
    timeout_s: float = setting(10.0, "per-record extraction time limit in seconds; a worker still busy at twice this "
                                     "(stuck in C code) is killed and replaced", above=0)

    def settings(self) -> dict:
        """The fields that decide the documents (not ``workers``: any count writes the same bytes); the time limit
        is one, as it decides which records are dropped as ``extract_timeout``."""
        return {"extractor": self.extractor, "max_bytes": self.max_bytes, "timeout_s": self.timeout_s}


def decode_html(html_bytes: bytes, declared_charset: str | None = None) -> str | None:
    """Decode page bytes: strict UTF-8, then the declared charset, then detection; None if garbled."""
    try:
        return html_bytes.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    candidates = [declared_charset] if declared_charset else []
    candidates.append(detect_encoding(html_bytes, max_len=65536, html5_compatible=True))
    for charset in candidates:
        try:
            return html_bytes.decode(charset)
        except (UnicodeDecodeError, LookupError):
            continue
    text = bytes_to_str(html_bytes, candidates[-1], errors="replace")
    return text if text.count("\ufffd") <= _MAX_REPLACEMENT_SHARE * max(len(text), 1) else None


def extract_text(html_bytes: bytes, extractor: str = "trafilatura", declared_charset: str | None = None) -> str | None:
    """The main text of an HTML page, or None when the page is undecodable or has none."""
    html = decode_html(html_bytes, declared_charset)
    return main_text(html, extractor) if html is not None else None


def main_text(html: str, extractor: str = "trafilatura") -> str | None:
    """Run the chosen main-content extractor on decoded HTML."""
    if not html.strip():
        return None
    if extractor == "trafilatura":
        import trafilatura

        text = trafilatura.extract(html, include_comments=False, include_tables=True, deduplicate=False)
    elif extractor == "cascade":
        text, page_chars = fast_text(html)
        if needs_fallback(text, page_chars):
            return main_text(html, "trafilatura")
    elif extractor == "distilled":
        text, unsure = distilled_text(html)
        if unsure:
            return main_text(html, "trafilatura")
    elif extractor == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        text = extract_plain_text(HTMLTree.parse(html), main_content=True, alt_texts=False, links=False)
    else:
        raise ValueError(f"unknown extractor {extractor!r}; choose one of {EXTRACTORS}")
    text = (text or "").strip()
    return text or None


class _Timeout(Exception):
    pass


_worker_cfg: ExtractConfig | None = None


def _import_extractor(extractor: str) -> None:
    """Import the extractor before the workers fork, so a worker's first record (or a replaced worker's) does
    not spend its time limit importing it."""
    modules = {"trafilatura": ("trafilatura",), "cascade": ("trafilatura", "selectolax.lexbor"),
               "resiliparse": ("resiliparse.extract.html2text", "resiliparse.parse.html"),
               "distilled": ("trafilatura", "selectolax.lexbor")}[extractor]
    for module in ("resiliparse.parse.encoding", *modules):  # decode_html's fallback, then the extractor's
        importlib.import_module(module)
    if extractor == "distilled":
        load_model()  # the trees, read once before the workers fork


def _init_worker(cfg: ExtractConfig) -> None:
    global _worker_cfg
    _worker_cfg = cfg
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)


def _extract_one(payload: Payload) -> dict | str:
    """A document dict for one payload, or the reason it was dropped."""
    cfg = _worker_cfg
    # SIGALRM fires on the main thread only (pool workers run records there); a Dask worker thread gets a timer
    on_main = threading.current_thread() is threading.main_thread()
    try:
        with (alarm_time_limit if on_main else thread_time_limit)(cfg.timeout_s, _Timeout):
            if payload.kind == "text":
                text = payload.body.decode("utf-8", errors="replace").strip()
            else:
                html = decode_html(payload.body, payload.charset)
                if html is None:
                    return "extract_undecodable"
                text = main_text(html, cfg.extractor)
    except _Timeout:
        return "extract_timeout"
    except Exception:  # noqa: BLE001 - a hostile page must not stop the stage
        return "extract_error"
    if not text:
        return "extract_no_text"
    return {"id": payload.record_id, "url": payload.url, "date": payload.date, "text": text}


def output_name(input_path: Path) -> str:
    name = input_path.name
    for suffix in (".gz", ".warc", ".wet"):
        name = name.removesuffix(suffix)
    return name + ".jsonl.gz"


def input_files(inputs: list[Path]) -> list[Path]:
    """Every WARC/WET file of ``inputs`` (files, or folders of ``*.warc[.gz]`` / ``*.wet[.gz]``), in order.

    A missing input, no WARC/WET file at all, or two inputs with the same output name are one-line errors."""
    files = expand_inputs(inputs, lambda d: sorted(f for f in d.iterdir()
                                                    if f.name.endswith(WARC_SUFFIXES) and f.is_file()))
    if not files:
        raise FileNotFoundError(f"no {'/'.join(WARC_SUFFIXES)} files in {', '.join(map(str, inputs))}")
    check_unique_outputs(files, output_name)
    return files


def kill_after_s(timeout_s: float) -> float:
    """When a worker still busy with one record is killed: SIGALRM ends a slow record at ``timeout_s`` wherever
    Python runs; a worker busy at twice that (and at least a second later) is stuck where no signal handler runs
    (C code), or dead."""
    return max(2 * timeout_s, timeout_s + 1.0)


def _extract_file(path: Path, ledger: Ledger, cfg: ExtractConfig, pool: SupervisedPool | None, bar=None) -> dict:
    """Extract one input into the ledger's ``out_dir``, its records spread over ``pool`` (or extracted in this
    process when there is none); record it done and return its stats."""
    drops: Counter = Counter()
    counts = {"records": 0}
    problems: list[str] = []
    issues = InputIssues()
    sent: deque[Payload] = deque()  # the records in the pool, oldest first (results come back in order)

    def payloads() -> Iterator[Payload]:
        for payload in iter_payloads(path, drops, cfg.max_bytes, problems):
            counts["records"] += 1
            sent.append(payload)
            yield payload

    with TaskWriter(text=True, kept=ledger.out_dir / output_name(path)) as out:
        for result in pool.imap(payloads()) if pool is not None else map(_extract_one, payloads()):
            payload = sent.popleft()
            if bar is not None:
                bar.update(1)
            if isinstance(result, Lost):
                result = f"extract_{result.reason}"
            if isinstance(result, str):
                drops[result] += 1
                if result in _NAMED_DROPS:
                    issues.skipped.append(f"{path}: record {payload.record_id} ({payload.url}): {result}, "
                                          f"{_NAMED_DROPS[result]}")
                continue
            out.keep(result)
    counts["records"] += sum(v for k, v in drops.items() if k.startswith("warc_") and k != "warc_corrupt_file")
    issues.file_ended(path, counts["records"], problems[0] if problems else None,
                      empty="no response or conversion records")
    issues.warn(log)
    # No timings here: the stats sit beside the documents, which must be byte-identical on a rerun.
    # "generated": the input is our generated crawl (its warcinfo says so); the filter's provenance check reads it.
    stats = {"input": str(path), "generated": is_generated_crawl(path), "records": counts["records"],
             "docs": out.counts["kept"], "drops": dict(sorted(drops.items())), **issues.stats()}
    return ledger.record(output_name(path), [path]).write(**stats)  # written last: marks the input as done


def extract_file_task(task: tuple[Path, Ledger, ExtractConfig]) -> dict:
    """A cluster task (workbench/executor.py): extract one whole input file in the worker that runs it, record by
    record in that process (cluster workers may not start processes of their own)."""
    path, ledger, cfg = task
    _init_worker(cfg)
    return _extract_file(path, ledger, cfg, None)


class ExtractStage(FileStage):
    """The extract stage on the data-stage base (workbench/stage.py): one task per input file."""

    name = "extract"
    task_fn = extract_file_task

    def __init__(self, files: list[Path], out_dir: Path, cfg: ExtractConfig, force: bool = False):
        super().__init__(files, out_dir, force)
        self.cfg = cfg

    def output_name(self, path: Path) -> str:
        return output_name(path)

    def settings(self) -> dict:
        return self.cfg.settings()

    def task(self, path: Path) -> tuple:
        return path, self.ledger, self.cfg

    def run_tasks(self, executor, todo: list[Path]) -> list[dict]:
        """On a cluster, one task per whole file; here, file after file, the records spread over a pool."""
        if executor is not None:
            return super().run_tasks(executor, todo)
        _import_extractor(self.cfg.extractor)
        with SupervisedPool(_extract_one, self.cfg.workers, kill_after_s(self.cfg.timeout_s), _init_worker,
                            (self.cfg,)) as pool, tqdm(desc="extract", unit="rec", dynamic_ncols=True) as bar:
            return [_extract_file(p, self.ledger, self.cfg, pool, bar) for p in todo]

    def summarize(self, per_file: list[dict]) -> dict:
        """Stage metrics over every input: records read, documents out, drops per reason."""
        totals = sum_stats(per_file, ("records", "docs"))
        return {
            "stage": "extract",
            "extractor": self.cfg.extractor,
            "files": len(per_file),
            "records_read": totals["records"],
            "docs_out": totals["docs"],
            "drops": dict(sorted(sum_counts(per_file).items())),
            **merged_stats(per_file),
        }

    def add_timings(self, metrics: dict, fresh: list[dict], skipped: int, wall: float) -> None:
        metrics["seconds"] = round(wall, 3)
        metrics["docs_per_s"] = round(sum(s["docs"] for s in fresh) / wall, 2) if fresh else None

    def headline(self, metrics: dict) -> dict:
        return funnel_headline(metrics, docs_in_key="records_read", as_key="records")


def run_extract(inputs: list[Path], out_dir: Path, metrics_path: Path | None, cfg: ExtractConfig, force: bool = False,
                executor=None) -> dict:
    """Extract every input (files or folders) into ``out_dir``; skip inputs already done unless ``force``.

    The records of each file are spread over ``cfg.workers`` supervised processes (``pipeline.runtime.supervised``): a
    record whose worker dies or hangs is counted (``extract_crash`` / ``extract_timeout``) and the rest go on.
    An ``executor`` (a Ray or Dask cluster) runs one task per whole file instead. The headline metrics go to
    ``metrics_path``, all of them to ``details_path(metrics_path)``. Bad input follows ``workbench.bad_input``:
    unreadable or empty files are named in the metrics; none readable is a ValueError.
    """
    return ExtractStage(input_files(inputs), Path(out_dir), cfg, force).run(executor, metrics_path)


# -- CLI ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExtractFiles(StageFiles):
    inputs: tuple[str, ...] = override(StageFiles, "inputs", (), "WARC/WET files, or folders of *.warc[.gz] / "
                                                                  "*.wet[.gz]")
    out_dir: str = override(StageFiles, "out_dir", "extract", "folder for <input>.jsonl.gz documents")


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "inputs", "out_dir")
    cfg = config_from_args(ExtractConfig, args)
    with make_executor(args.executor, cfg.workers, args.address, args.task_timeout_s) as executor:
        cluster = None if isinstance(executor, LocalExecutor) else executor  # local: records spread over a pool
        m = run_extract([Path(p) for p in paths(args.inputs)], Path(args.out_dir), optional_path(args.metrics), cfg,
                        force=args.force, executor=cluster)
    return (f"extract: {m['records_read']} records -> {m['docs_out']} documents in {args.out_dir} "
            f"({m['docs_per_s']} docs/s); drops {m['drops']}{summary_note(m)}")


main = StageCommand("python -m pipeline.web.extract", "extract",
                    "Extract main text from WARC response / WET conversion records.",
                    (ExtractFiles, ExtractConfig, ExecutorSettings), run_command)


if __name__ == "__main__":
    raise SystemExit(main())
