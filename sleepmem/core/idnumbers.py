"""National, tax and health id numbers, recognised by python-stdnum's validators.

A number is an id when a maintained validator of its country accepts it (check digits,
check letters, embedded birth dates, issuer ranges). Ids stdnum does not check (a UK
NINO or driving licence, a Singapore NRIC, German pension and health insurance numbers, a
US MBI ...) are checked here by the rules their issuers publish, the same way. How sure
a validator makes it depends on how much it proves:

- a check letter, or the id written in its own national format with the separators
  (``123-45-6789``, ``131052-308T``, ``55555555-K``, ``046 454 286``), is an id on sight;
- a bare run of digits passes some validator by chance as often as one in ten (an order
  number, a phone number): it is an id only when words name one, before it ("SSN",
  "passport", "tax number", "Thai ID", "身份证") or after it through a copula ("... is my
  SSN"). Context decides, not the digit count; "not a TIN" names none.

Words that name something else (order, tracking, invoice, phone ...) keep any number, and
so does a leading "+" (a phone number) or a longer dashed number the id would sit inside.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

# (stdnum module, marker kind, lengths of the id in letters and digits alone). Ordered
# most specific first: the first validator that accepts a candidate names it. The lengths
# only spare the validators that could not accept a candidate of another length.
_VALIDATORS = (
    ("es.nif", "national_id", (9,)), ("es.nie", "national_id", (9,)),
    ("es.dni", "national_id", (9,)), ("it.codicefiscale", "national_id", (16, 11)),
    ("fi.hetu", "national_id", (10, 11)), ("in_.pan", "tax_id", (10,)),
    ("mx.curp", "national_id", (18,)), ("ie.pps", "national_id", (8, 9)),
    ("cn.ric", "national_id", (18,)), ("us.itin", "tax_id", (9,)),
    ("us.ssn", "national_id", (9,)), ("ca.sin", "national_id", (9,)),
    ("kr.rrn", "national_id", (13,)), ("se.personnummer", "national_id", (10, 12)),
    ("dk.cpr", "national_id", (10,)), ("no.fodselsnummer", "national_id", (11,)),
    ("pl.pesel", "national_id", (11,)), ("tr.tckimlik", "national_id", (11,)),
    ("th.pin", "national_id", (13,)), ("za.idnr", "national_id", (13,)),
    ("br.cpf", "tax_id", (11,)), ("fr.nir", "national_id", (15,)),
    ("be.nn", "national_id", (11,)), ("nl.bsn", "national_id", (8, 9)),
    ("de.idnr", "tax_id", (11,)), ("gb.nhs", "health_id", (10,)),
    ("au.tfn", "tax_id", (8, 9)), ("in_.aadhaar", "national_id", (12,)),
    ("es.dni7", "national_id", (8,)), ("sg.nric", "national_id", (9,)),
    ("gb.nino", "national_id", (9,)), ("de.rvnr", "national_id", (12,)),
    ("gb.dvla", "id_number", (16,)), ("au.medicare", "health_id", (10,)),
    ("kr.driver", "id_number", (12,)), ("de.kvnr", "health_id", (10,)),
    ("de.idnr-check", "tax_id", (11,)), ("ph.tin", "tax_id", (9, 12)),
)  # fmt: skip
# Validators whose national format is too close to a phone number's (gb.nhs: 3-3-4 digits)
# to count as proof: they need words naming the id.
# A single check digit behind one letter (de.kvnr), or a check digit alone where the id's
# own rules also fix which digits repeat (de.idnr-check, the named fallback of de.idnr),
# prove too little on sight as well.
_NEVER_ON_SIGHT = frozenset(
    {"gb.nhs", "in_.aadhaar", "th.pin", "za.idnr", "fr.nir", "de.kvnr", "de.idnr-check", "ph.tin"}
)
# Ids whose national format another, public number shares, with its own check digit (an
# Australian TFN and a company's ACN are both written "123 456 782"): the format proves the
# id on sight only when the public number's validator rejects it.
_SHARED_FORMAT = {"au.tfn": ("au.acn",)}


class _Validator(NamedTuple):
    name: str
    kind: str
    is_valid: Callable[[str], bool]
    format: Callable[[str], str] | None


@functools.cache
def _by_length() -> dict[int, tuple[_Validator, ...]]:
    # Imported on first use: most texts never hold a candidate.
    out: dict[int, list[_Validator]] = {}
    for name, kind, lengths in _VALIDATORS:
        if name in _LOCAL:
            is_valid, format_ = _LOCAL[name]
            validator = _Validator(name, kind, is_valid, format_)
        else:
            module = importlib.import_module(f"stdnum.{name}")
            is_valid = module.is_valid
            if name == "fi.hetu":  # temporary ids (individual numbers 900-999) are ids too
                is_valid = functools.partial(module.is_valid, allow_temporary=True)
            validator = _Validator(name, kind, is_valid, getattr(module, "format", None))
        for n in lengths:
            out.setdefault(n, []).append(validator)
    return {n: tuple(vs) for n, vs in out.items()}


# -- ids python-stdnum does not check, or checks by rules their issuers have dropped -------
# Each takes the id as written (separators included) and checks what its issuer publishes:
# check digits and letters, embedded dates, the ranges a field may hold.
_SEPARATORS = re.compile(r"[\s\-./]")


def _compact(value: str) -> str:
    return _SEPARATORS.sub("", value).upper()


def _is_date(year: int, month: int, day: int) -> bool:
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True


def _digit_sum(n: int) -> int:
    return n // 10 + n % 10


def _kr_rrn(value: str) -> bool:
    """Korean resident (and, with 5-8, foreigner) registration number: YYMMDD, a digit
    for sex and century, six more. Numbers issued since October 2020 carry no check digit
    (stdnum still demands one), so the birth date and the century digit are the proof."""
    n = _compact(value)
    if len(n) != 13 or not n.isdigit() or n[6] not in "12345678":
        return False
    century = 1900 if n[6] in "1256" else 2000
    return _is_date(century + int(n[:2]), int(n[2:4]), int(n[4:6]))


# The IRS's ITIN middle groups (stdnum's list predates 50-65 and 83-88).
_ITIN_GROUPS = frozenset([*range(50, 66), *range(70, 89), 90, 91, 92, *range(94, 100)])


def _us_itin(value: str) -> bool:
    n = _compact(value)
    return len(n) == 9 and n.isdigit() and n[0] == "9" and int(n[3:5]) in _ITIN_GROUPS


def _es_nif(value: str) -> bool:
    """A Spanish NIF of a person (DNI, NIE, K/L/M): a check letter last. A company's NIF
    (the old CIF: a letter, seven digits, a check digit) is published, and shaped like the
    reference numbers of a hundred other things."""
    n = _compact(value)
    return (
        len(n) == 9
        and n[-1].isalpha()
        and (n[0].isdigit() or n[0] in "KLMXYZ")
        and _stdnum_valid("es.nif", n)
    )


def _es_dni7(value: str) -> bool:
    """A DNI written without its leading zero (1234567L for 01234567L)."""
    n = _compact(value)
    return len(n) == 8 and n[:7].isdigit() and n[7].isalpha() and _stdnum_valid("es.dni", "0" + n)


# The M series of FINs (issued since 2022) has its own offset and letters (J for M).
_NRIC_LETTERS = {"S": (0, "JZIHGFEDCBA"), "T": (4, "JZIHGFEDCBA"),
                 "F": (0, "XWUTRQPNMLK"), "G": (4, "XWUTRQPNMLK"),
                 "M": (3, "XWUTRQPNJLK")}  # fmt: skip


def _sg_nric(value: str) -> bool:
    """Singapore NRIC / FIN: a series letter, seven digits and a check letter."""
    n = _compact(value)
    if len(n) != 9 or n[0] not in _NRIC_LETTERS or not n[1:8].isdigit():
        return False
    offset, letters = _NRIC_LETTERS[n[0]]
    total = offset + sum(int(d) * w for d, w in zip(n[1:8], (2, 7, 6, 5, 4, 3, 2), strict=True))
    return n[8] == letters[total % 11]


_NINO_FIRST = frozenset("ABCEGHJKLMNOPRSTWXYZ")
_NINO_SECOND = frozenset("ABCEGHJKLMNPRSTWXYZ")
_NINO_NEVER = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})
# Two-letter words HMRC's prefix rules let through: before "12 34 56 a" in lower case they
# are prose ("on 12 34 56 a"), not a prefix.
_NINO_WORDS = frozenset(
    re.findall(
        r"\w+",
        "ah am an as at aw ax ay be by eh em en er ex ha he hm la ma me my oh "
        "ok on or ow ox pa re sh ta we ya ye",
    )
)


def _gb_nino(value: str) -> bool:
    """UK National Insurance number: two prefix letters HMRC allocates, six digits, A-D."""
    n = _compact(value)
    if value[:2] in _NINO_WORDS and value[2:3].isspace():
        return False
    return (
        len(n) == 9
        and n[0] in _NINO_FIRST
        and n[1] in _NINO_SECOND
        and n[:2] not in _NINO_NEVER
        and n[2:8].isdigit()
        and n[8] in "ABCD"
    )


def _letter_number(letter: str) -> str:
    return f"{ord(letter) - 64:02d}"


def _de_rvnr(value: str) -> bool:
    """German pension insurance number: area, birth date DDMMYY, the surname's initial, a
    serial and a check digit over all of them (the letter counted as its place, A=01)."""
    n = _compact(value)
    if len(n) != 12 or not (n[:8].isdigit() and n[8].isalpha() and n[9:].isdigit()):
        return False
    if not 1 <= int(n[4:6]) <= 12:
        return False
    digits = n[:8] + _letter_number(n[8]) + n[9:11]
    weights = (2, 1, 2, 5, 7, 1, 2, 1, 2, 1, 2, 1)
    total = sum(_digit_sum(int(d) * w) for d, w in zip(digits, weights, strict=True))
    return total % 10 == int(n[11])


def _de_kvnr(value: str) -> bool:
    """German health insurance number (eGK): a letter, eight digits and a check digit."""
    n = _compact(value)
    if len(n) != 10 or not n[0].isalpha() or not n[1:].isdigit():
        return False
    digits = _letter_number(n[0]) + n[1:9]
    total = sum(_digit_sum(int(d) * (1 + i % 2)) for i, d in enumerate(digits))
    return total % 10 == int(n[9])


def _gb_dvla(value: str) -> bool:
    """UK driving licence number: five letters of the surname (9-padded), the birth
    decade, month (+50 for women), day and year digit, two initials (9-padded), a digit
    and two check characters."""
    n = _compact(value)
    padded_letters = n[:5] + n[11:13]
    if len(n) != 16 or not n[0].isalpha() or not n[5:11].isdigit():
        return False
    if not all(c == "9" or "A" <= c <= "Z" for c in padded_letters):
        return False
    month = int(n[6:8]) % 50
    return 1 <= month <= 12 and 1 <= int(n[8:10]) <= 31 and n[13].isdigit() and n[14:].isalnum()


def _au_medicare(value: str) -> bool:
    """Australian Medicare card number: 2-6, seven digits, a check digit, an issue digit."""
    n = _compact(value)
    if len(n) != 10 or not n.isdigit() or n[0] not in "23456":
        return False
    weights = (1, 3, 7, 9, 1, 3, 7, 9)
    return sum(int(d) * w for d, w in zip(n[:8], weights, strict=True)) % 10 == int(n[8])


_KR_LICENCE_REGIONS = frozenset([*range(11, 27), 28])


def _kr_driver(value: str) -> bool:
    """Korean driver's licence: region, year, serial and check, 2-2-6-2 (no checksum that
    is published: the region code is what it proves)."""
    n = _compact(value)
    return len(n) == 12 and n.isdigit() and int(n[:2]) in _KR_LICENCE_REGIONS


def _de_idnr_check(value: str) -> bool:
    """The German tax id's check digit alone (ISO 7064 mod 11,10), for a named number."""
    n = _compact(value)
    return len(n) == 11 and n.isdigit() and n[0] != "0" and _stdnum_valid("iso7064.mod_11_10", n)


