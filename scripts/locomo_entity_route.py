"""How much LoCoMo evidence the entity route reaches on its own, and beyond search.

For the first N conversations of a LoCoMo file: ingest as ``sleepmem eval locomo`` does,
then for each question compare the evidence turns covered by the top k of
(a) today's search, (b) the entity route alone, (c) search's top k plus whatever new
turns the entity route's top k adds. Per category, as evidence recall@k.

    PYTHONPATH=$PWD .venv/bin/python scripts/locomo_entity_route.py \
        ../shared/data/locomo/locomo_dev8.json --limit-conversations 2
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from sqlmodel import Session, col, select

from sleepmem.core.settings import Settings
from sleepmem.evals.harness import eval_instance, ingest
from sleepmem.evals.locomo import CATEGORIES, events_of, load
from sleepmem.evals.metrics import evidence_recall, mean
from sleepmem.models import Memory
from sleepmem.pipelines.read.entities import entity_route
from sleepmem.reader import Reader, build_request


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("--limit-conversations", type=int, default=2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--include-hubs", action="store_true",
                    help="follow the speakers too (entities in a fifth of the memories)")
    args = ap.parse_args()
    k = args.k
    rows: dict[str, list[tuple[float, float, float, bool]]] = defaultdict(list)
    with eval_instance(Settings(), prefix="sleepmem-locomo-entities-") as res:
        reader = Reader(res)
        for conv in load(args.data)[: args.limit_conversations]:
            ingest(res, events_of(conv))
            by_event = {conv.event_id(t.dia_id): t.dia_id for t in conv.turns}
            for q in conv.questions:
                cards = reader.search(build_request(
                    q.question, scope=conv.scope, k=k, with_provenance=True)).flat()
                searched = [by_event[e] for c in cards for e in (c.provenance or [])
                            if e in by_event]
                hits = entity_route(engine=res.engine, scope=conv.scope, query=q.question,
                                    limit=k, include_hubs=args.include_hubs)
                with Session(res.engine) as s:
                    prov = {m.id: m.provenance for m in s.exec(
                        select(Memory).where(col(Memory.id).in_([h.id for h in hits])))}
                routed = [by_event[e] for h in hits for e in prov.get(h.id, [])
                          if e in by_event]
                evidence = set(q.evidence)
                rows[CATEGORIES.get(q.category, str(q.category))].append((
                    evidence_recall(searched, evidence),
                    evidence_recall(routed, evidence),
                    evidence_recall([*searched, *routed], evidence),
                    bool(hits),
                ))
    out = {}
    for name, rs in sorted(rows.items()):
        out[name] = {
            "questions": len(rs),
            f"search_recall_at_{k}": round(mean([r[0] for r in rs]), 4),
            f"entity_route_recall_at_{k}": round(mean([r[1] for r in rs]), 4),
            f"search_plus_entity_route_recall_at_{k}": round(mean([r[2] for r in rs]), 4),
            "questions_linked": sum(r[3] for r in rs),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
