#!/usr/bin/env python3
"""Extract Microsoft Presidio's recognizer test cases into a PII corpus (kept outside git).

Presidio's analyzer tests (presidio-analyzer/tests/test_*_recognizer.py) hold, for each of
its recognizers, the strings it must find and the look-alikes it must not, with the spans
it finds. This project did not write them, so they measure the id-number detectors on text
they were never tuned on. The script reads a checkout, or a bare git directory (the search
tool's mirror), and writes JSON lines; nothing of theirs is committed here.

    .venv/bin/python scripts/pii_corpus.py PRESIDIO [--out ~/.cache/sleepmem/pii.jsonl]

Each line: {"source", "kind", "label", "text", "spans"}.

- ``kind`` is Presidio's entity name (``US_SSN``, ``IBAN_CODE``, ``IT_FISCAL_CODE`` ...).
- ``label`` is "secret" for a found span of a kind that must never be stored (national and
  tax ids, card, bank and passport numbers, below), and "benign" for a look-alike the
  recognizer must not find, and for found spans of kinds a memory may keep (e-mail
  addresses, phone numbers, dates, URLs, places, licence plates).
- ``spans`` are the [start, end) character spans of the secret in ``text``.

Cases whose values are computed in the test (not literals) are skipped: only what the
test file states is taken.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TESTS = "presidio-analyzer/tests"
DEFAULT_OUT = Path.home() / ".cache" / "sleepmem" / "pii.jsonl"

# Kinds a memory store must not keep: they identify a person to a state, a bank or a
# payment network, and are used to authenticate or to defraud.
_SECRET_KIND_NAMES = """
    CREDIT_CARD IBAN_CODE US_SSN US_ITIN US_BANK_NUMBER US_PASSPORT US_DRIVER_LICENSE US_MBI
    UK_NHS UK_NINO UK_PASSPORT UK_DRIVING_LICENCE ES_NIF ES_NIE ES_PASSPORT IT_FISCAL_CODE
    IT_DRIVER_LICENSE IT_IDENTITY_CARD IT_PASSPORT AU_TFN AU_MEDICARE IN_AADHAAR IN_PAN
    IN_PASSPORT IN_VOTER SG_NRIC_FIN PL_PESEL FI_PERSONAL_IDENTITY_CODE KR_RRN KR_FRN
    KR_PASSPORT KR_DRIVER_LICENSE SE_PERSONNUMMER CA_SIN TR_NATIONAL_ID TH_TNIN NG_NIN
    PH_TIN DE_TAX_ID DE_SOCIAL_SECURITY DE_ID_CARD DE_PASSPORT DE_HEALTH_INSURANCE
    DE_FUEHRERSCHEIN ZA_ID_NUMBER
"""
SECRET_KINDS = frozenset(_SECRET_KIND_NAMES.split())
# Kinds that share one number layout and are told apart by a field of it: Korea's resident
# and foreigner registration numbers (YYMMDD, then a digit 1-4 for a citizen, 5-8 for a
# foreigner, six more). One recognizer's test rejects a number only because that digit
# names the other kind ("760413-1212134" is no FRN); the number is the other kind's, in
# the layout that kind's own tests accept without a check digit. It is a secret of that
# kind, not a benign look-alike.
_KR_REGISTRATION = re.compile(r"\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])-?([1-8])\d{6}")


def sibling(kind: str, text: str) -> str | None:
    """The kind ``text`` is a number of, when a test of ``kind`` rejects it for that."""
    if kind not in ("KR_RRN", "KR_FRN"):
        return None
    m = _KR_REGISTRATION.fullmatch(text)
    if m is None:
        return None
    other = "KR_RRN" if m.group(1) in "1234" else "KR_FRN"
    return other if other != kind else None


_TEXT_ARGS = ("text", "iban")
_POSITION_ARGS = ("expected_positions", "expected_res", "expected_results", "expected_spans")


def _files(root: Path) -> Iterator[tuple[str, str]]:
    """(name, source) of every recognizer test file, from a checkout or a git directory."""
    if (root / TESTS).is_dir():
        for path in sorted((root / TESTS).glob("test_*_recognizer.py")):
            yield path.name, path.read_text(encoding="utf-8")
        return
    names = subprocess.run(
        ["git", "--git-dir", str(root), "ls-tree", "--name-only", f"HEAD:{TESTS}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in sorted(names):
        if name.startswith("test_") and name.endswith("_recognizer.py"):
            source = subprocess.run(
                ["git", "--git-dir", str(root), "show", f"HEAD:{TESTS}/{name}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            yield name, source


def _fixture_entities(tree: ast.Module) -> list[str]:
    """The list the ``entities`` fixture returns, when it is a literal."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "entities":
            for stmt in node.body:
                if isinstance(stmt, ast.Return) and stmt.value is not None:
                    try:
                        value = ast.literal_eval(stmt.value)
                    except ValueError:
                        return []
                    return [str(v) for v in value] if isinstance(value, list) else []
    return []