def _ph_tin(value: str) -> bool:
    """Philippine TIN: eight digits, a mod-11 check digit (weights 9..2), a branch code."""
    n = _compact(value)
    if len(n) not in (9, 12) or not n.isdigit():
        return False
    return sum(int(d) * w for d, w in zip(n, range(9, 1, -1), strict=False)) % 11 == int(n[8])


def _stdnum_valid(name: str, value: str) -> bool:
    try:
        return bool(importlib.import_module(f"stdnum.{name}").is_valid(value))
    except Exception:  # a validator refusing odd input refuses the candidate
        return False


def _grouped(*sizes: int, sep: str = "-") -> Callable[[str], str]:
    def format_(value: str) -> str:
        n, out, at = _compact(value), [], 0
        for size in sizes:
            out.append(n[at : at + size])
            at += size
        return sep.join(out)

    return format_


_LOCAL: dict[str, tuple[Callable[[str], bool], Callable[[str], str] | None]] = {
    "es.nif": (_es_nif, None),
    "kr.rrn": (_kr_rrn, _grouped(6, 7)),
    "us.itin": (_us_itin, _grouped(3, 2, 4)),
    "es.dni7": (_es_dni7, None),
    "sg.nric": (_sg_nric, None),
    "gb.nino": (_gb_nino, _grouped(2, 2, 2, 2, 1, sep=" ")),
    "de.rvnr": (_de_rvnr, None),
    "gb.dvla": (_gb_dvla, None),
    "au.medicare": (_au_medicare, _grouped(4, 5, 1, sep=" ")),
    "kr.driver": (_kr_driver, _grouped(2, 2, 6, 2)),
    "de.kvnr": (_de_kvnr, None),
    "de.idnr-check": (_de_idnr_check, None),
    "ph.tin": (_ph_tin, None),
}


