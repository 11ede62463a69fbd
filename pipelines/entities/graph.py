"""The entity stage: memory versions in, entity and relation rows out (plain data).

Runs after resolve on what the batch wrote, whichever extractor wrote it, so the graph
always describes stored memory versions: a relation is the memory that states it, with
its validity, and is retired with it. Names merge into one entity per scope when they are
the same name up to case and possessive, when one is a first name (or its prefix, "Mel")
of exactly one known full name, or when an appositive role says who someone is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sleepmem.models import CURRENT_STATUSES, Entity, EntityKind, Memory
from sleepmem.pipelines.entities.spot import alias_key, read
from sleepmem.pipelines.language import has_cjk, is_han
from sleepmem.pipelines.memories import memory_id, own_words
from sleepmem.pipelines.speakers import speaker_of
from sleepmem.pipelines.types import OPEN_SLOT_PREFIX, TOOL_PREFIX

USER = "user"
# Slot values longer than this are descriptions, not names.
_MAX_VALUE_WORDS = 4
_SLOT_KINDS = {
    "residence": EntityKind.place.value,
    "employer": EntityKind.organisation.value,
    "family": EntityKind.person.value,
    "pet": EntityKind.pet.value,
}
_SLOT_RELATIONS = {"residence": "lives_in", "employer": "works_at", "occupation": "works_as"}
_SKIP_TYPES = frozenset({"procedure"})
_PEOPLE = frozenset({EntityKind.person.value, EntityKind.pet.value})


@dataclass(slots=True)
class Known:
    """A scope's entities and aliases as the stage sees (and extends) them."""

    scope_key: str
    entities: dict[str, Entity] = field(default_factory=dict)
    aliases: dict[str, set[str]] = field(default_factory=dict)
    # Aliases written in Chinese: looked for inside statements (no capitals to spot them).
    cjk: set[str] = field(default_factory=set)
    # People and pets by the first three letters of their first name: id -> (key, head).
    # Kept up to date entity by entity (see :meth:`changed`), so a batch that adds names
    # costs the same whatever the number of names the scope knows.
    _people: dict[str, dict[str, tuple[str, str]]] | None = None
    _bucket: dict[str, str] = field(default_factory=dict)

    def near(self, prefix: str) -> list[tuple[str, str, str]]:
        """People and pets whose first name opens with ``prefix`` (three letters)."""
        self._index()
        assert self._people is not None
        return [(eid, key, head) for eid, (key, head) in self._people.get(prefix, {}).items()]

    def _index(self) -> None:
        if self._people is None:
            self._people, self._bucket = {}, {}
            for eid in self.entities:
                self._place(eid)

    def _place(self, eid: str) -> None:
        assert self._people is not None
        old = self._bucket.pop(eid, None)
        if old is not None:
            self._people[old].pop(eid, None)
        e = self.entities.get(eid)
        if e is not None and e.kind in _PEOPLE:
            head = e.key.split()[0] if e.key else ""
            self._people.setdefault(head[:3], {})[eid] = (e.key, head)
            self._bucket[eid] = head[:3]

    def changed(self, eid: str | None = None) -> None:
        """An entity was added or renamed, or changed kind: its place in the index of
        people follows (all of them are placed again on demand when ``eid`` is None)."""
        if eid is None or self._people is None:
            self._people = None
        else:
            self._place(eid)


@dataclass(slots=True)
class GraphDelta:
    """Rows one batch adds or changes; written in the batch's transaction."""

    scope_key: str
    entities: dict[str, Entity] = field(default_factory=dict)  # new or changed
    aliases: set[tuple[str, str]] = field(default_factory=set)  # (entity id, alias)
    mentions: dict[tuple[str, str], str] = field(default_factory=dict)  # (entity, memory)->role
    relations: dict[str, dict[str, object]] = field(default_factory=dict)
    retired: list[Memory] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.entities or self.mentions or self.relations or self.retired
                    or self.deleted)


