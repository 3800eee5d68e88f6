"""Verifiable rewards: the R1-Zero format reward, math answer checking, GSM8K and MMLU answer parsing.

Mirrors CS336 assignment 5's ``drgrpo_grader.r1_zero_reward_fn`` (format wrong -> every reward 0; format right
and answer right -> 1), whose answer normalization follows Hendrycks et al.'s MATH ``is_equiv`` and the
``mathd`` normalizer (Lightman et al., "Let's Verify Step by Step"): ``\\boxed{}``, ``\\frac``/``\\dfrac``,
``\\left``/``\\right``, ``\\text{}``, units, ``^\\circ``, ``$``/``%``, ``x = ...`` prefixes. Equality is checked in
three steps, cheapest first: the normalized strings; exact rationals (integers must match exactly, other numbers
within a relative 1e-6); sympy (only for short expressions over whitelisted names, never with nested or large
exponents, under a time limit) - so a hostile answer such as ``9**9**9**9`` is refused, not evaluated.
GSM8K answers are the ``#### N`` line (Cobbe et al., 2021); MMLU letters are read like lm-evaluation-harness's
answer-extraction regexes (``answer is (B)``), plus bare letters, and None when the response names two letters.

No function here raises on model output: any str (or bytes, or None) comes back as a reward, a string or None.
"""

from __future__ import annotations

import ast
import cmath
import operator
import random
import re
import signal
import threading
from collections.abc import Iterable
from contextlib import contextmanager, nullcontext
from fractions import Fraction
from functools import cache

from workbench.executor import alarm_time_limit

MAX_ANSWER_CHARS = 1_000  # longer answers are compared as stripped strings only
MAX_EXPR_CHARS = 200  # longest normalized answer handed to the arithmetic evaluator or sympy
REL_TOL = 1e-6  # relative tolerance for non-integer numbers
_ZERO = {"reward": 0.0, "format_reward": 0.0, "answer_reward": 0.0}


def _as_text(s: object) -> str:
    if s is None:
        return ""
    if isinstance(s, (bytes, bytearray)):
        return bytes(s).decode("utf-8", "replace")
    return s if isinstance(s, str) else str(s)


# --------------------------------------------------------------------------- R1-Zero format
def format_reward(response: str) -> float:
    """1.0 when ``response`` contains ``</think> <answer>`` and, after it, ``</answer>``; else 0.0."""
    response = _as_text(response)
    i = response.find("</think> <answer>")
    return 1.0 if i >= 0 and response.find("</answer>", i) >= 0 else 0.0


def extract_answer(response: str) -> str | None:
    """The stripped text between the last ``<answer>`` and the ``</answer>`` closing it; None without a pair."""
    response = _as_text(response)
    end = response.rfind("</answer>")
    start = response.rfind("<answer>", 0, end) if end >= 0 else -1
    return None if start < 0 else response[start + len("<answer>"):end].strip()


_BRACE = re.compile(r"[{}]")