def _alternation(phrases: str) -> re.Pattern[str]:
    english, other = [], []
    for phrase in phrases.split(","):
        phrase = phrase.strip()
        if phrase.isascii():
            english.append(r"\s+".join(map(re.escape, phrase.split())))
        elif phrase:
            other.append(re.escape(phrase))
    return re.compile(r"(?<![a-z])(?:" + "|".join(english) + r")(?![a-z])|" + "|".join(other))


_NATIONALITIES = (
    "american, australian, belgian, brazilian, british, canadian, chinese, danish, dutch, "
    "filipino, finnish, french, german, indian, irish, italian, korean, mexican, norwegian, "
    "philippine, polish, rsa, singapore, singaporean, south african, spanish, swedish, thai, "
    "turkish, uk, us"
)
# Words that name an id: a number after one of them is the id it names when its
# country's validator accepts it.
_ID_CONTEXT = _alternation(
    "ssn, social security, social insurance, sin, national id, national identity, "
    "national insurance, id number, id no, id card, identity card, identity number, "
    "identification number, personal number, personal id, personal identity, tax id, "
    "tax number, tax file, tin, itin, tfn, taxpayer, nhs, medicare, health insurance, "
    "passport, driver's license, drivers license, driving licence, licence number, "
    "license number, aadhaar, aadhar, pan, pesel, personnummer, dni, nif, nie, nir, bsn, "
    "cpr, cpf, curp, rrn, resident registration, registration number, codice fiscale, "
    "fiscal code, hetu, henkilötunnus, tc kimlik, kimlik, fødselsnummer, pnr, steuer-id, "
    "steuer id, steueridentifikationsnummer, steuernummer, idnr, sozialversicherungsnummer, "
    "assurance sociale, numéro de sécurité sociale, documento de identidad, "
    "frn, foreign registration, resident number, residence permit, nric, nino, egk, kvnr, "
    "krankenversicherungsnummer, "
    "versichertennummer, rentenversicherungsnummer, "
    "身份证, 身份证号, 护照, 税号, 纳税人识别号, 社保, 社会保障号, 驾照, 证件号, "
    "주민등록번호, 외국인등록번호, 운전면허, 여권번호, เลขประจำตัวประชาชน, บัตรประชาชน, "
    # "Thai ID", "Turkish ID": an id of a country whose ids are checked here.
    + ", ".join(f"{nationality} id" for nationality in _NATIONALITIES.split(", "))
)
# Naming undone: "not a TIN 123456789" says the number is not one ("invalid" or "fake"
# judge a number that may still be someone's: those go).
_NEGATED = re.compile(r"(?<![a-z])not an?\s+$")
# A name after the number counts when a copula links them ("X is my passport number",
# "X es mi número de pasaporte", "X är mitt pnr"): a few words, one clause.
_COPULA_AFTER = re.compile(
    r"\s*(?:[:=]|(?:is|was|es|är|ist|est|è|er)(?![a-z]))(?:\s+[^\s\d,.;:]+){0,4}?\s+$"
)
_LOOKAHEAD = 40
# Numbers a document noun claims after its first: "passports: X and Y".
_LIST_JOIN = re.compile(r"\s*(?:,|&|/|and|or|und|y|et|e|och|og)\s*")
# Words that name something else: a number after one of them is not an id.
_NOT_AN_ID = _alternation(
    "order, tracking, invoice, ref, reference, booking, confirmation, shipment, parcel, "
    "ticket, transaction, receipt, serial, sku, isbn, imei, phone, tel, telephone, mobile, "
    "cell, call, fax, customer, case, account, version, build, port, "
    "订单, 单号, 运单, 快递, 编号, 流水号, 电话, 手机"
)
# Nouns of identity documents: the document number after one of them goes whatever its
# check digits say, since many (passports, licences) have none a validator could check.
# Ambiguous short words of _ID_CONTEXT ("pan", "tin", "sin") are not among them.
_DOCUMENT = _alternation(
    "passport, passports, passport number, travel document, document number, id card, "
    "identity card, national id, driver's license, drivers license, driver license, "
    "driving licence, licence, license, ssn, social security, nhs number, medicare, "
    "nric, tckn, tnin, mbi, kvnr, rvnr, reisepass, pasaporte, passaporto, "
    "여권, 护照, 驾照, 身份证, 证件号"
)
# A document number: letters and digits, dash- or slash-joined, with six digits or more.
_DOCUMENT_NUMBER = re.compile(r"[A-Za-z0-9]+(?:[-/][A-Za-z0-9]+)*")
_ISO_DATE = re.compile(r"\d{4}[-/]\d{1,2}[-/]\d{1,2}|\d{1,2}[-/]\d{1,2}[-/]\d{2,4}")
_DOCUMENT_REACH = 6  # words after the noun: its own clause ("my passport number is X")
_CLAUSE_STOPS = ("\n", ". ", ", ", "; ", "，", "。", "；")
_LOOKBACK = 48
# Tokens with a digit joined by one separator, and a check letter after a dash
# ("55555555-K"): prose words between numbers end a candidate.
# Two letters before a space and one after may be the id's own (a UK NINO, "AB 12 34 56 C").
_CANDIDATE = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Za-z]{2} (?=\d))?[A-Za-z]*\d[A-Za-z0-9]*"
    r"(?:[ \-./][A-Za-z]*\d[A-Za-z0-9]*)*"
    r"(?:-[A-Za-z]{1,2}| [A-Za-z](?![A-Za-z0-9]))?(?![A-Za-z0-9])"
)
_TOKEN = re.compile(r"[A-Za-z0-9]+")
# Six digits with nothing but letters and single separators between them: what every
# candidate of six digits holds, and the cheap test of whether a text can hold an id at all.
_DENSE = re.compile(r"\d(?:[A-Za-z]*[ \-./]?[A-Za-z]*\d){5}")
_MIN_DIGITS = 6
_MAX_TOKENS = 5
# The same over ASCII bytes, letters deleted and the rest mapped to classes (digit,
# separator, other): prose shrinks to its spaces, and the search is 2x cheaper than _DENSE.
CLASSES = bytes(
    ord("d") if 0x30 <= b <= 0x39 else ord("s") if b in b" -./" else ord("x") for b in range(256)
)
LETTERS = bytes(range(0x41, 0x5B)) + bytes(range(0x61, 0x7B))
DENSE_CLASSES = re.compile(rb"d(?:s?d){5}")


