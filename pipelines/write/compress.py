"""Compression: merge fragments into profiles and session summaries (README rule 4).

Profiles join the facts known about one subject (a service, a project, a tech stack) so a
question about the whole finds them together; the fragments stay addressable. Session
summaries fold a finished session's small talk into one memory; its fragments are
archived only after the summary is indexed (the caller does that, see consolidate).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sleepmem.models import Memory, Scope
from sleepmem.pipelines.memories import memory_id
from sleepmem.pipelines.small_talk import SMALL_TALK_HEAD, SMALL_TALK_JOIN
from sleepmem.pipelines.text import norm_value
from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.resolve import Resolver
from sleepmem.pipelines.write.versions import AuditDraft

PROFILE = "profile"
SUMMARY_OF_SESSION = "session_summary"

# How a session's small talk is summarised: a head, then its turns joined.


@dataclass(frozen=True, slots=True)
class CompressPolicy:
    min_profile_fragments: int = 3
    min_session_fragments: int = 4
    small_talk_importance: float = 0.3
    max_statement_chars: int = 600


@dataclass(slots=True)
class Compression:
    archive_after_index: dict[str, list[str]] = field(default_factory=dict)


def compress(
    resolver: Resolver,
    *,
    policy: CompressPolicy,
    ended_sessions: set[str],
    event_sessions: dict[str, str],
) -> Compression:
    out = Compression()
    _profiles(resolver, policy)
    if ended_sessions:
        _session_summaries(resolver, policy, ended_sessions, event_sessions, out)
    return out


def _profiles(resolver: Resolver, policy: CompressPolicy) -> None:
    by_subject: dict[str, list[Memory]] = defaultdict(list)
    profiles: dict[str, Memory] = {}
    for mem in resolver.current():
        if mem.attribute == PROFILE:
            profiles[mem.subject] = mem
        elif (
            mem.type in ("fact", "preference")
            and mem.subject not in ("", "user")
            and not mem.session
            and not _speaker(mem)
        ):
            by_subject[mem.subject].append(mem)
    for subject, parts in sorted(by_subject.items()):
        if len(parts) < policy.min_profile_fragments:
            continue
        parts.sort(key=lambda m: (m.valid_from, m.id))
        members = sorted(m.id for m in parts)
        old = profiles.get(subject)
        if old is not None and old.details.get("members") == members:
            continue
        body = "; ".join(_clause(m.statement) for m in parts)
        statement = f"{subject[:1].upper()}{subject[1:]} (all known parts): {body}."
        cand = Candidate(
            type="summary",
            statement=statement[: policy.max_statement_chars],
            provenance=[e for m in parts for e in m.provenance],
            valid_from=max(m.valid_from for m in parts),
            scope=_scope_of(parts[0]),
            subject=subject,
            attribute=PROFILE,
            source="summary",
            trust="high" if all(m.trust == "high" for m in parts) else "low",
            confidence=min(m.confidence for m in parts),
            importance=max(m.importance for m in parts),
            details={"members": members},
        )
        resolver.apply_merge(cand, old=old, op=Op.MERGE, members=members)


def _speaker(mem: Memory) -> bool:
    """Whether a fact is a named speaker's own (persons.own_facts): in a conversation
    between people that is most of what they said, which a profile would only repeat."""
    person = str(mem.details.get("speaker") or "").strip()
    return bool(person) and mem.subject == norm_value(person)


def _session_summaries(
    resolver: Resolver,
    policy: CompressPolicy,
    ended: set[str],
    event_sessions: dict[str, str],
    out: Compression,
) -> None:
    groups: dict[str, list[Memory]] = defaultdict(list)
    for mem in resolver.current():
        if mem.type != "event" or mem.attribute or mem.importance > policy.small_talk_importance:
            continue
        sessions = {event_sessions.get(e, "") for e in mem.provenance}
        if len(sessions) == 1 and (s := next(iter(sessions))) in ended:
            groups[s].append(mem)
    for session, parts in sorted(groups.items()):
        if len(parts) < policy.min_session_fragments:
            continue
        parts.sort(key=lambda m: (m.valid_from, m.id))
        body = SMALL_TALK_JOIN.join(_clause(m.statement) for m in parts)
        cand = Candidate(
            type="summary",
            statement=f"{SMALL_TALK_HEAD} {session}: {body}"[: policy.max_statement_chars],
            provenance=[e for m in parts for e in m.provenance],
            valid_from=max(m.valid_from for m in parts),
            scope=_scope_of(parts[0]),
            subject="session:" + session,
            attribute=SUMMARY_OF_SESSION,
            source="summary",
            trust="low",
            confidence=min(m.confidence for m in parts),
            importance=max(m.importance for m in parts),
            details={"members": sorted(m.id for m in parts), "chitchat": True},
        )
        summary = resolver.apply_merge(cand, old=None, op=Op.COMPRESS, members=None)
        out.archive_after_index[summary.id] = [m.id for m in parts]


def _clause(statement: str) -> str:
    return statement.strip().rstrip(".。!！")


def _scope_of(mem: Memory) -> Scope:
    return Scope(
        tenant=mem.tenant, agent=mem.agent, user=mem.user, project=mem.project, session=""
    )


__all__ = ["AuditDraft", "CompressPolicy", "Compression", "compress", "memory_id"]
