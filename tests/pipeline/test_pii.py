"""PII masking against hand-written cases (real phone formats, and real-world numbers that are not PII), Python's
``ipaddress`` as a reference, and the generated crawl's manifest."""

from __future__ import annotations

import ipaddress
import random
import time

import pytest

from pipeline.filters.pii import (
    EMAIL_TOKEN,
    IP_TOKEN,
    PHONE_TOKEN,
    PIIMasker,
    mask_emails,
    mask_ips,
    mask_phone_numbers,
    mask_pii,
    phone_number_spans,
)
from pipeline.runtime.steps import StepStats, run_steps

US_PHONES = ["2831823829", "(283)-182-3829", "(283) 182 3829", "283-182-3829", "283.182.3829", "+1 283 182 3829",
             "+1-283-182-3829", "1-283-182-3829", "+1 (283) 182-3829", "(555) 412-0199", "555-412-0199"]
INTL_PHONES = ["+44 20 7946 0958", "+49 30 12345678", "+33 1 23 45 67 89", "+34 91 123 45 67", "+39 06 1234 5678",
               "+7 495 123-45-67", "+81 3-1234-5678", "+86 10 1234 5678", "+4930123456", "+44 (20) 7946 0958"]
NATIONAL_PHONES = ["030 1234567", "01 23 45 67 89", "03-1234-5678", "010-12345678", "8 (812) 123-45-67",
                   "(030) 1234567"]
# Things a masker must leave alone: what the generated crawl plants as look-alikes, and more.
NOT_PII = ["v2.10.3", "1.2.3.4.5", "10.0.19045.3693", "3.11.4", "2024-03-15", "03/15/2024", "15.03.2024",
           "01.03.2024 14:30", "2022-02-28 02:23", "14:30", "10:45:12", "9:05 pm", "$1,299.99", "$49.99", "€12,99",
           "978-3-16-148410-0", "9783161484100", "0-306-40615-2", "ISBN 978-0-306-40615-7", "#48213977", "123456789",
           "12831823829", "123456789012", "112-4567890-1234567", "1,234,567", "+5 points",
           "in 2019 and 2020, 15 of 300",
           "999.1.1.1", "256.1.1.1", "1.2.3", "user at example dot com", "@handle", "a@b", "3 @ 5 euros"]


# Real-world numbers that are not PII, by hand, each a shape seen on web pages (the first of each group from
# ../shared/data/web, where the masker used to take them for phones).
REAL_NOT_PII = {
    "isbn": ["ISBN-10: 3942795116", "ISBN-13: 978-3942795111", "ISBN 978-3-16-148410-0", "ISBN 9783161484100",
             "ISBN 3-942795-11-6", "ISBN 0-306-40615-2", "ISBN 0306406152", "ISBN 3-16-148410-X", "ISBN 316148410X",
             "ISBN 978 3 16 148410 0", "ISBN: 2-266-11156-6", "ISBN 80-902734-1-6", "ISBN 10: 0306406152",
             "isbn 4101092052", "ISBN 9783942795111 (Hardcover), ISBN 3942795116", "ISBN 0 306 40615 2"],
    "iban": ["IBAN: DE30 6805 1207 0000 3701 71", "IBAN DE89 3704 0044 0532 0130 00", "DE89370400440532013000",
             "GB29 NWBK 6016 1331 9268 19", "FR14 2004 1010 0505 0001 3M02 606", "AT61 1904 3002 3457 3201",
             "CH93 0076 2011 6238 5295 7", "NL91 ABNA 0417 1643 00", "ES91 2100 0418 4502 0005 1332",
             "IT60 X054 2811 1010 0000 0123 456", "PL61 1090 1014 0000 0712 1981 2874",
             "IBAN: DE30 6805 1207\n0000 3701 71", "Kontonummer 0532013000, BLZ 370 400 44"],
    "number runs": ["Oktober 2020 Mo Di Mi Do Fr Sa So 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 18 19 20 "
                    "21 22 23 24 25 26 27 28 29 30 31 November 2020", "01 02 03 04 05 06 07 08 09 10", "01 02 03 04 05",
                    "Lottozahlen: 03 12 18 27 35 41, Superzahl 7", "Abfahrt 06 16 06 36 06 56 07 16 07 36",
                    "« 1 2 3 4 5 6 … 12 »", "0 1 2 3 4 5 6 7 8 9", "Größen: 34 36 38 40 42 44 46",
                    "100 200 300 400 500 600", "2019 2020 2021 2022 2023"],
    "dates": ["Saisonzeitraum08.01.2020 - 02.02.2020", "15/03/2024", "2024/03/15", "05-03-2024", "20240315",
              "03.04.2024 – 05.04.2024", "2024-03-15T14:30:00+01:00", "05 03 2024", "12/31/2023 - 01/15/2024",
              "05.03.2024 12:30 - 14:00"],
    "versions": ["Version 9.04", "Version 1.0.0.1", "firmware 2.4.0.13", "1.2.3-beta.4", "Build 22621.2428",
                 "kernel 5.15.0-91-generic", "Chrome 120.0.6099.109", "version 2023.10.1", "KB3075249 KB3080149"],
    "prices": ["US $ 2.400,00 / Woche (7 Tage)", "1.299,00 €", "£1,250,000", "¥ 12 800", "CHF 1'250.–",
               "Rs. 1,23,456", "1 299 000 Ft", "12 345 678 €", "USD 2,400,000.00", "09,99 EUR"],
}
NOT_PII_REAL = [v for values in REAL_NOT_PII.values() for v in values]