def extract_boxed(s: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (nested braces allowed) or ``\\fbox{...}`` / ``\\boxed 5``; None if
    there is none or its braces never close."""
    s = _as_text(s)
    for cmd in ("\\boxed", "\\fbox"):
        i = s.rfind(cmd)
        if i < 0:
            continue
        j = i + len(cmd)
        if s.startswith("{", j):
            depth = 0
            for m in _BRACE.finditer(s, j):
                depth += 1 if m.group() == "{" else -1
                if depth == 0:
                    return s[j + 1:m.start()]
            return None
        if s.startswith(" ", j):  # \boxed 5
            m = re.match(r" +([^\s$]+)", s[j:])
            return m.group(1) if m else None
    return None


# --------------------------------------------------------------------------- normalization
_SPACES = ("\\left", "\\right", "\\displaystyle", "\\!", "\\,", "\\;", "\\:", "\\ ", "\\$", "$", "\\%", "%")
_UNICODE = {"\u2212": "-", "\u2013": "-", "\u00d7": "\\times", "\u00f7": "/", "\u00b7": "\\cdot", "\u03c0": "\\pi",
            "\u00b0": "", "\u2009": "", "\u00a0": " "}
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\{([^{}]*)\}")
_CARET = re.compile(r"\^\{([^{}]*)\}")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_THOUSANDS = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+)(?![\d,])")
# each repetition takes a whole word (the lookahead), so a failed match cannot backtrack exponentially
_UNIT_WORDS = re.compile(r"([+-]?(?:\d[\d,]*\.?\d*|\.\d+)(?:/\d+)?)\s*((?:[A-Za-z]{2,}(?![A-Za-z])(?:\^\d)?\.?\s*)+)")
_MATH_WORDS = {"pi", "sqrt", "frac", "cdot", "times", "infty"}


def _canon_number(t: str) -> str:
    """'+007.50' -> '7.5', '-.5' -> '-0.5', '-0.0' -> '0' for a string that is one plain decimal number."""
    sign = "-" if t.startswith("-") else ""
    t = t.lstrip("+-")
    whole, _, frac = t.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    out = whole + ("." + frac if frac else "")
    return "0" if out == "0" else sign + out


def _simple(x: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9.]+|\\pi", x) is not None


def _wrapped(s: str) -> bool:
    """Whether the first "(" of ``s`` closes at its last character."""
    depth = 0
    for i, ch in enumerate(s):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i == len(s) - 1
    return False


def normalize_answer(s: str | None) -> str:
    """Canonical string form of a math answer (see the module docstring); '' for None/empty.

    ``"\\boxed{\\dfrac{1}{2}}"`` -> ``"1/2"``, ``"\\$1,000.00"`` -> ``"1000"``, ``"90^\\circ"`` -> ``"90"``,
    ``"x = \\left( 3 \\right)"`` -> ``"3"``, ``"12 dollars"`` -> ``"12"``.
    """
    s = _as_text(s)
    boxed = extract_boxed(s) if "\\boxed" in s or "\\fbox" in s else None
    if boxed is not None:
        s = boxed
    s = s.strip()
    if len(s) > MAX_ANSWER_CHARS:
        return s
    for a, b in _UNICODE.items():
        s = s.replace(a, b)
    s = s.replace("\n", " ").replace("\t", " ").replace("{,}", ",")
    for _ in range(10):  # \text{\textbf{5}}
        s, n = _TEXT_CMD.subn(r"\1", s)
        if not n:
            break
    for tok in ("^{\\circ}", "^\\circ", "\\circ", "\\degree"):
        s = s.replace(tok, "")
    for tok in _SPACES:
        s = s.replace(tok, " " if tok in ("\\left", "\\right") else "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    # \frac12 -> \frac{1}{2}, \frac1{2} -> \frac{1}{2}, \frac{1}2 -> \frac{1}{2}, \sqrt3 -> \sqrt{3}
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d+|[A-Za-z])", r"\\sqrt{\1}", s)
    # mixed numbers: 2\frac{1}{2} and "2 1/2" mean 2 + 1/2
    s = re.sub(r"(?<![\d.])(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}", r"(\1+\2/\3)", s)
    s = re.sub(r"^\s*(\d+)\s+(\d+)\s*/\s*(\d+)\s*$", r"(\1+\2/\3)", s)
    for _ in range(50):  # innermost first: \frac{\sqrt{3}}{2} -> sqrt(3)/2
        s1 = _SQRT.sub(r"sqrt(\1)", s)
        s1 = _FRAC.sub(lambda m: (f"{m.group(1).strip()}/{m.group(2).strip()}"
                                  if _simple(m.group(1).strip()) and _simple(m.group(2).strip())
                                  else f"({m.group(1)})/({m.group(2)})"), s1)
        s1 = _CARET.sub(lambda m: "^" + (m.group(1) if _simple(m.group(1).strip()) else f"({m.group(1)})"), s1)
        if s1 == s:
            break
        s = s1
    s = s.strip().rstrip(".").strip()
    # "x = 5", "k=5" -> "5" (a single variable on the left, nothing else assigned)
    if m := re.fullmatch(r"[A-Za-z]\s*=\s*([^=]+)", s):
        s = m.group(1).strip()
    m = _UNIT_WORDS.fullmatch(s)
    if m and not (set(re.findall(r"[A-Za-z]+", m.group(2))) & _MATH_WORDS):
        s = m.group(1)
    s = _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    if s.startswith("(") and s.endswith(")") and "," not in s and _wrapped(s):  # "(3)" -> "3"; "(1,2)" stays
        s = s[1:-1]
    if _NUMBER.fullmatch(s):
        s = _canon_number(s)
    return s


# --------------------------------------------------------------------------- exact numbers
_ARITH_CHARS = re.compile(r"[\d.+\-*/()eE^ ]+")


def _to_fraction(s: str) -> Fraction | None:
    """Exact value of an already normalized answer built from numbers, + - * / ^ and parentheses (powers only with
    small integer exponents); None for anything else."""
    if not s or len(s) > MAX_EXPR_CHARS or not _ARITH_CHARS.fullmatch(s):
        return None
    try:
        tree = ast.parse(s.replace("^", "**"), mode="eval")
        return _eval_node(tree.body, s.replace("^", "**"))
    except Exception:  # SyntaxError, ZeroDivisionError, ValueError, RecursionError, MemoryError
        return None


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: lambda a, b: a ** int(b)}


def _eval_node(node: ast.AST, src: str) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        text = ast.get_source_segment(src, node) or str(node.value)
        m = re.search(r"[eE]([+-]?\d+)$", text)
        if m and abs(int(m.group(1))) > 400:  # Fraction("1e9999999") would build a 33-million-bit integer
            raise ValueError("exponent too large")
        return Fraction(text)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        v = _eval_node(node.operand, src)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _eval_node(node.left, src), _eval_node(node.right, src)
        if isinstance(node.op, ast.Pow) and (b.denominator != 1 or abs(b) > 400 or a.numerator.bit_length() > 64
                                             or a.denominator.bit_length() > 64):
            raise ValueError("power too large")
        out = _BINOPS[type(node.op)](a, b)
        if out.numerator.bit_length() > 8192 or out.denominator.bit_length() > 8192:
            raise ValueError("number too large")
        return out
    raise ValueError("not arithmetic")


def normalize_number(s: str | None) -> float | None:
    """The numeric value of an answer (integers, decimals, signs, fractions, ``\\frac``, thousands separators,
    ``$``/``%``/units stripped, ``\\boxed``), as a float; None when it is not a number (or overflows a float)."""
    try:
        v = _to_fraction(normalize_answer(s))
        return None if v is None else float(v)
    except Exception:  # OverflowError for huge values
        return None


def _numbers_equal(a: Fraction, b: Fraction, rel_tol: float = REL_TOL) -> bool:
    if a == b:
        return True
    if a.denominator == 1 and b.denominator == 1:  # integer answers must match exactly
        return False
    return abs(a - b) <= Fraction(rel_tol) * max(abs(a), abs(b))


# --------------------------------------------------------------------------- sympy (guarded)
class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that sympy's own ``except Exception`` cannot swallow it."""


@contextmanager
def _time_limit(seconds: float):
    """SIGALRM-based limit, used only where it is safe: main thread, no timer or handler already installed."""
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0
              and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None))
    with alarm_time_limit(seconds, _Timeout) if usable else nullcontext():
        yield


