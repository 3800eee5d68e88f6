"""Benchmark results as data: one JSON row per measured figure, under benchmarks/results/<area>.jsonl.

A row says what was measured and against what, how often and where:

    {"area": "langid", "name": "fasttext", "metric": "agreement", "value": 0.9554, "unit": "",
     "baseline": "langid", "baseline_value": 0.9565, "ratio": 0.9988, "repeats": 1, "min": ..., "median": ...,
     "max": ..., "machine": "...", "date": "2026-11-26", "command": "python -m bench.langid", "commit": "06e08b3"}

Files are append-only logs: a rerun appends, and ``latest`` keeps the newest row per (area, name, metric), which is
what ``python -m bench.tools.report`` puts into the pages of docs/benchmarks/. ``interleaved`` times ours and the
baseline in turns (ours, baseline, ours, ...) so drift on a shared machine hits both, and reports min/median/max and
the ratio of medians within the one run.

What every benchmark's command line shares is here too: ``BenchSettings`` (``--results-dir`` and ``--no-record``),
which a benchmark's settings dataclass extends, ``parse_bench`` (its prog and description) and ``finish`` (the printed
table of rows, then the rows recorded unless ``--no-record``); a benchmark declares only its own settings and makes
its own rows.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.files import write_text
from workbench.params import parse_flags, setting

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "benchmarks" / "results"
COMMAND_MODULE = re.compile(r"(python3? -m )([\w.]+)")


@dataclass
class Result:
    name: str  # what ran, e.g. "fasttext" or "ours d64 S4096"
    metric: str  # what was measured, e.g. "agreement", "docs_per_s", "fwd_bwd_ms"
    value: float
    unit: str = ""
    baseline: str | None = None  # the strongest available baseline, measured in the same run
    baseline_value: float | None = None
    ratio: float | None = None  # value / baseline_value unless the caller defines it otherwise (say so in metric)
    repeats: int = 1
    min: float | None = None
    median: float | None = None
    max: float | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):  # derives the ratio when a row gives none; validates nothing
        if self.ratio is None and self.baseline_value:
            self.ratio = self.value / self.baseline_value


def machine() -> str:
    """CPU model and core count, plus the GPU when torch sees one: what a reader needs to compare numbers."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        text += f", {torch.cuda.get_device_name(0)}"
    return text


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.cache
def commit_at_start() -> str:
    """The commit when the bench started (``parse_bench`` asks first): ``record`` runs at the end, and a long bench
    must not stamp its rows with a commit made while it ran."""
    return git_commit()


def runnable_command(command: str) -> str:
    """``command`` with a ``python -m bench...`` module that does not exist replaced by the bench module that is
    running (a row must name a command a reader can run); ValueError when neither exists."""
    def fix(match: re.Match) -> str:
        module = match.group(2)
        if not module.startswith("bench.") or module_exists(module):
            return match.group(0)
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name.startswith("bench.") and module_exists(spec.name):
            return match.group(1) + spec.name
        raise ValueError(f"record: the command names {module}, which does not exist")

    return COMMAND_MODULE.sub(fix, command)