def test_real_world_negatives_are_many_and_of_every_kind():
    assert len(NOT_PII_REAL) >= 40 and all(len(v) >= 8 for v in REAL_NOT_PII.values())


@pytest.mark.parametrize("value", NOT_PII_REAL)
def test_real_world_numbers_that_are_not_pii_are_not_masked(value):
    for text in (value, f"See {value}. Then {value}, and ({value})"):
        assert mask_pii(text) == (text, {"email": 0, "phone": 0, "ip": 0}), text


def test_planted_pii_among_real_world_negatives_is_all_masked():
    """Recall beside the look-alikes: each planted value is masked, each negative survives, the counts are exact."""
    r = random.Random(3)
    phones = US_PHONES + INTL_PHONES + NATIONAL_PHONES
    emails, ips = ["jane.doe@example.com", "x_y-z%1@gmx.de"], ["10.0.0.1", "192.168.1.254", "8.8.8.8"]
    planted = [("phone", v) for v in phones] + [("email", v) for v in emails] + [("ip", v) for v in ips]
    negatives = NOT_PII_REAL + NOT_PII
    r.shuffle(planted)
    parts = []
    for i, (_, value) in enumerate(planted):
        parts.append(f"{negatives[i % len(negatives)]}. Call {value} today; {negatives[(i + 7) % len(negatives)]}.")
    text = " ¶\n".join(parts)
    masked, counts = mask_pii(text)
    assert counts == {kind: sum(k == kind for k, _ in planted) for kind in ("email", "phone", "ip")}
    token = {"phone": PHONE_TOKEN, "email": EMAIL_TOKEN, "ip": IP_TOKEN}
    for line, (kind, value) in zip(masked.split(" ¶\n"), planted, strict=True):
        assert f"Call {token[kind]} today;" in line, (value, line)


def test_phone_number_spans_are_what_is_masked():
    text = "Tel. 030 1234567, Fax (030) 1234568; ISBN 3942795116; days 01 02 03 04 05 06"
    spans = phone_number_spans(text)
    assert [text[a:b] for a, b in spans] == ["030 1234567", "(030) 1234568"]
    assert mask_phone_numbers(text)[1] == len(spans)


@pytest.mark.parametrize("phone", US_PHONES + INTL_PHONES + NATIONAL_PHONES)
def test_each_phone_form_is_masked_with_its_trailing_punctuation_kept(phone):
    text = f"Call {phone}. Or text {phone}, any day ({phone})"
    masked, n = mask_phone_numbers(text)
    assert (masked, n) == (f"Call {PHONE_TOKEN}. Or text {PHONE_TOKEN}, any day ({PHONE_TOKEN})", 3)