_SYMPY_CHARS = re.compile(r"[0-9A-Za-z+\-*/^(). ]+")
_SYMPY_NAMES = {"sqrt", "pi"}


@cache
def _sympy_globals() -> dict:
    """sympy's namespace, built once (parse_expr would run ``from sympy import *`` on every call)."""
    namespace: dict = {}
    exec("from sympy import *", namespace)  # noqa: S102 - a fixed import, no user text
    return namespace


def _to_sympy(s: str):
    """A sympy expression for a short normalized answer over numbers, single-letter variables, sqrt and pi; None
    when the text has anything else or a power that could blow up."""
    if not s or len(s) > MAX_EXPR_CHARS:
        return None
    s = (s.replace("\\pi", "pi").replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/")
         .replace("{", "(").replace("}", ")"))
    if not _SYMPY_CHARS.fullmatch(s) or "**" in s or s.count("^") > 3 or re.search(r"\d\.?[eE][+-]?\d", s):
        return None  # 1e9999999 would become a Float sympy cannot be interrupted in
    names = set(re.findall(r"[A-Za-z]+", s))
    if any(len(n) > 1 and n not in _SYMPY_NAMES for n in names):  # no E, N, S, I, exp, factorial, ...
        return None
    import sympy
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    local = {n: sympy.Symbol(n) for n in names if len(n) == 1}
    local.update(sqrt=sympy.sqrt, pi=sympy.pi)
    transformations = standard_transformations + (convert_xor, implicit_multiplication_application)
    expr = parse_expr(s, local_dict=local, global_dict=_sympy_globals(), transformations=transformations,
                      evaluate=False)
    if not isinstance(expr, sympy.Expr):
        return None
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Pow):  # 9^9^9^9: the exponent must be small before anything evaluates it
            e = node.exp
            if any(not (p.exp.is_Number and abs(p.exp) <= 64) or p.base.has(sympy.Pow) for p in e.atoms(sympy.Pow)):
                return None
            if not e.free_symbols and abs(complex(e.evalf(15))) > 64:
                return None
        if isinstance(node, sympy.Integer) and abs(node) > 10**60:
            return None
    return expr


