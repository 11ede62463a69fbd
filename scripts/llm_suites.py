"""The behaviour suites with a chat model configured: pass rates and LLM calls per 100 events.

    .venv/bin/python scripts/llm_suites.py [--every N] [--url URL] [--model NAME] [--route R]

Runs every Nth story of tests/generalization, tests/paraphrases, tests/probes and
tests/heldout (all with --every 1) with SLEEPMEM_EXTRACTOR=llm against an
OpenAI-compatible endpoint (by default the local model of ../shared/tools/local-llm.sh),
and prints one JSON object per suite: stories passed, events emitted, model calls, calls
per 100 events, seconds. The local model is slow on two cores (3-10 s a call), so the
default takes a sample.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sleepmem.adapters.embedders import UsemEmbedder
from sleepmem.core.settings import Settings
from sleepmem.evals.scenarios import run_story

ROOT = Path(__file__).resolve().parent.parent
SUITES = {"generalisation": ROOT / "tests" / "generalization",
          "paraphrases": ROOT / "tests" / "paraphrases",
          "probes": ROOT / "tests" / "probes",
          "heldout": ROOT / "tests" / "heldout"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=8, help="run every Nth story (1: all)")
    ap.add_argument("--url", default="http://127.0.0.1:8091/v1")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--route", choices=("rules_first", "model_first"), default="rules_first")
    args = ap.parse_args()
    settings = Settings(_env_file=None, extractor="llm", llm_base_url=args.url,
                        llm_model=args.model, llm_route=args.route, llm_timeout_s=240.0,
                        llm_max_retries=0)
    embedder = UsemEmbedder()
    for name, folder in SUITES.items():
        stories = sorted(folder.glob("*.toml"))[:: max(1, args.every)]
        t0 = time.perf_counter()
        passed = events = calls = 0
        failures: list[str] = []
        for path in stories:
            result = run_story(path, settings=settings, embedder=embedder)
            events += result.events
            calls += result.llm_calls
            if result.passed and result.error is None:
                passed += 1
            else:
                failures.append(path.stem)
        print(json.dumps({
            "suite": name, "route": args.route, "stories": len(stories), "passed": passed,
            "rate": round(passed / max(1, len(stories)), 3), "events": events,
            "llm_calls": calls, "calls_per_100_events": round(100 * calls / max(1, events), 1),
            "seconds": round(time.perf_counter() - t0, 1), "failures": failures,
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
