"""Redaction scored on a secrets corpus this project did not write (gitleaks' rule samples).

``scripts/gitleaks_corpus.py`` extracts the samples into JSON lines outside git; this module
only reads them. A true positive is missed when its generated secret is still in the
redacted text, or, for a literal sample (whose secret span is not marked), when redaction
left the text unchanged. A false-positive sample counts when redaction changed it.
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
class Sample:
    rule: str
    family: str
    split: str  # "seen" or "heldout": a third of the providers, by a hash of their name
    label: str  # "tp" or "fp"
    text: str
    secret: str | None


def load(path: Path) -> list[Sample]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line)
    return [
        Sample(r["rule"], r["family"], r["split"], r["label"], r["text"], r.get("secret"))
        for r in rows
    ]


def missed(sample: Sample) -> bool:
    out = redact(sample.text).text
    if sample.secret is not None:
        return leaked(sample.secret, out.encode())
    return out == sample.text


def score(samples: Iterable[Sample]) -> dict[str, Any]:
    """Misses and false positives per split, and the families that have any."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_family: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    examples: list[str] = []
    for s in samples:
        c = counts[s.split]
        if s.label == "tp":
            c["secrets"] += 1
            if missed(s):
                c["missed"] += 1
                by_family[s.family]["missed"] += 1
                if len(examples) < 15:
                    examples.append(f"{s.rule}: {s.text[:120]}")
        else:
            c["fp_samples"] += 1
            if redact(s.text).kinds:
                c["fp_changed"] += 1
                by_family[s.family]["fp_changed"] += 1
    # The whole corpus first: secrets missed, and gitleaks' false-positive samples (strings
    # its rules must not flag: placeholders, references, look-alikes) that redaction changed.
    out: dict[str, Any] = {
        key: sum(c[key] for c in counts.values())
        for key in ("secrets", "missed", "fp_samples", "fp_changed")
    }
    for split, c in sorted(counts.items()):
        out[split] = {
            **{key: c[key] for key in ("secrets", "missed", "fp_samples", "fp_changed")},
            "missed_rate": round(c["missed"] / max(1, c["secrets"]), 4),
            "fp_rate": round(c["fp_changed"] / max(1, c["fp_samples"]), 4),
        }
    out["families_with_misses"] = {
        f: v["missed"] for f, v in sorted(by_family.items()) if v["missed"]
    }
    out["families_with_fp"] = {
        f: v["fp_changed"] for f, v in sorted(by_family.items()) if v["fp_changed"]
    }
    out["missed_examples"] = examples
    return out
