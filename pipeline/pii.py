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
  ``010-12345678``, ``8 (812) 123-45-67``. Not phones: dates (``2024-03-15``, ``03/15/2024``, ``15.03.2024``),
  times, prices, versions, ISBNs (hyphenated or 13 digits bare), order numbers that are not 10 digits. Known
  misses and false hits: a bare 10-digit number that is NANP-shaped *is* masked (it may be an ISBN-10 or an order
  number); national numbers without separators (``0301234567``) are not.
- IPv4: four dotted octets 0-255 (no leading zeros beyond ``0``), not inside a longer dotted number (``1.2.3.4.5``,
  ``10.0.19045.3693``), not glued to letters (``v1.2.3.4``); a trailing sentence period stays outside the mask.

The tokens contain no ``@``, digits or dots, so text that is already masked is never re-matched or re-counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from pipeline.steps import Step

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


def _text(text) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return "" if text is None else str(text)


def _digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


def mask_emails(text: str) -> tuple[str, int]:
    """Replace every e-mail address with ``|||EMAIL_ADDRESS|||``; return (text, how many)."""
    text = _text(text)
    return _EMAIL.subn(EMAIL_TOKEN, text) if "@" in text else (text, 0)


def mask_ips(text: str) -> tuple[str, int]:
    """Replace every IPv4 address with ``|||IP_ADDRESS|||``; return (text, how many)."""
    text = _text(text)
    return _IPV4.subn(IP_TOKEN, text) if "." in text else (text, 0)


def mask_phone_numbers(text: str) -> tuple[str, int]:
    """Replace every phone number (NANP, ``+CC`` international, trunk-prefixed national) with
    ``|||PHONE_NUMBER|||``; return (text, how many)."""
    text = _text(text)
    count = 0

    def repl(m: re.Match) -> str:
        nonlocal count
        kind = next(k for k in _PHONE_DIGITS if m.group(k))
        number, rest = m.group(0), ""
        lo, hi = _PHONE_DIGITS[kind]
        while kind == "intl" and _digits(number) > hi:  # greedy groups ran into a following number: give them back
            cut = _LAST_GROUP.search(number)
            number, rest = number[: cut.start()], number[cut.start():] + rest
        if lo <= _digits(number) <= hi:
            count += 1
            return PHONE_TOKEN + rest
        return m.group(0)

    return _PHONE.sub(repl, text), count


def mask_pii(text: str, emails: bool = True, phones: bool = True, ips: bool = True) -> tuple[str, dict[str, int]]:
    """Mask e-mails, then IPs, then phones (so digits inside addresses are never read as phones)."""
    text, counts = _text(text), {"email": 0, "phone": 0, "ip": 0}
    for kind, on, fn in (("email", emails, mask_emails), ("ip", ips, mask_ips), ("phone", phones, mask_phone_numbers)):
        if on:
            text, counts[kind] = fn(text)
    return text, counts


@dataclass(frozen=True)
class PIIMasker(Step):
    """Mask PII in ``doc["text"]`` and record ``doc["pii"] = {"email": n, "phone": n, "ip": n}``; never rejects."""

    name: ClassVar[str] = "pii"
    emails: bool = True
    phones: bool = True
    ips: bool = True

    def __post_init__(self):
        for f in ("emails", "phones", "ips"):
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"{f} must be True or False, got {getattr(self, f)!r}")

    def reject(self, doc: dict) -> str | None:
        text = doc.get("text")
        masked, counts = mask_pii(text, self.emails, self.phones, self.ips)
        if text is not None and masked != text:
            doc["text"] = masked
        doc["pii"] = counts
        return None
