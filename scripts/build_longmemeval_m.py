"""Build LongMemEval_M-like haystacks (1M and 10M tokens per question) from LongMemEval_S.

Each question keeps its own haystack and gets filler sessions from the other questions'
haystacks, none of which answers any question, dated inside the question's own date range
(see sleepmem/evals/haystacks.py). The files go to a cache folder outside the repository
(benchmark data is never committed) and are read by ``sleepmem eval longmemeval``:

    .venv/bin/python scripts/build_longmemeval_m.py --tier 1m --questions 6
    .venv/bin/sleepmem eval longmemeval --data ~/.cache/sleepmem/longmemeval/m-1m-6q-s0.json.gz

``--questions N`` keeps the N non-abstention questions spread over the file that
``sleepmem eval longmemeval --questions N`` runs on the source file, so S and M figures
are for the same questions. A 10M-tier question is about 40 MB of JSON: build a handful.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from sleepmem.core.tokens import count_tokens
from sleepmem.evals.haystacks import TIERS, build

SOURCE = Path(__file__).resolve().parents[2] / "shared/data/longmemeval/longmemeval_s_dev.json.gz"


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "sleepmem" / "longmemeval"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SOURCE, help="a LongMemEval_S file")
    ap.add_argument("--tier", choices=sorted(TIERS), default="1m")
    ap.add_argument("--questions", type=int, default=None,
                    help="N non-abstention questions spread over the file (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None,
                    help="output file (default: the cache folder, named by tier and size)")
    args = ap.parse_args()
    if not args.data.exists():
        ap.error(f"no such file: {args.data}")
    if args.questions is not None and args.questions < 1:
        ap.error("--questions must be at least 1")
    size = f"{args.questions}q" if args.questions else "all"
    out = args.out or cache_dir() / f"m-{args.tier}-{size}-s{args.seed}.json.gz"
    summary = build(args.data, out, tier=args.tier, questions=args.questions, seed=args.seed,
                    count=count_tokens)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
