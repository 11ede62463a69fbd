#!/usr/bin/env python3
"""How often the configured judge model reads a labelled pair as the same thing.

Runs the pairs of tests/semantic_pairs.py (the same fact in other words, and hard
negatives: negation, another object, number or name) through pipelines.verdicts against an
OpenAI-compatible endpoint, and prints agreement as JSON.

    .venv/bin/python scripts/judge_pairs.py [--url http://127.0.0.1:8091/v1] [--model M]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import SecretStr

from sleepmem.adapters.llm import OpenAIChatModel
from sleepmem.pipelines.write.verdicts import Pair, Verdict, Verdicts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from semantic_pairs import DIFFERENT, SAME

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8091/v1")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    chat = OpenAIChatModel(base_url=args.url, model=args.model, api_key=SecretStr(""),
                           timeout_s=600.0, max_retries=0)
    labelled = [(a, b, True) for a, b in SAME] + [(a, b, False) for a, b in DIFFERENT]
    pairs = [Pair(attribute="statement", older=a, older_at=T0, older_source="user", newer=b,
                  newer_at=T0 + timedelta(days=30), newer_source="user")
             for a, b, _ in labelled]
    verdicts = Verdicts(chat)
    for pair in pairs:
        verdicts.of(pair)
    t0 = time.perf_counter()
    answered = verdicts.ask()
    seconds = time.perf_counter() - t0
    said_same = [verdicts.answers.get(p.key) is Verdict.SAME for p in pairs]
    tp = sum(s and y for s, (_a, _b, y) in zip(said_same, labelled, strict=True))
    fp = sum(s and not y for s, (_a, _b, y) in zip(said_same, labelled, strict=True))
    print(json.dumps({
        "model": args.model, "pairs": len(pairs), "answered": answered,
        "same_pairs": len(SAME), "different_pairs": len(DIFFERENT),
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / len(SAME), 3), "calls": verdicts.usage.calls,
        "tokens": verdicts.usage.tokens, "failures": verdicts.failures,
        "seconds": round(seconds, 1)}))
    chat.close()


if __name__ == "__main__":
    main()