def _parametrized(tree: ast.Module) -> Iterator[tuple[list[str], ast.expr]]:
    """(argument names, each case's expression) of every ``pytest.mark.parametrize``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("parametrize")):
                continue
            if len(dec.args) < 2 or not isinstance(dec.args[1], ast.List | ast.Tuple):
                continue
            try:
                names = ast.literal_eval(dec.args[0])
            except ValueError:
                continue
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",")]
            for case in dec.args[1].elts:
                yield list(names), case


def _spans(value: Any) -> list[list[int]]:
    """Presidio writes a span as (start, end) or (start, end, score ...)."""
    out: list[list[int]] = []
    for item in value or ():
        if (
            isinstance(item, tuple | list)
            and len(item) >= 2
            and all(isinstance(x, int) for x in item[:2])
        ):
            out.append([int(item[0]), int(item[1])])
    return out


def cases(name: str, source: str) -> Iterator[dict[str, Any]]:
    tree = ast.parse(source)
    fixture = _fixture_entities(tree)
    for names, expr in _parametrized(tree):
        text_arg = next((n for n in names if n in _TEXT_ARGS), None)
        if text_arg is None or "expected_len" not in names:
            continue
        try:
            values = ast.literal_eval(expr)
        except (ValueError, TypeError, SyntaxError):
            continue  # computed in the test: not a string the file states
        if not isinstance(values, tuple) or len(values) != len(names):
            continue
        row = dict(zip(names, values, strict=True))
        text, expected = row[text_arg], row["expected_len"]
        if not isinstance(text, str) or not isinstance(expected, int) or not text.strip():
            continue
        entities = row.get("entities") or fixture
        if isinstance(entities, str):
            entities = [entities]
        if len(entities) != 1:
            continue  # several kinds at once: the spans would not say which is which
        kind = str(entities[0])
        position_arg = next((n for n in names if n in _POSITION_ARGS), None)
        spans = _spans(row.get(position_arg)) if position_arg else []
        if expected > 0 and len(spans) != expected:
            continue  # spans not stated: nothing to check the redaction against
        spans = [s for s in spans if 0 <= s[0] < s[1] <= len(text)]
        other = sibling(kind, text) if expected == 0 else None
        if other is not None:
            kind, expected, spans = other, 1, [[0, len(text)]]
        secret = expected > 0 and kind in SECRET_KINDS
        yield {
            "source": name,
            "kind": kind,
            "label": "secret" if secret else "benign",
            "text": text,
            "spans": spans if secret else [],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("presidio", type=Path, help="a presidio checkout or git directory")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for name, source in _files(args.presidio):
        for row in cases(name, source):
            key = (row["kind"], row["text"])
            if key not in seen:  # the same string tested twice counts once
                seen.add(key)
                rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    labels = Counter(r["label"] for r in rows)
    print(
        f"{len(rows)} samples ({labels['secret']} secrets, {labels['benign']} benign) "
        f"of {len({r['kind'] for r in rows})} kinds -> {args.out}"
    )


if __name__ == "__main__":
    main()
