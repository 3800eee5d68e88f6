"""PII masking: e-mail addresses, phone numbers and IPv4 addresses replaced by fixed tokens, and the ``pii`` step.

After CS336 assignment 4 (``mask_emails``, ``mask_phone_numbers``, ``mask_ips`` return ``(masked_text, count)``
and replace with ``|||EMAIL_ADDRESS|||``, ``|||PHONE_NUMBER|||``, ``|||IP_ADDRESS|||``) and Dolma's PII regexes
(``python/dolma/taggers/pii.py``). One precompiled regex per kind, linear on 10 MB single lines. Boundaries are
ASCII (``re.ASCII``): a number or address glued to CJK text (``お電話は03-7624-4695まで``) is still found, and
e-mail local parts and domains are ASCII (internationalized addresses are not matched).

- E-mail: ``local@domain.tld`` (local part of word characters and ``. % + ' -``; dotted domain, alphabetic TLD).
  A sentence's trailing period is not part of the domain. Obfuscated forms ("jane at example dot com") are not
  matched.
- Phone: (1) North American numbers, NANP-shaped (the area code starts with 2-9): ``2831823829``,
  ``283-182-3829``, ``283.182.3829``, ``(283) 182 3829``, ``(283)-182-3829``, ``+1 283 182 3829``,
  ``+1-283-182-3829``, ``1-283-182-3829``; (2) international ``+CC`` numbers, E.164-like: ``+`` country code, then
  groups of digits (one may be in parentheses) split by single spaces, dots or hyphens, 8-15 digits in all
  (``+44 20 7946 0958``, ``+7 495 123-45-67``, ``+81 3-1234-5678``); (3) national numbers written with a trunk
  prefix and separators, 9-12 digits in all: ``030 1234567``, ``01 23 45 67 89``, ``03-1234-5678``,
  ``010-12345678``, ``8 (812) 123-45-67``.
  Not phones: dates (``2024-03-15``, ``03/15/2024``, ``15.03.2024``), times, prices, versions, ISBNs (hyphenated or
  13 digits bare; any form after the word ``ISBN``, ``ISBN-10: 3942795116`` included), IBANs and their groups
  (``DE30 6805 1207 0000 3701 71``, also broken over two lines), order numbers that are not 10 digits, and runs of
  small numbers: trunk-shaped pairs that count up (``01 02 03 04 05``) or go on with another 1-2 digit number in
  the same separator (a calendar row ``01 02 03 … 31``, a timetable, a lottery draw ``03 12 18 27 35 41``).
  Known misses and false hits: a bare 10-digit number that is NANP-shaped *is* masked unless ``ISBN`` precedes it
  (an ISBN-10 without its keyword, or an order number); five pairs that neither count up nor continue are a
  French-style phone even when they are a lottery draw; national numbers without separators (``0301234567``) are
  not masked.
- IPv4: four dotted octets 0-255 (no leading zeros beyond ``0``), not inside a longer dotted number (``1.2.3.4.5``,
  ``10.0.19045.3693``), not glued to letters (``v1.2.3.4``), not right after a version word (``Version 1.0.0.1``,
  ``build 2.4.0.13``; a product name before a bare four-part version is not recognized); a trailing sentence
  period stays outside the mask.

The tokens contain no ``@``, digits or dots, so text that is already masked is never re-matched or re-counted.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import ClassVar

from pipeline.runtime.steps import Step, as_text
from workbench.params import setting

EMAIL_TOKEN = "|||EMAIL_ADDRESS|||"
PHONE_TOKEN = "|||PHONE_NUMBER|||"
IP_TOKEN = "|||IP_ADDRESS|||"

_EMAIL = re.compile(r"""
    (?<![\w.%+-])                   # not in the middle of a longer token
    [\w%+-][\w.%+'-]*               # local part
    @
    (?:[\w-]+\.)+[^\W\d_]{2,}       # domain labels, then an alphabetic TLD
    (?![\w-]|\.[\w-])               # the whole domain (a trailing period is punctuation)
""", re.VERBOSE | re.ASCII)

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\w|\.[0-9])", re.ASCII)
_VERSION_WORD = re.compile(r"(?<![A-Za-z])(?:version|ver|v|build|firmware|release|rev)\.?:?\s*$",
                           re.IGNORECASE | re.ASCII)

_SEP = r"[ .-]"
_GROUP = r"(?:\([0-9]{1,5}\)|[0-9]{1,5})"
_PHONE = re.compile(rf"""
    (?<![\w.+/$#-])                 # not inside a longer number, word, price, path or id
    (?:
        (?P<intl>\+[1-9][0-9]{{0,2}}(?:{_SEP}?{_GROUP}){{1,6}})
      | (?P<nanp>(?:\+1{_SEP}?|1{_SEP})?                     # +1 or 1- country code
                 (?:\([2-9][0-9]{{2}}\){_SEP}?|[2-9][0-9]{{2}}{_SEP}?)[0-9]{{3}}{_SEP}?[0-9]{{4}})
      | (?P<trunk>(?:(?:8{_SEP}?\([0-9]{{3,5}}\)|\(0[0-9]{{1,4}}\)){_SEP}?[0-9]{{2,8}}|0[0-9]{{1,4}})
                 (?:(?P<sep>{_SEP})[0-9]{{2,8}}(?:(?P=sep)[0-9]{{2,8}}){{0,3}})?)   # one separator throughout
    )
    (?![\w+:]|[.,/-][0-9])         # and not followed by more of it
""", re.VERBOSE | re.ASCII)
_PHONE_DIGITS = {"intl": (8, 15), "nanp": (10, 11), "trunk": (9, 12)}
_LAST_GROUP = re.compile(rf"{_SEP}?{_GROUP}$")
# Numbers of phone shape that are something else; a phone match that overlaps one is left alone.
_NOT_PHONE = re.compile(r"""
    (?i:\bISBN(?:[- ]?1[03])?)[:\s]*(?:[0-9][- ]?){9,12}[0-9Xx]\b                  # an ISBN after its keyword
  | (?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,3})?(?![A-Za-z0-9])   # an IBAN
""", re.VERBOSE | re.ASCII)
_SMALL_NUMBER_BEFORE = re.compile(r"(?<![0-9])[0-9]{1,2}[ .-]$")


def _digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


def mask_emails(text: str) -> tuple[str, int]:
    """Replace every e-mail address with ``|||EMAIL_ADDRESS|||``; return (text, how many)."""
    text = as_text(text)
    return _EMAIL.subn(EMAIL_TOKEN, text) if "@" in text else (text, 0)


def mask_ips(text: str) -> tuple[str, int]:
    """Replace every IPv4 address with ``|||IP_ADDRESS|||``; return (text, how many)."""
    text = as_text(text)
    if "." not in text:
        return text, 0
    count = 0

    def repl(m: re.Match) -> str:
        nonlocal count
        if _VERSION_WORD.search(text, max(0, m.start() - 16), m.start()):
            return m.group(0)
        count += 1
        return IP_TOKEN

    return _IPV4.sub(repl, text), count


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) overlaps one of the sorted, disjoint ``spans``."""
    i = bisect_left(spans, (end, end))
    return i > 0 and spans[i - 1][1] > start


def _number_run(text: str, m: re.Match, number: str) -> bool:
    """A trunk-shaped match of 1-2 digit groups that counts up (``01 02 03 04 05``) or has another 1-2 digit number
    beside it in the same separator (a calendar row, a timetable, a lottery draw): a run of numbers, not a phone."""
    sep = m.group("sep")
    groups = number.split(sep) if sep else [number]
    if not sep or not all(len(g) <= 2 and g.isdigit() for g in groups):
        return False
    if all(int(b) == int(a) + 1 for a, b in zip(groups, groups[1:], strict=False)):
        return True
    before = _SMALL_NUMBER_BEFORE.search(text, max(0, m.start() - 3), m.start())
    after = text[m.end():m.end() + 2]
    return before is not None and before.group(0).endswith(sep) or after[:1] == sep and after[1:2].isdigit()


def phone_number_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every phone number in ``text``, in order: what ``mask_phone_numbers`` replaces."""
    text, spans, protected = as_text(text), [], None
    for m in _PHONE.finditer(text):
        kind = next(k for k in _PHONE_DIGITS if m.group(k))
        number = m.group(0)
        if protected is None:  # found once per text, and only for a text with a phone-shaped number
            protected = [x.span() for x in _NOT_PHONE.finditer(text)]
        if _overlaps(protected, m.start(), m.end()) or kind == "trunk" and _number_run(text, m, number):
            continue
        lo, hi = _PHONE_DIGITS[kind]
        while kind == "intl" and _digits(number) > hi:  # greedy groups ran into a following number: give them back
            number = number[: _LAST_GROUP.search(number).start()]
        if lo <= _digits(number) <= hi:
            spans.append((m.start(), m.start() + len(number)))
    return spans


def mask_phone_numbers(text: str) -> tuple[str, int]:
    """Replace every phone number (NANP, ``+CC`` international, trunk-prefixed national) with
    ``|||PHONE_NUMBER|||``, except ISBNs, IBANs and runs of small numbers; return (text, how many)."""
    text = as_text(text)
    spans = phone_number_spans(text)
    if not spans:
        return text, 0
    starts, ends = zip(*spans, strict=True)  # the text between the numbers, joined by tokens
    return PHONE_TOKEN.join(text[a:b] for a, b in zip((0, *ends), (*starts, len(text)), strict=True)), len(spans)


def mask_pii(text: str, emails: bool = True, phones: bool = True, ips: bool = True) -> tuple[str, dict[str, int]]:
    """Mask e-mails, then IPs, then phones (so digits inside addresses are never read as phones)."""
    text, counts = as_text(text), {"email": 0, "phone": 0, "ip": 0}
    for kind, on, fn in (("email", emails, mask_emails), ("ip", ips, mask_ips), ("phone", phones, mask_phone_numbers)):
        if on:
            text, counts[kind] = fn(text)
    return text, counts


@dataclass(frozen=True)
class PIIMasker(Step):
    """Mask PII in ``doc["text"]`` and record ``doc["pii"] = {"email": n, "phone": n, "ip": n}``; never rejects."""

    name: ClassVar[str] = "pii"
    emails: bool = setting(True, "mask e-mail addresses")
    phones: bool = setting(True, "mask phone numbers")
    ips: bool = setting(True, "mask IP addresses")

    def reject(self, doc: dict) -> str | None:
        text = doc.get("text")
        masked, counts = mask_pii(text, self.emails, self.phones, self.ips)
        if text is not None and masked != text:
            doc["text"] = masked
        doc["pii"] = counts
        return None