# A US Medicare Beneficiary Identifier: eleven characters, each position of a fixed class
# (CMS: a digit 1-9, letters but S L O I B Z, either, a digit; a letter, either, a digit; two
# letters, two digits). No other text takes that layout; it holds as few as five digits, so
# it has its own scan, run on texts of five digits or more.
_MBI_LETTER = "AC-HJKMNP-RT-Yac-hjkmnp-rt-y"
MBI = re.compile(
    rf"(?<![A-Za-z0-9])[1-9][{_MBI_LETTER}][{_MBI_LETTER}0-9]\d(-?)[{_MBI_LETTER}]"
    rf"[{_MBI_LETTER}0-9]\d\1[{_MBI_LETTER}]{{2}}\d{{2}}(?![A-Za-z0-9])"
)
MBI_MIN_DIGITS = 5


def medicare_beneficiary_ids(text: str) -> Iterator[tuple[int, int, str]]:
    for m in MBI.finditer(text):
        yield m.start(), m.end(), "health_id"


def may_hold_one(text: str, ascii_bytes: bytes | None = None) -> bool:
    """Whether ``text`` (``ascii_bytes`` when it is ASCII and already encoded) has digits
    close enough together to be an id number."""
    if ascii_bytes is None and text.isascii():
        ascii_bytes = text.encode("ascii")
    if ascii_bytes is not None:
        return DENSE_CLASSES.search(ascii_bytes.translate(CLASSES, LETTERS)) is not None
    return _DENSE.search(text) is not None


