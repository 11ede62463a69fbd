"""National, tax and health id numbers, recognised by python-stdnum's validators.

A number is an id when a maintained validator of its country accepts it (check digits,
check letters, embedded birth dates, issuer ranges): no pattern here says what an id looks
like. How sure that makes it depends on how much the validator proves:

- a check letter, or the id written in its own national format with the separators
  (``123-45-6789``, ``131052-308T``, ``55555555-K``, ``046 454 286``), is an id on sight;
- a bare run of digits passes some validator by chance as often as one in ten (an order
  number, a phone number): it is an id only when words before it name one ("SSN",
  "passport", "tax number", "身份证"). Context decides, not the digit count.

Words that name something else (order, tracking, invoice, phone ...) keep any number.
"""

from __future__ import annotations

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
)  # fmt: skip
# Validators whose national format is too close to a phone number's (gb.nhs: 3-3-4 digits)
# to count as proof: they need words naming the id.
_NEVER_ON_SIGHT = frozenset({"gb.nhs", "in_.aadhaar", "th.pin", "za.idnr", "fr.nir"})


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
        module = importlib.import_module(f"stdnum.{name}")
        is_valid = module.is_valid
        if name == "fi.hetu":  # temporary ids (individual numbers 900-999) are ids too
            is_valid = functools.partial(module.is_valid, allow_temporary=True)
        validator = _Validator(name, kind, is_valid, getattr(module, "format", None))
        for n in lengths:
            out.setdefault(n, []).append(validator)
    return {n: tuple(vs) for n, vs in out.items()}


def _alternation(phrases: str) -> re.Pattern[str]:
    english, other = [], []
    for phrase in phrases.split(","):
        phrase = phrase.strip()
        if phrase.isascii():
            english.append(r"\s+".join(map(re.escape, phrase.split())))
        elif phrase:
            other.append(re.escape(phrase))
    return re.compile(r"(?<![a-z])(?:" + "|".join(english) + r")(?![a-z])|" + "|".join(other))


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
    "身份证, 身份证号, 护照, 税号, 纳税人识别号, 社保, 社会保障号, 驾照, 证件号"
)
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
_CANDIDATE = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]*\d[A-Za-z0-9]*(?:[ \-./][A-Za-z]*\d[A-Za-z0-9]*)*"
    r"(?:-[A-Za-z]{1,2})?(?![A-Za-z0-9])"
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
        tokens = [(m.start() + t.start(), m.start() + t.end()) for t in _TOKEN.finditer(m.group(0))]
        yield from _in_candidate(text, low, tokens, lengths)
    yield from _document_numbers(text, low)


def _document_numbers(text: str, low: str) -> Iterator[tuple[int, int, str]]:
    """The number a document noun claims: the first token of six digits or more within
    its clause ("my passport number is CD7654321", "대한민국 여권 S87654321")."""
    for noun in _DOCUMENT.finditer(low):
        if _NOT_AN_ID.search(low[max(0, noun.start() - 16) : noun.start()]):
            continue  # "order licence 123456": another thing's number
        for n, m in enumerate(_DOCUMENT_NUMBER.finditer(text, noun.end())):
            gap = text[noun.end() : m.start()]
            if n >= _DOCUMENT_REACH or any(stop in gap for stop in _CLAUSE_STOPS):
                break
            token = m.group(0)
            if sum(c.isdigit() for c in token) >= _MIN_DIGITS and not _ISO_DATE.fullmatch(token):
                yield m.start(), m.end(), "id_number"
                break


def _in_candidate(
    text: str,
    low: str,
    tokens: list[tuple[int, int]],
    lengths: dict[int, tuple[_Validator, ...]],
) -> Iterator[tuple[int, int, str]]:
    taken_until = -1
    n = len(tokens)
    for i in range(n):
        if tokens[i][0] < taken_until:
            continue
        # The longest run of tokens from i that an id validator accepts.
        for j in range(min(n, i + _MAX_TOKENS), i, -1):
            start, end = tokens[i][0], tokens[j - 1][1]
            compact = "".join(text[a:b] for a, b in tokens[i:j])
            validators = lengths.get(len(compact))
            if validators is None or sum(c.isdigit() for c in compact) < _MIN_DIGITS:
                continue
            kind = _identify(validators, text[start:end], compact, low, start)
            if kind is not None:
                yield start, end, kind
                taken_until = end
                break


def _identify(
    validators: tuple[_Validator, ...], written: str, compact: str, low: str, start: int
) -> str | None:
    before = low[max(0, start - _LOOKBACK) : start]
    named = _ID_CONTEXT.search(before) is not None
    if not named and _NOT_AN_ID.search(before):
        return None
    letters = not compact.isdigit()
    for v in validators:
        # As written first: a separator may be part of the id (the century sign of a
        # Finnish hetu); each validator strips the separators its format allows.
        if not (_valid(v, written) or (written != compact and _valid(v, compact))):
            continue
        if "." in written and not _formatted_as(v, compact, written):
            continue  # dotted numbers are addresses and versions unless the id is dotted
        if named:
            return v.kind
        if v.name in _NEVER_ON_SIGHT:
            continue
        if letters or (written != compact and _formatted_as(v, compact, written)):
            return v.kind
    return None


def _valid(v: _Validator, candidate: str) -> bool:
    try:
        return bool(v.is_valid(candidate))
    except Exception:  # a validator refusing odd input refuses the candidate
        return False


_SPACE_OR_DASH = re.compile(r"[ \-]")


def _formatted_as(v: _Validator, compact: str, written: str) -> bool:
    """Whether ``written`` groups the digits as the id's national format does (the
    dash may be a space: "130 692 544" is a SIN written as 130-692-544)."""
    if v.format is None:
        return False
    try:
        formatted = v.format(compact)
    except Exception:  # no national format for this one
        return False
    return _SPACE_OR_DASH.sub("-", formatted) == _SPACE_OR_DASH.sub("-", written)