def _close(a: complex, b: complex) -> bool:
    """Equal to 1e-9 relative; never for inf/nan (a value too large for a float proves nothing)."""
    if not (cmath.isfinite(a) and cmath.isfinite(b)):
        return False
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _sympy_equal(pred: str, truth: str, fast: bool) -> bool:
    """Equal as numbers (30 digits), or as functions: agreement at random rational points (3 when ``fast``, else 8;
    cheaper and safer than ``expand``/``simplify``, which blow up on ``(a+b+c+d)^64``), within a 1 s / 5 s limit."""
    try:
        import sympy  # imported before the alarm starts: an import cut short would leave a broken module
        import sympy.parsing.sympy_parser  # noqa: F401

        _sympy_globals()
        with _time_limit(1.0 if fast else 5.0):
            a, b = _to_sympy(pred), _to_sympy(truth)
            if a is None or b is None:
                return False
            a, b = a.doit(), b.doit()
            symbols = sorted(a.free_symbols | b.free_symbols, key=str)
            if not symbols:
                return _close(complex(sympy.N(a, 30)), complex(sympy.N(b, 30)))
            rng = random.Random(0)
            for _ in range(3 if fast else 8):
                point = {x: sympy.Rational(rng.randint(1, 97), rng.randint(1, 13)) for x in symbols}
                if not _close(complex(sympy.N(a.subs(point), 30)), complex(sympy.N(b.subs(point), 30))):
                    return False
            return True
    except (_Timeout, Exception):  # the time limit, or sympy failing:
        return False  # SympifyError, TypeError (zoo, nan), ZeroDivisionError, RecursionError, OverflowError...


# --------------------------------------------------------------------------- equality and rewards
def answers_equal(pred: str | None, truth: str | None, fast: bool = True) -> bool:
    """Whether a predicted answer equals the ground truth: normalized strings (case-insensitive), then exact
    rationals (integers exactly, others within relative ``REL_TOL``), then sympy (``fast=False``: more random
    points, longer time limit). False for a missing or empty prediction; never raises."""
    try:
        if pred is None or truth is None:
            return False
        p, t = normalize_answer(pred), normalize_answer(truth)
        if not p or not t:
            return False
        if p.casefold() == t.casefold():
            return True
        fp, ft = _to_fraction(p), _to_fraction(t)
        if fp is not None and ft is not None:
            return _numbers_equal(fp, ft)
        return _sympy_equal(p, t, fast)
    except Exception:
        return False


def r1_zero_reward_fn(response: str, ground_truth: str | int | float | Iterable, fast: bool = True) -> dict:
    """CS336's R1-Zero reward: ``{"reward", "format_reward", "answer_reward"}``, all 0.0 when the format is wrong;
    format 1.0 and answer/reward 1.0 only when the answer in the last ``<answer>`` tag (a ``\\boxed{}`` in it
    taken) equals the ground truth (or any of a list of them)."""
    try:
        response = _as_text(response)
        if not format_reward(response):
            return dict(_ZERO)
        answer = extract_answer(response)
        truths = ground_truth if isinstance(ground_truth, (list, tuple)) else [ground_truth]
        ok = answer is not None and any(answers_equal(answer, _as_text(t), fast) for t in truths)
        return {"reward": float(ok), "format_reward": 1.0, "answer_reward": float(ok)}
    except Exception:
        return dict(_ZERO)