def find(text: str, low: str) -> Iterator[tuple[int, int, str]]:
    """Spans of id numbers in ``text`` (``low`` is its lower-case), with their kind."""
    lengths = _by_length()
    for m in _CANDIDATE.finditer(text):
        if sum(c.isdigit() for c in m.group(0)) < _MIN_DIGITS:
            continue
        if m.start() > 0 and text[m.start() - 1] == "+":
            continue  # "+43 235 845 336": a phone number in international form
        tokens = [(m.start() + t.start(), m.start() + t.end()) for t in _TOKEN.finditer(m.group(0))]
        yield from _in_candidate(text, low, tokens, lengths)
    yield from _document_numbers(text, low)


def _document_numbers(text: str, low: str) -> Iterator[tuple[int, int, str]]:
    """The number a document noun claims: the first token of six digits or more within
    its clause ("my passport number is CD7654321", "대한민국 여권 S87654321"), those
    listed after it ("passports: X and Y"), or the one a copula links it to before it
    ("X is my passport number")."""
    for noun in _DOCUMENT.finditer(low):
        if _NOT_AN_ID.search(low[max(0, noun.start() - 16) : noun.start()]):
            continue  # "order licence 123456": another thing's number
        before = _linked_before(text, low, noun.start())
        if before is not None:
            yield before
        for n, m in enumerate(_DOCUMENT_NUMBER.finditer(text, noun.end())):
            gap = text[noun.end() : m.start()]
            if n >= _DOCUMENT_REACH or any(stop in gap for stop in _CLAUSE_STOPS):
                break
            if _document_number(m.group(0)):
                yield m.start(), m.end(), "id_number"
                yield from _listed_after(text, m.end())
                break