def module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def missing_modules(results_dir: Path = RESULTS_DIR) -> list[str]:
    """``file:line: module`` for every row whose command names a module that does not exist."""
    out = []
    for path in sorted(Path(results_dir).glob("*.jsonl")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                for _, module in COMMAND_MODULE.findall(json.loads(line).get("command", "")):
                    if not module_exists(module):
                        out.append(f"{path.name}:{i}: {module}")
    return out


def record(area: str, results: list[Result], command: str, results_dir: Path | None = None, **meta) -> Path:
    """Append ``results`` as rows of ``<results_dir>/<area>.jsonl`` (atomically: the whole file is rewritten); the
    command names a module that exists (``runnable_command``).

    ``meta`` (machine=, date=, commit=) overrides this machine, today and HEAD: for rows imported from a run made
    elsewhere (bench.tools.gpu_import)."""
    command = runnable_command(command)
    path = Path(results_dir or RESULTS_DIR) / f"{area}.jsonl"
    unknown = set(meta) - {"machine", "date", "commit"}
    if unknown:
        raise ValueError(f"record: unknown meta field(s) {sorted(unknown)} (machine, date, commit)")
    meta = {"area": area, "machine": meta.get("machine") or machine(),
            "date": meta.get("date") or datetime.date.today().isoformat(), "command": command,
            "commit": meta.get("commit") or commit_at_start()}
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    new = "".join(json.dumps({**meta, **asdict(r)}, sort_keys=True) + "\n" for r in results)
    write_text(path, old + new)
    return path


def read_rows(results_dir: Path | None = None) -> list[dict]:
    """Every row of every results file, in file order; a malformed line is an error naming file and line."""
    rows = []
    for path in sorted(Path(results_dir or RESULTS_DIR).glob("*.jsonl")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{i}: not a JSON row ({exc.msg})") from None
    return rows


def latest(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    """The newest row per (area, name, metric): later rows win."""
    return {(r["area"], r["name"], r["metric"]): r for r in rows}


def interleaved(ours: Callable[[], object], baseline: Callable[[], object], repeats: int = 3,
                warmup: int = 1) -> tuple[list[float], list[float]]:
    """Seconds of ``repeats`` calls of each, alternating ours and baseline after ``warmup`` untimed calls each."""
    for _ in range(warmup):
        ours()
        baseline()
    times_ours, times_base = [], []
    for _ in range(repeats):
        for fn, times in ((ours, times_ours), (baseline, times_base)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return times_ours, times_base


def timing_result(name: str, metric: str, times: list[float], baseline: str | None = None,
                  baseline_times: list[float] | None = None, scale: float = 1.0, unit: str = "s") -> Result:
    """A Result for a timing: median of ``times`` (times ``scale``, e.g. 1e3 for ms), its min/max and the ratio
    baseline median / our median (> 1: ours is faster)."""
    med = statistics.median(times) * scale
    base = statistics.median(baseline_times) * scale if baseline_times else None
    return Result(name, metric, med, unit, baseline, base, base / med if base else None, len(times),
                  min(times) * scale, med, max(times) * scale)


@dataclass(frozen=True, kw_only=True)
class BenchSettings:
    """The settings every benchmark has; a benchmark's own settings dataclass extends it (``parse_bench``)."""

    results_dir: Path = setting(RESULTS_DIR, "where the rows go, as AREA.jsonl (AREA: the benchmark's area)")
    record: bool = setting(True, "append the rows to the results (--no-record: print only)")


_typed_commands: dict[int, tuple[object, str]] = {}  # id(settings) -> (settings, the command parse_bench read)


def parse_bench(settings_cls: type, argv: list[str] | None = None):
    """A benchmark's settings from its command line (``workbench.params.parse_flags``): ``python -m <module>``, the
    first paragraph of the module's docstring as the description. Pins the commit the rows will name."""
    module = sys.modules[settings_cls.__module__]
    name = module.__spec__.name if module.__spec__ else settings_cls.__module__
    commit_at_start()  # pinned now, at the bench's start
    description = (module.__doc__ or "").split("\n\n")[0]
    settings = parse_flags(settings_cls, argv, prog=f"python -m {name}", description=description)
    typed = sys.argv[1:] if argv is None else list(argv)
    _typed_commands[id(settings)] = (settings, " ".join(["python", "-m", name, *map(shlex.quote, typed)]))
    return settings


def format_result(r: Result) -> str:
    """One printed row: name, metric, value and unit, the min-max spread over repeats, the ratio to the baseline."""
    spread = f"  ({r.min:.4g}-{r.max:.4g})" if r.repeats > 1 and r.min is not None and r.max is not None else ""
    base = f"  vs {r.baseline} {r.baseline_value:.4g}: {r.ratio:.3g}x" if r.baseline_value and r.ratio else ""
    return f"{r.name:<28} {r.metric:<20} {r.value:>12.5g} {r.unit}{spread}{base}"


def finish(area: str, results: list[Result], settings: BenchSettings, command: str | None = None, show: bool = True,
           record_rows: bool | None = None) -> int:
    """A benchmark's ending: every row printed (unless ``show`` is False: the benchmark printed its own table), then
    recorded in ``<settings.results_dir>/<area>.jsonl`` with the ``command`` that reruns it (default: the command
    line ``parse_bench`` read ``settings`` from), when ``record_rows`` (default: ``settings.record``). Returns the
    exit status (0)."""
    for r in results if show else ():
        print(format_result(r))
    if command is None:
        parsed, command = _typed_commands.get(id(settings), (None, None))
        if parsed is not settings:
            raise TypeError("finish() needs the command that reruns the benchmark: its settings did not come "
                             "from parse_bench")
    if record_rows if record_rows is not None else settings.record:
        print(f"{len(results)} rows appended to {record(area, results, command, settings.results_dir)}")
    return 0


