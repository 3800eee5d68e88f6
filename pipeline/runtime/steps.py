"""The one interface every document step implements, and the bookkeeping they share.

After datatrove's ``PipelineStep``/``BaseFilter``: a step decides, the base counts. A step's ``reject(doc)`` returns
``None`` to keep the document or a snake_case reason prefixed with the step's name (``gopher_short_doc``,
``langid_not_en``) to drop it. A step may annotate or rewrite the kept document in place (``lang``, ``lang_score``,
masked ``text`` with ``pii`` counts, classifier scores). Steps never open files: readers and writers sit at the
edges (``pipeline.filters.stage``), so a chain of steps runs the same inside a process pool, a Ray task or a test.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.params import Checked


def as_text(text) -> str:
    """``text`` as a str: bytes decoded as UTF-8 (invalid bytes replaced), ``None`` as "", anything else ``str()``."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return "" if text is None else str(text)


class Step(Checked):
    """One document step. Subclasses set ``name`` and implement ``reject``; a dataclass step declares its settings
    with ``setting()``, whose constraints hold for every instance (``Checked``)."""

    name = "step"

    def settings_prefix(self) -> str:
        return f"filter.steps.{self.name}."

    def reject(self, doc: dict) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class StepStats:
    """What one step saw: documents in, kept (and their characters), dropped per reason, seconds spent.
    Stats add up across files."""

    docs_in: int = 0
    docs_out: int = 0
    drops: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    chars_out: int = 0

    def merge(self, other: StepStats) -> None:
        self.docs_in += other.docs_in
        self.docs_out += other.docs_out
        self.drops.update(other.drops)
        self.seconds += other.seconds
        self.chars_out += other.chars_out

    def to_dict(self) -> dict:
        return {"docs_in": self.docs_in, "docs_out": self.docs_out, "drops": dict(sorted(self.drops.items())),
                "seconds": round(self.seconds, 3), "chars_out": self.chars_out}

    @classmethod
    def from_dict(cls, d: dict) -> StepStats:
        return cls(d["docs_in"], d["docs_out"], Counter(d["drops"]), d["seconds"], d.get("chars_out", 0))


def run_steps(docs: Iterable[dict], steps: list[Step], stats: dict[str, StepStats],
              reject: Callable[[dict], Any] | None = None) -> Iterator[dict]:
    """Yield the documents every step keeps; count each step's work in ``stats`` (keyed by step name).

    A dropped document goes to ``reject`` (if given) with its ``reason``; later steps never see it.
    """
    for step in steps:
        stats.setdefault(step.name, StepStats())
    for doc in docs:
        for step in steps:
            s = stats[step.name]
            s.docs_in += 1
            t0 = time.perf_counter()
            reason = step.reject(doc)
            s.seconds += time.perf_counter() - t0
            if reason is not None:
                s.drops[reason] += 1
                if reject is not None:
                    reject({**doc, "reason": reason})
                break
            s.docs_out += 1
            text = doc.get("text")
            s.chars_out += len(text) if isinstance(text, str) else 0
        else:
            yield doc
