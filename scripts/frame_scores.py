#!/usr/bin/env python3
"""Print the frame scores the floors of pipelines/write/extract/frames.py were chosen on.

For every user sentence of tests/generalization/ and a seeded sample of LoCoMo turns that
can hold a fact (pipelines.extract.fallback.may_hold), the nearest attribute, its prototype
similarity and its margin over the next attribute, best first. Read the table by eye: the
right frames sit high with a clear margin, the wrong ones low or close to a second frame.

    .venv/bin/python scripts/frame_scores.py [--locomo ../shared/data/locomo/locomo_dev8.json]
"""

from __future__ import annotations

import argparse
import json
import random
import tomllib
from pathlib import Path

import numpy as np

from sleepmem.adapters.embedders import UsemEmbedder
from sleepmem.pipelines.language import read
from sleepmem.pipelines.text import split_sentences
from sleepmem.pipelines.write.extract.fallback import may_hold
from sleepmem.pipelines.write.extract.frames import prototypes_for

ROOT = Path(__file__).resolve().parents[1]


def story_sentences() -> list[str]:
    out: list[str] = []
    for path in sorted((ROOT / "tests" / "generalization").glob("*.toml")):
        story = tomllib.loads(path.read_text(encoding="utf-8"))
        for step in story["step"]:
            emit = step.get("emit")
            if emit and emit.get("role") == "user":
                out += split_sentences(emit["content"])
    return out


def locomo_sentences(path: Path, n: int) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = [t["text"] for c in data for k, v in c["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v]
    sentences = [s for t in turns for s in split_sentences(t)]
    return random.Random(1).sample(sentences, min(n, len(sentences)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path,
                        default=ROOT.parent / "shared/data/locomo/locomo_dev8.json")
    parser.add_argument("--sample", type=int, default=150)
    args = parser.parse_args()
    sentences = story_sentences()
    if args.locomo.exists():
        sentences += locomo_sentences(args.locomo, args.sample)
    held = [r.text for r in read(sentences) if may_hold(r)]
    embedder = UsemEmbedder()
    protos = prototypes_for(embedder)
    sims = np.asarray(embedder.embed(held)) @ np.asarray(protos.vectors).T
    rows: list[tuple[float, float, str, str]] = []
    for text, row in zip(held, sims, strict=True):
        best: dict[str, float] = {}
        for attribute, sim in zip(protos.attributes, row, strict=True):
            best[attribute] = max(best.get(attribute, -1.0), float(sim))
        ranked = sorted(best.items(), key=lambda kv: -kv[1])
        rows.append((ranked[0][1], ranked[0][1] - ranked[1][1], ranked[0][0], text))
    for score, margin, attribute, text in sorted(rows, reverse=True):
        print(f"{score:.2f} {margin:.2f} {attribute:15} {text[:90]}")


if __name__ == "__main__":
    main()
