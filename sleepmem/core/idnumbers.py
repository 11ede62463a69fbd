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

# (stdnum module, marker kind). Ordered most specific first: the first validator that
# accepts a candidate names it.
_VALIDATORS = (
    ("es.nif", "national_id"), ("es.nie", "national_id"), ("es.dni", "national_id"),
    ("it.codicefiscale", "national_id"), ("fi.hetu", "national_id"), ("in_.pan", "tax_id"),
    ("mx.curp", "national_id"), ("ie.pps", "national_id"), ("cn.ric", "national_id"),
    ("us.itin", "tax_id"), ("us.ssn", "national_id"), ("ca.sin", "national_id"),
    ("kr.rrn", "national_id"), ("se.personnummer", "national_id"),
    ("dk.cpr", "national_id"), ("no.fodselsnummer", "national_id"),
    ("pl.pesel", "national_id"), ("tr.tckimlik", "national_id"), ("th.pin", "national_id"),
    ("za.idnr", "national_id"), ("br.cpf", "tax_id"), ("fr.nir", "national_id"),
    ("be.nn", "national_id"), ("nl.bsn", "national_id"), ("de.idnr", "tax_id"),
    ("gb.nhs", "health_id"), ("au.tfn", "tax_id"), ("in_.aadhaar", "national_id"),
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
def _validators() -> tuple[_Validator, ...]:
    # Imported on first use: most texts never hold a candidate.
    out = []
    for name, kind in _VALIDATORS:
        module = importlib.import_module(f"stdnum.{name}")
        is_valid = module.is_valid
        if name == "fi.hetu":  # temporary ids (individual numbers 900-999) are ids too
            is_valid = functools.partial(module.is_valid, allow_temporary=True)
        out.append(_Validator(name, kind, is_valid, getattr(module, "format", None)))
    return tuple(out)


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
_LOOKBACK = 48
# Runs of letters and digits joined by one separator: the spans a candidate is cut from.
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_JOINERS = frozenset(" -./")
_MIN_DIGITS = 6
_MAX_COMPACT = 20
_MAX_TOKENS = 5


def _chains(text: str) -> Iterator[list[re.Match[str]]]:
    """Runs of tokens joined by at most one separator, each run holding a digit."""
    chain: list[re.Match[str]] = []
    for m in _TOKEN.finditer(text):
        if chain:
            gap = text[chain[-1].end() : m.start()]
            if len(gap) > 1 or (gap and gap not in _JOINERS):
                yield chain
                chain = []
        chain.append(m)
    if chain:
        yield chain


def _has_digit(token: str) -> bool:
    return any(c.isdigit() for c in token)


def find(text: str, low: str) -> Iterator[tuple[int, int, str]]:
    """Spans of id numbers in ``text`` (``low`` is its lower-case), with their kind."""
    for chain in _chains(text):
        if not any(_has_digit(m.group(0)) for m in chain):
            continue
        yield from _in_chain(text, low, chain)


def _in_chain(text: str, low: str, chain: list[re.Match[str]]) -> Iterator[tuple[int, int, str]]:
    taken_until = -1
    n = len(chain)
    for i in range(n):
        if chain[i].start() < taken_until:
            continue
        # The longest run of tokens from i that an id validator accepts.
        for j in range(min(n, i + _MAX_TOKENS), i, -1):
            start, end = chain[i].start(), chain[j - 1].end()
            written = text[start:end]
            compact = "".join(m.group(0) for m in chain[i:j])
            if not (_MIN_DIGITS <= len(compact) <= _MAX_COMPACT):
                continue
            if sum(c.isdigit() for c in compact) < _MIN_DIGITS:
                continue
            kind = _identify(written, compact, low, start)
            if kind is not None:
                yield start, end, kind
                taken_until = end
                break


def _identify(written: str, compact: str, low: str, start: int) -> str | None:
    before = low[max(0, start - _LOOKBACK) : start]
    named = _ID_CONTEXT.search(before) is not None
    if not named and _NOT_AN_ID.search(before):
        return None
    letters = not compact.isdigit()
    for v in _validators():
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