@pytest.mark.parametrize("value", NOT_PII)
def test_look_alikes_are_not_masked(value):
    text = f"See {value}. Then {value}, and ({value})"
    assert mask_pii(text) == (text, {"email": 0, "phone": 0, "ip": 0})


def test_phone_in_cjk_text_without_spaces():
    want = f"お電話は{PHONE_TOKEN}までお願いします。"
    assert mask_phone_numbers("お電話は03-7624-4695までお願いします。") == (want, 1)
    assert mask_phone_numbers("请拨打电话+86 10 9777 7942联系我们。") == (f"请拨打电话{PHONE_TOKEN}联系我们。", 1)


def test_phone_followed_by_another_number_gives_the_extra_groups_back():
    masked, n = mask_phone_numbers("call +44 20 7946 0958 12 34 56 now")
    assert n == 1 and masked.startswith(f"call {PHONE_TOKEN}") and masked.endswith(" now")


@pytest.mark.parametrize("email", ["jane.doe@example.com", "j.o'neil+news@mail.example.co.uk", "x_y-z%1@gmx.de",
                                   "ALICE@EXAMPLE.ORG", "bob2019@sub-domain.example.museum"])
def test_emails_are_masked_and_trailing_period_kept(email):
    text = f"Write to {email}. Or '{email}', or <{email}>!"
    assert mask_emails(text) == (f"Write to {EMAIL_TOKEN}. Or '{EMAIL_TOKEN}', or <{EMAIL_TOKEN}>!", 3)


def test_email_next_to_cjk_text_keeps_the_text():
    assert mask_emails("如有问题，请发邮件至li.wei@qq.com。") == (f"如有问题，请发邮件至{EMAIL_TOKEN}。", 1)


def test_ip_octets_and_boundaries_hand_cases():
    cases = {
        "at 10.0.0.1.": f"at {IP_TOKEN}.",
        "from 192.168.1.254, then 255.255.255.255": f"from {IP_TOKEN}, then {IP_TOKEN}",
        "0.0.0.0:8080 and 8.8.8.8/32": f"{IP_TOKEN}:8080 and {IP_TOKEN}/32",
        "999.1.1.1 256.0.0.1 1.256.1.1 1.1.1.300": "999.1.1.1 256.0.0.1 1.256.1.1 1.1.1.300",
        "1.2.3.4.5, 10.0.19045.3693, v1.2.3.4, 1.2.3.4a": "1.2.3.4.5, 10.0.19045.3693, v1.2.3.4, 1.2.3.4a",
        "01.2.3.4": "01.2.3.4",
        "服务器45.231.106.116无法访问": f"服务器{IP_TOKEN}无法访问",
    }
    for text, want in cases.items():
        assert mask_ips(text)[0] == want, text


def _reference_ip_count(text: str) -> int:
    """Naive reference: whitespace tokens, trailing sentence punctuation stripped, parsed by ``ipaddress``."""
    n = 0
    for token in text.split():
        token = token.rstrip(".,;!?")
        try:
            ipaddress.IPv4Address(token)
            n += 1
        except ValueError:
            pass
    return n


def test_ip_count_matches_ipaddress_on_random_dotted_numbers():
    r = random.Random(0)
    tokens = []
    for _ in range(3000):
        n_parts = r.choice((3, 4, 4, 4, 5))
        parts = [str(r.choice((r.randint(0, 255), r.randint(0, 999), r.randint(0, 9)))) for _ in range(n_parts)]
        tokens.append(".".join(parts) + r.choice(("", "", ".", ",")))
    text = " ".join(tokens)
    assert mask_ips(text)[1] == _reference_ip_count(text) > 500


def test_already_masked_text_is_left_alone():
    text = "Mail jane@example.com, call 283-182-3829, server 10.0.0.1."
    once, counts = mask_pii(text)
    assert counts == {"email": 1, "phone": 1, "ip": 1}
    assert mask_pii(once) == (once, {"email": 0, "phone": 0, "ip": 0})
    glued = f"{EMAIL_TOKEN}{PHONE_TOKEN}{IP_TOKEN}|||EMAIL_ADDRESS|||.com"
    assert mask_pii(glued) == (glued, {"email": 0, "phone": 0, "ip": 0})