# --------------------------------------------------------------------------- GSM8K
_LAST_NUMBER = re.compile(r"(?:(?<![\w.])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def parse_gsm8k_answer(text: str) -> str | None:
    """The number on the last ``#### N`` line of a GSM8K solution, commas removed (``"#### 1,200"`` -> ``"1200"``);
    None when there is no such line or no number on it."""
    text = _as_text(text)
    i = text.rfind("####")
    if i < 0:
        return None
    line = text[i + 4:].split("\n", 1)[0]
    m = re.search(r"-?\s*[\d,]*\d(?:\.\d+)?", line.replace("$", ""))
    if not m:
        return None
    return _canon_number(re.sub(r"[\s,]", "", m.group(0)))


def last_number(text: str) -> str | None:
    """The last number in free text (``"so she has 1,200.50 dollars."`` -> ``"1200.5"``); None if there is none."""
    text = _as_text(text)
    matches = list(_LAST_NUMBER.finditer(text))
    return _canon_number(matches[-1].group(0).replace(",", "")) if matches else None


def gsm8k_reward(response: str, ground_truth: str | int | float) -> dict:
    """Reward for a free-form GSM8K answer: the ``#### N`` line, else the ``<answer>`` tag, else the last
    ``\\boxed{}``, else the last number in the text, compared with the ground truth (a number or a whole GSM8K
    solution). ``format_reward`` is 1.0 when any answer could be found; ``reward == answer_reward``."""
    try:
        response = _as_text(response)
        truth = _as_text(ground_truth)
        if "####" in truth:
            truth = parse_gsm8k_answer(truth) or ""
        pred = parse_gsm8k_answer(response) if "####" in response else None
        if pred is None:
            tagged = extract_answer(response)
            pred = tagged if tagged else extract_boxed(response)
        if pred is not None and normalize_number(pred) is None:
            pred = last_number(pred) or pred
        if pred is None:
            pred = last_number(response)
        if pred is None:
            return dict(_ZERO)
        ok = answers_equal(pred, truth)
        return {"reward": float(ok), "format_reward": 1.0, "answer_reward": float(ok)}
    except Exception:
        return dict(_ZERO)


# --------------------------------------------------------------------------- MMLU
_LETTER = r"\(?([A-Da-d])\)?"
_EXPLICIT = re.compile(r"(?i:answer|option|choice)(?:\s+(?i:is|would\s+be|should\s+be))?\s*(?:[:=\-]\s*)?"
                       r"(?:\*\*)?\s*" + _LETTER + r"(?![\w'])")
_OR_OTHER = re.compile(r"\s*(?:\*\*)?\s*(?:,|/|or\b|and\b)\s*\(?[A-D]\)?(?!\w)")


def parse_mmlu_letter(response: str) -> str | None:
    """The multiple-choice letter a response commits to (``"B"``, ``"(C)"``, ``"B. Paris"``, ``"The correct answer is
    B"``, ``"answer: d"``), upper-cased; None when none is given or the response names different letters."""
    try:
        text = _as_text(response)[:100_000].strip()
        found = []
        for m in _EXPLICIT.finditer(text):
            letter, rest = m.group(1), text[m.end():]
            if letter.islower() and not re.match(r"\s*(?:[.)\],;:!]|$)", rest):
                continue  # "the answer is a bit longer" - an article, not a choice
            if _OR_OTHER.match(rest):
                return None  # "the answer is B or C"
            found.append(letter.upper())
        if found:
            return found[0] if len(set(found)) == 1 else None
        if m := re.match(r"\(?([A-D])(?:\)|\.|:|$|\s*$)", text):  # "B", "(C)", "B.", "C) Paris", "D: ..."
            return None if _OR_OTHER.match(text[m.end():]) else m.group(1)
        parens = set(re.findall(r"\(([A-D])\)", text))
        return parens.pop() if len(parens) == 1 else None
    except Exception:
        return None