def _document_number(token: str) -> bool:
    return sum(c.isdigit() for c in token) >= _MIN_DIGITS and not _ISO_DATE.fullmatch(token)


def _listed_after(text: str, end: int) -> Iterator[tuple[int, int, str]]:
    while (join := _LIST_JOIN.match(text, end)) is not None and join.end() > end:
        m = _DOCUMENT_NUMBER.match(text, join.end())
        if m is None or not _document_number(m.group(0)):
            return
        yield m.start(), m.end(), "id_number"
        end = m.end()


def _linked_before(text: str, low: str, noun_start: int) -> tuple[int, int, str] | None:
    """The document number a copula links to a noun after it, in the same clause."""
    window_start = max(0, noun_start - _LOOKAHEAD)
    last = None
    for m in _DOCUMENT_NUMBER.finditer(text, window_start, noun_start):
        if _document_number(m.group(0)):
            last = m
    if last is None or not _COPULA_AFTER.fullmatch(low, last.end(), noun_start):
        return None
    if _NOT_AN_ID.search(low[max(0, last.start() - 16) : last.start()]):
        return None
    return last.start(), last.end(), "id_number"


def _named_after(low: str, end: int) -> bool:
    """Whether words after the number name an id, linked to it by a copula."""
    after = low[end : end + _LOOKAHEAD]
    for m in _ID_CONTEXT.finditer(after):
        return _COPULA_AFTER.fullmatch(after, 0, m.start()) is not None
    return False


