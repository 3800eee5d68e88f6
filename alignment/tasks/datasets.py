"""Loaders for the real alignment data sets under ``../shared/data/alignment`` (or any path given).

GSM8K (Cobbe et al., 2021), MATH, MMLU (Hendrycks et al., 2021; headerless CSVs ``question,A,B,C,D,answer``),
preference pairs as JSONL with ``prompt/chosen/rejected`` or Anthropic hh-rlhf's ``chosen/rejected`` dialogues (Bai et
al., 2022), which are split into the shared prompt and the final assistant turns as in the DPO reference code,
SimpleSafetyTests (Vidgen et al., 2023) and AlpacaEval (Li et al., 2023). Bad records are skipped, counted, and named
``file:line`` in one warning.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import warnings
from pathlib import Path

from alignment.tasks.rewards import extract_boxed, parse_gsm8k_answer

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "alignment"


class DataWarning(UserWarning):
    """Bad records were skipped while loading a data file."""


class _Skips:
    """Counts skipped records and reports them (``file:line (why)``) in one warning."""

    def __init__(self, what: str):
        self.what, self.items = what, []

    def add(self, path: Path, line: int, why: str) -> None:
        self.items.append(f"{path}:{line} ({why})")

    def warn(self) -> None:
        if self.items:
            more = f" and {len(self.items) - 10} more" if len(self.items) > 10 else ""
            warnings.warn(f"{self.what}: skipped {len(self.items)} bad record(s): {'; '.join(self.items[:10])}{more}",
                          DataWarning, stacklevel=3)


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _jsonl(path: Path, skips: _Skips):
    """(line number, dict) for each JSON object line; a whole-file JSON list also works (AlpacaEval's format)."""
    with _open_text(path) as f:
        text = f.read()
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except ValueError as e:
            skips.add(path, 1, f"invalid JSON: {e}")
            return
        for i, rec in enumerate(records if isinstance(records, list) else [], 1):
            if isinstance(rec, dict):
                yield i, rec
            else:
                skips.add(path, i, "not an object")
        return
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            skips.add(path, i, "invalid JSON")
            continue
        if isinstance(rec, dict):
            yield i, rec
        else:
            skips.add(path, i, "not an object")


def _str_fields(rec: dict, keys: tuple[str, ...]) -> str | None:
    """None when every key holds a non-empty string, else why not."""
    return next((f"missing {k!r}" for k in keys if not isinstance(rec.get(k), str) or not rec[k].strip()), None)


def load_gsm8k(path: str | Path = DATA_DIR / "gsm8k_train.jsonl") -> list[dict]:
    """GSM8K JSONL -> ``[{"question", "answer" (the final number as a string), "solution" (the full text)}]``."""
    path, skips = Path(path), _Skips("load_gsm8k")
    out = []
    for i, rec in _jsonl(path, skips):
        why = _str_fields(rec, ("question", "answer"))
        answer = None if why else parse_gsm8k_answer(rec["answer"])
        if why or answer is None:
            skips.add(path, i, why or "no '#### N' line")
            continue
        out.append({"question": rec["question"], "answer": answer, "solution": rec["answer"]})
    skips.warn()
    return out


def load_math(path: str | Path = DATA_DIR / "math_test.jsonl") -> list[dict]:
    """MATH-style JSONL (Hendrycks et al., 2021; CS336 A5's ``MATH/validation.jsonl``): ``problem`` (or
    ``question``) and ``answer`` or a ``solution`` whose last ``\\boxed{}`` is the answer -> ``[{"question",
    "answer", "solution"}]``."""
    path, skips = Path(path), _Skips("load_math")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no MATH JSONL there (pass --data FILE with problem/solution records)")
    out = []
    for i, rec in _jsonl(path, skips):
        question = rec.get("problem", rec.get("question"))
        solution = rec.get("solution") if isinstance(rec.get("solution"), str) else ""
        answer = rec.get("answer")
        given = isinstance(answer, (str, int, float)) and str(answer).strip()
        answer = str(answer) if given else extract_boxed(solution)
        if not isinstance(question, str) or not question.strip() or not answer:
            skips.add(path, i, "missing problem" if not isinstance(question, str) or not question.strip()
                      else "no answer or \\boxed{} in the solution")
            continue
        out.append({"question": question, "answer": answer, "solution": solution})
    skips.warn()
    return out


def load_mmlu(path: str | Path = DATA_DIR / "mmlu", split: str = "test") -> list[dict]:
    """MMLU headerless CSVs ``<path>/<split>/<subject>_<split>.csv`` (or ``<path>/<subject>_<split>.csv``) ->
    ``[{"subject", "question", "choices" (4 strings), "answer" ('A'..'D')}]``, subjects in file-name order."""
    root, skips = Path(path), _Skips("load_mmlu")
    folder = root / split if (root / split).is_dir() else root
    files = sorted(folder.glob(f"*_{split}.csv"))
    if not files:
        raise FileNotFoundError(f"no *_{split}.csv files under {folder}")
    out = []
    for file in files:
        subject = file.name[: -len(f"_{split}.csv")]
        with _open_text(file) as f:
            for i, row in enumerate(csv.reader(f), 1):
                answer = row[5].strip().upper() if len(row) == 6 else ""
                if len(row) != 6 or answer not in ("A", "B", "C", "D") or not row[0].strip():
                    skips.add(file, i, f"{len(row)} fields" if len(row) != 6 else "bad question or answer")
                    continue
                out.append({"subject": subject, "question": row[0], "choices": row[1:5], "answer": answer})
    skips.warn()
    return out


_TURN = "\n\nAssistant:"


def split_dialogue_pair(chosen: str, rejected: str) -> dict | None:
    """hh-rlhf: ``{"prompt", "chosen", "rejected"}`` with the prompt everything up to and including the final
    ``"\\n\\nAssistant:"`` of ``chosen`` and the responses what follows it; None when ``rejected`` does not share
    that prompt or the two responses are equal. ``prompt + chosen`` gives back the original dialogue."""
    i = chosen.rfind(_TURN)
    if i < 0:
        return None
    prompt = chosen[: i + len(_TURN)]
    if not rejected.startswith(prompt) or _TURN in rejected[len(prompt):]:
        return None
    c, r = chosen[len(prompt):], rejected[len(prompt):]
    return None if c == r else {"prompt": prompt, "chosen": c, "rejected": r}


def load_preference_pairs(path: str | Path = DATA_DIR / "hh_rlhf_harmless_base_test.jsonl.gz") -> list[dict]:
    """Preference JSONL (``.gz`` too) -> ``[{"prompt", "chosen", "rejected"}]``. Records with a ``prompt`` are taken
    as they are; hh-rlhf records (only ``chosen``/``rejected`` dialogues) are split by ``split_dialogue_pair``."""
    path, skips = Path(path), _Skips("load_preference_pairs")
    out = []
    for i, rec in _jsonl(path, skips):
        why = _str_fields(rec, ("chosen", "rejected"))
        if why:
            skips.add(path, i, why)
            continue
        if "prompt" in rec:
            if not isinstance(rec["prompt"], str):
                skips.add(path, i, "prompt is not a string")
                continue
            pair = {"prompt": rec["prompt"], "chosen": rec["chosen"], "rejected": rec["rejected"]}
        else:
            pair = split_dialogue_pair(rec["chosen"], rec["rejected"])
            if pair is None:
                skips.add(path, i, "chosen and rejected do not share a prompt or do not differ")
                continue
        out.append(pair)
    skips.warn()
    return out


def load_safety(path: str | Path = DATA_DIR / "simple_safety_tests.csv") -> list[dict]:
    """SimpleSafetyTests CSV -> ``[{"id", "harm_area", "category", "prompt"}]`` (prompt from ``prompts_final``)."""
    path, skips = Path(path), _Skips("load_safety")
    out = []
    with _open_text(path) as f:
        for i, row in enumerate(csv.DictReader(f), 2):  # line 1 is the header
            prompt = row.get("prompts_final") or row.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                skips.add(path, i, "missing 'prompts_final'")
                continue
            out.append({"id": row.get("id") or f"{i - 1}", "harm_area": row.get("harm_area") or "",
                        "category": row.get("category") or "", "prompt": prompt})
    skips.warn()
    return out


def load_alpaca_eval(path: str | Path = DATA_DIR / "alpaca_eval.jsonl") -> list[dict]:
    """AlpacaEval JSONL (or its JSON list) -> ``[{"instruction", "output", "generator", "dataset"}]`` (the
    reference output and its generator; '' where absent)."""
    path, skips = Path(path), _Skips("load_alpaca_eval")
    out = []
    for i, rec in _jsonl(path, skips):
        why = _str_fields(rec, ("instruction",))
        if why:
            skips.add(path, i, why)
            continue
        out.append({"instruction": rec["instruction"], "output": str(rec.get("output") or ""),
                    "generator": str(rec.get("generator") or ""), "dataset": str(rec.get("dataset") or "")})
    skips.warn()
    return out