def test_digits_inside_an_email_or_ip_are_not_a_phone():
    text = "john2831823829@example.com and 203.182.38.29"
    assert mask_pii(text) == (f"{EMAIL_TOKEN} and {IP_TOKEN}", {"email": 1, "phone": 0, "ip": 1})


def test_step_masks_counts_and_never_rejects():
    docs = [{"id": "a", "url": "u", "text": "Reach me at jane@example.com or (283) 182-3829 from 10.1.2.3."},
            {"id": "b", "url": "u", "text": "Nothing to see on 2024-03-15."}, {"id": "c", "url": "u", "text": ""},
            {"id": "d", "url": "u"}]
    stats: dict[str, StepStats] = {}
    out = list(run_steps(docs, [PIIMasker()], stats))
    assert [d["id"] for d in out] == ["a", "b", "c", "d"] and stats["pii"].docs_out == 4
    assert out[0]["text"] == f"Reach me at {EMAIL_TOKEN} or {PHONE_TOKEN} from {IP_TOKEN}."
    assert out[0]["pii"] == {"email": 1, "phone": 1, "ip": 1}
    assert out[1]["text"] == "Nothing to see on 2024-03-15." and out[1]["pii"] == {"email": 0, "phone": 0, "ip": 0}
    assert "text" not in out[3]
    only_emails = {"id": "e", "url": "u", "text": "jane@example.com 283-182-3829"}
    assert PIIMasker(phones=False, ips=False).reject(only_emails) is None
    assert only_emails["text"] == f"{EMAIL_TOKEN} 283-182-3829" and only_emails["pii"]["phone"] == 0


def test_step_config_is_validated():
    with pytest.raises(ValueError, match="phones"):
        PIIMasker(phones="yes")
    assert PIIMasker.name == "pii"


def test_bad_input_never_crashes_and_stays_linear():
    r = random.Random(1)
    junk = [
        "", "   \n\t ", None, b"bytes 283-182-3829 \xff\xfe", "\ud800 lone surrogate 10.0.0.1 \udfff",
        bytes(r.getrandbits(8) for _ in range(200_000)).decode("latin-1"),
        "".join(r.choice("0123456789 .-+()@a#$/") for _ in range(300_000)),
    ]
    for text in junk:
        masked, counts = mask_pii(text)
        assert isinstance(masked, str) and set(counts) == {"email", "phone", "ip"}
    assert mask_pii(b"bytes 283-182-3829")[0] == f"bytes {PHONE_TOKEN}"
    for pathological in ("1" * 1_000_000, "1." * 500_000, "+1 " * 300_000, "a@" * 500_000, "x@" + "a." * 500_000,
                         "(0" * 500_000, "word " * 200_000):
        start = time.perf_counter()
        mask_pii(pathological)
        assert time.perf_counter() - start < 5, pathological[:10]


# -- ground truth: the generated crawl's manifest -------------------------------------------------------------
def test_planted_pii_is_masked_and_lookalikes_survive(sample_crawl):
    planted = masked_ok = lookalikes = kept = 0
    wrong_counts, start = [], time.perf_counter()
    results = [(doc, *mask_pii(doc["text"])) for doc in sample_crawl.docs]
    seconds = time.perf_counter() - start
    for doc, masked, counts in results:
        entry, text = sample_crawl.manifest[doc["id"]], doc["text"]
        want = {"email": 0, "phone": 0, "ip": 0}
        for value, kind in {p["value"]: p["type"] for p in entry["pii"]}.items():
            if value in text:  # survived extraction
                planted += 1
                masked_ok += value not in masked
                want[kind] += text.count(value)
        if counts != want:  # a missed value, or a mask where nothing was planted
            wrong_counts.append((doc["id"], want, counts))
        for value in entry["pii_lookalikes"]:
            if value in text:
                lookalikes += 1
                kept += value in masked
    print(f"pii: {len(results) / seconds:.0f} docs/s, {planted} planted values, {lookalikes} look-alikes")
    assert planted > 100 and masked_ok / planted >= 0.99
    assert len(wrong_counts) <= 0.01 * len(results), wrong_counts[:5]
    assert lookalikes > 100 and kept == lookalikes
