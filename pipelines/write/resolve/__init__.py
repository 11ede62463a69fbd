"""Dedup and resolve: every candidate ends as ADD, UPDATE, NOOP, CONFLICT, DELETE or REJECT.

Nothing is overwritten: an UPDATE closes the old version (valid_to, invalidated_at,
superseded_by) and appends a new one that ``supersedes`` it, by the one versioning rule
(:mod:`sleepmem.pipelines.write.versions`). Only memories of the same slot (subject +
attribute) can replace one another.

With a :class:`~sleepmem.pipelines.semantic.Meaning` (the embedder of the run), the
judgement also goes by meaning, the same for every extractor:

- a candidate that says what a current memory says, in any wording or language, is a
  NOOP on that memory (mention + provenance), never a second memory;
- a slotless statement that corrects a memory it is close to in meaning ("actually …",
  "not … anymore") is an UPDATE of that memory;
- a change in any wording (a correction, a time shift such as "these days" or "from now
  on", feedback) supersedes the memory of the same subject and type it is *about*: one
  whose value it names, or that is related to it in meaning, whatever slot each got;
  never one from the same message, and never on an addition ("… too");
- a trusted tool field and a user statement about the same thing that disagree form a
  conflict set; agreeing, they are one memory mentioned twice;
- a forget request erases the memories its object means, by meaning and by words.

Open slots (``rel:<relation>``, see :mod:`sleepmem.pipelines.types`) resolve like known
slots; many-valued relations ("owns", "uses") add a value instead of contradicting.

One module per decision, each over the book of the run (:mod:`.book`: rows, lookups, the
plan) and the pairs it reads (:mod:`.pairs`: a candidate's neighbours, ranked by meaning;
:mod:`.readings`: the words of each side):

- :mod:`.duplicate`: restatements, and the mention each one counts;
- :mod:`.update`: supersession, and what a change ends or reverses;
- :mod:`.feedback`: what a correction or negative feedback is about;
- :mod:`.conflict`: a tool field against the user, two trusted values of one slot;
- :mod:`.by_meaning`: the judgement by meaning those make together;
- :mod:`.slot`: what a slotted candidate does to its slot;
- :mod:`.forget`: forget requests; :mod:`.procedures`: outcome statistics;
- :mod:`.resolver`: :class:`Resolver`, which sends each candidate to its decision.
"""

from __future__ import annotations

from sleepmem.pipelines.write.resolve.book import Plan, ResolvePolicy, TtlFor
from sleepmem.pipelines.write.resolve.resolver import Resolver
from sleepmem.pipelines.write.versions import AuditDraft

__all__ = ["AuditDraft", "Plan", "ResolvePolicy", "Resolver", "TtlFor"]