def _in_candidate(
    text: str,
    low: str,
    tokens: list[tuple[int, int]],
    lengths: dict[int, tuple[_Validator, ...]],
) -> Iterator[tuple[int, int, str]]:
    taken_until = -1
    n = len(tokens)
    # Tokens joined by a dash, dot or slash are one number: an id is the whole of such a
    # group or none of it ("000-123-457-000" holds no SSN in its middle).
    joined = [text[tokens[k][1] : tokens[k + 1][0]] in _JOINERS for k in range(n - 1)]
    for i in range(n):
        if tokens[i][0] < taken_until or (i > 0 and joined[i - 1]):
            continue
        # The longest run of tokens from i that an id validator accepts.
        for j in range(min(n, i + _MAX_TOKENS), i, -1):
            if j < n and joined[j - 1] and not text[tokens[j][0] : tokens[j][1]].isalpha():
                continue  # a check letter after a dash may still be left off
            start, end = tokens[i][0], tokens[j - 1][1]
            compact = "".join(text[a:b] for a, b in tokens[i:j])
            validators = lengths.get(len(compact))
            if validators is None or sum(c.isdigit() for c in compact) < _MIN_DIGITS:
                continue
            kind = _identify(validators, text[start:end], compact, low, start, end)
            if kind is not None:
                yield start, end, kind
                taken_until = end
                break


def _identify(
    validators: tuple[_Validator, ...], written: str, compact: str, low: str, start: int, end: int
) -> str | None:
    before = low[max(0, start - _LOOKBACK) : start]
    names = list(_ID_CONTEXT.finditer(before))
    name = names[-1] if names else None
    if name is not None and _NEGATED.search(before, 0, name.start()):
        return None
    named: bool | None = name is not None
    if not named and _NOT_AN_ID.search(before):
        return None
    if not named:
        named = None  # words after the number: read once a validator accepts it
    letters = not compact.isdigit()
    for v in validators:
        # As written first: a separator may be part of the id (the century sign of a
        # Finnish hetu); each validator strips the separators its format allows (the
        # ones defined here read the written form only: it tells them what they need).
        retry = written != compact and v.name not in _LOCAL
        if not (_valid(v, written) or (retry and _valid(v, compact))):
            continue
        if "." in written and not _formatted_as(v, compact, written):
            continue  # dotted numbers are addresses and versions unless the id is dotted
        if named is None:
            named = _named_after(low, end)
        if named:
            return v.kind
        if v.name in _NEVER_ON_SIGHT:
            continue
        if letters or (
            written != compact
            and _formatted_as(v, compact, written)
            and not _public_number(v.name, compact)
        ):
            return v.kind
    return None


def _public_number(name: str, compact: str) -> bool:
    """Whether ``compact`` is also a valid public number written in the same format."""
    for other in _SHARED_FORMAT.get(name, ()):
        try:
            if importlib.import_module(f"stdnum.{other}").is_valid(compact):
                return True
        except Exception:  # a validator refusing odd input refuses the candidate
            continue
    return False


def _valid(v: _Validator, candidate: str) -> bool:
    try:
        return bool(v.is_valid(candidate))
    except Exception:  # a validator refusing odd input refuses the candidate
        return False


_SPACE_OR_DASH = re.compile(r"[ \-.]")
_JOINERS = frozenset("-./")


def _formatted_as(v: _Validator, compact: str, written: str) -> bool:
    """Whether ``written`` groups the digits as the id's national format does (the
    dash may be a space or a dot, the same one throughout: "130 692 544" is a SIN written
    as 130-692-544, "693-09.4444" is no SSN)."""
    if v.format is None:
        return False
    try:
        formatted = v.format(compact)
    except Exception:  # no national format for this one
        return False
    if formatted == written:
        return True
    return len(set(_SPACE_OR_DASH.findall(written))) == 1 and _SPACE_OR_DASH.sub(
        "-", formatted
    ) == _SPACE_OR_DASH.sub("-", written)