def build(
    *,
    known: Known,
    new: Iterable[Memory],
    retired: Iterable[Memory] = (),
    deleted: Iterable[str] = (),
    now: datetime,
) -> GraphDelta:
    """The graph rows for a batch: entities, aliases and mentions of every new version,
    relations of each, and the retired and deleted versions whose rows follow them."""
    delta = GraphDelta(scope_key=known.scope_key,
                       retired=[m for m in retired if m.status not in CURRENT_STATUSES],
                       deleted=list(deleted))
    for mem in sorted(new, key=lambda m: (m.valid_from, m.id)):
        if mem.type in _SKIP_TYPES or mem.details.get("hidden"):
            continue
        _one(known, delta, mem, now)
    return delta


def is_cjk(text: str) -> bool:
    """Whether a name opens with a Chinese character."""
    return is_han(text)


def subject_of(mem: Memory) -> str:
    """Who a memory is about: a named subject, the speaker its reply is prefixed with, or
    the scope's user."""
    if mem.subject and mem.subject != USER and not mem.attribute.startswith(TOOL_PREFIX):
        return mem.subject
    return speaker_of(own_words(mem).lstrip()) or USER


def slot_link(mem: Memory) -> tuple[str, str, str] | None:
    """(relation, object, kind) of the slot a memory fills, when its value is a name."""
    attr, value = mem.attribute, str(mem.details.get("value") or "").strip()
    if not attr or not value or attr.startswith(TOOL_PREFIX) or attr == "name":
        return None
    parts = attr.split(":")
    if attr.startswith(OPEN_SLOT_PREFIX):
        relation = attr.removeprefix(OPEN_SLOT_PREFIX)
    elif parts[0] in ("family", "pet"):
        if parts[-1] == "count":
            return None
        relation = parts[1] if parts[0] == "family" and len(parts) > 1 else parts[0]
    else:
        relation = _SLOT_RELATIONS.get(parts[0], parts[0])
    if len(value.split()) > _MAX_VALUE_WORDS:
        return None
    return relation, value, _SLOT_KINDS.get(parts[0], EntityKind.thing.value)


def _one(known: Known, delta: GraphDelta, mem: Memory, now: datetime) -> None:
    subject = subject_of(mem)
    link = slot_link(mem)
    reading = read(mem.statement, subject=subject,
                   slot=(link[0], _display(mem.statement, link[1])) if link else None,
                   known=lambda key: _resolve(known, key, EntityKind.person.value) is not None)
    kinds = {alias_key(s.name): s.kind for s in reading.names}
    roles = {alias_key(s.name): s.role for s in reading.names if s.role}
    if link is not None:
        kinds.setdefault(alias_key(link[1]), link[2])
    ids: dict[str, str] = {}

    def entity(name: str, *, role: str = "") -> str:
        key = alias_key(name)
        if key not in ids:
            kind = EntityKind.person.value if name == subject else kinds.get(key, "thing")
            ids[key] = _entity(known, delta, mem, name, kind, now)
        if role:
            _alias(known, delta, ids[key], alias_key(role))
        return ids[key]

    subject_id = entity(subject)
    _mention(delta, subject_id, mem.id, "subject")
    if mem.attribute == "name" and mem.details.get("value"):
        # The user's own name is an alias of the user: a query naming them means them.
        _alias(known, delta, subject_id, alias_key(str(mem.details["value"])))
    for s in reading.names:
        _mention(delta, entity(s.name, role=roles.get(alias_key(s.name), "")), mem.id,
                 "mention")
    if has_cjk(mem.statement):
        # No capitals in Chinese: a name the scope already knows is a name wherever it is.
        for alias in sorted(known.cjk):
            if alias in mem.statement:
                for eid in sorted(known.aliases[alias]):
                    delta.entities[eid] = known.entities[eid]
                    _mention(delta, eid, mem.id, "mention")
    for ln in reading.links:
        sid, oid = entity(ln.subject), entity(ln.object)
        if sid == oid:
            continue
        _mention(delta, oid, mem.id, "object")
        rid = memory_id("relation", mem.id, sid, ln.relation, oid)
        delta.relations[rid] = {
            "id": rid, "tenant": mem.tenant, "agent": mem.agent, "user": mem.user,
            "project": mem.project, "session": mem.session, "scope_key": mem.scope_key,
            "subject_id": sid, "relation": ln.relation[:200], "object_id": oid,
            "memory_id": mem.id, "lineage": mem.lineage, "valid_from": mem.valid_from,
            "valid_to": mem.valid_to, "recorded_at": now, "invalidated_at": mem.invalidated_at,
            "status": mem.status, "provenance": list(mem.provenance),
        }


