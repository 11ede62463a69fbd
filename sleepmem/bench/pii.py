"""Redaction scored on Presidio's recognizer test cases (text this project did not write).

``scripts/pii_corpus.py`` extracts them into JSON lines outside git; this module only reads
them. A secret is missed when any of its spans is still in the redacted text; a benign
string (a look-alike, or a kind a memory may keep) counts when redaction changed it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleepmem.bench.secrets import leaked
from sleepmem.core.redaction import redact


@dataclass(frozen=True, slots=True)
class Case:
    kind: str
    label: str  # "secret" or "benign"
    text: str
    spans: tuple[tuple[int, int], ...]


def load(path: Path) -> list[Case]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line)
    return [
        Case(r["kind"], r["label"], r["text"], tuple((int(s), int(e)) for s, e in r["spans"]))
        for r in rows
    ]


def missed(case: Case) -> bool:
    out = redact(case.text).text.encode()
    return any(leaked(case.text[s:e], out) for s, e in case.spans)


def score(cases: Iterable[Case]) -> dict[str, Any]:
    """Secrets missed and benign strings changed, overall and per kind."""
    per_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    examples: dict[str, list[str]] = {"missed": [], "changed": []}
    for c in cases:
        k = per_kind[c.kind]
        if c.label == "secret":
            k["secrets"] += 1
            if missed(c):
                k["missed"] += 1
                if len(examples["missed"]) < 15:
                    examples["missed"].append(f"{c.kind}: {c.text[:100]}")
        else:
            k["benign"] += 1
            result = redact(c.text)
            if result.kinds:
                k["changed"] += 1
                if len(examples["changed"]) < 15:
                    examples["changed"].append(f"{c.kind}: {result.text[:100]}")
    totals = {
        key: sum(k[key] for k in per_kind.values())
        for key in ("secrets", "missed", "benign", "changed")
    }
    return {
        **totals,
        "missed_rate": round(totals["missed"] / max(1, totals["secrets"]), 4),
        "changed_rate": round(totals["changed"] / max(1, totals["benign"]), 4),
        "per_kind": {
            kind: {key: k[key] for key in ("secrets", "missed", "benign", "changed") if k[key]}
            for kind, k in sorted(per_kind.items())
            if k["missed"] or k["changed"]
        },
        "missed_examples": examples["missed"],
        "changed_examples": examples["changed"],
    }