def _display(statement: str, value: str) -> str:
    """The slot value as the statement writes it (its case), else as normalised."""
    at = statement.casefold().find(value.casefold())
    return statement[at:at + len(value)] if at >= 0 else value


def _entity(known: Known, delta: GraphDelta, mem: Memory, name: str, kind: str,
            now: datetime) -> str:
    key = alias_key(name)
    eid = _resolve(known, key, kind)
    if eid is None:
        eid = memory_id("entity", known.scope_key, key)
        row = Entity(id=eid, tenant=mem.tenant, agent=mem.agent, user=mem.user,
                     project=mem.project, session="", scope_key=known.scope_key, key=key,
                     name=name, kind=kind, mention_count=0, first_seen=now, last_seen=now)
        known.entities[eid] = row
        known.changed(eid)
    row = known.entities[eid]
    delta.entities[eid] = row
    row.last_seen = now
    # A later, more telling reading of the kind wins over the default ones.
    if kind != EntityKind.thing.value and row.kind != kind and (
            row.kind == EntityKind.thing.value or kind == EntityKind.pet.value):
        row.kind = kind
        known.changed(eid)
    if row.key != USER and (
        (len(key.split()) > len(row.key.split())
         and _same_first(key.split()[0], row.key.split()[0]))
        or (len(key.split()) == len(row.key.split()) == 1 and _nickname(row.key, key))
    ):
        # A full name seen after the first name or a short form: it becomes canonical.
        row.key, row.name = key, name
        known.changed(eid)
    _alias(known, delta, eid, key)
    return eid


def _resolve(known: Known, key: str, kind: str) -> str | None:
    """The known entity a name means, if exactly one: same name, a first name (or its
    prefix) of one full name, or the first name of a full name seen before alone."""
    exact = known.aliases.get(key)
    if exact and len(exact) == 1:
        return next(iter(exact))
    if exact:
        return sorted(exact)[0]
    # Places and organisations merge only by their exact names ("Paris" is not "Paris Hilton").
    if kind in (EntityKind.place.value, EntityKind.organisation.value):
        return None
    first = key.split()[0]
    # Only names sharing the first three letters can be the same first name.
    near = known.near(first[:3])
    if " " in key:
        # A full name: the one entity known by its first name (or a short form) alone.
        hits = [eid for eid, ekey, _head in near if " " not in ekey and _same_first(first, ekey)]
    else:
        hits = [eid for eid, ekey, head in near if ekey != USER and _same_first(key, head)]
    return hits[0] if len(hits) == 1 else None


def _same_first(a: str, b: str) -> bool:
    return a == b or _nickname(a, b) or _nickname(b, a)


def _nickname(short: str, full: str) -> bool:
    """"mel" of "melanie": a short form that opens exactly one longer first name."""
    head = full.split()[0]
    return 3 <= len(short) < len(head) <= len(short) + 5 and head.startswith(short)


def _alias(known: Known, delta: GraphDelta, eid: str, alias: str) -> None:
    if not alias or len(alias) > 200:
        return
    ids = known.aliases.setdefault(alias, set())
    if len(alias) >= 2 and is_cjk(alias):
        known.cjk.add(alias)
    if eid not in ids:
        ids.add(eid)
        delta.aliases.add((eid, alias))


def _mention(delta: GraphDelta, eid: str, mid: str, role: str) -> None:
    if (eid, mid) not in delta.mentions:
        delta.mentions[(eid, mid)] = role
        delta.entities[eid].mention_count += 1
