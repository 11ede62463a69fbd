"""The entity tables in SQL: load a scope's entities, write a batch's graph rows, and let
memory deletions and status changes reach them. Keyword-only functions over a Session or
Connection, like :mod:`sleepmem.pipelines.store`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlmodel import Session, col, select

from sleepmem.models import Entity, EntityAlias, EntityMention, Memory, Relation
from sleepmem.pipelines.entities.graph import GraphDelta, Known, build, is_cjk

Executor = Session | Connection


def load_known(session: Session, *, scope_key: str) -> Known:
    known = Known(scope_key=scope_key)
    for row in session.exec(select(Entity).where(col(Entity.scope_key) == scope_key)):
        known.entities[row.id] = row
    aliases = session.exec(
        select(EntityAlias.alias, EntityAlias.entity_id)
        .where(col(EntityAlias.scope_key) == scope_key)
    )
    for alias, eid in aliases:
        known.aliases.setdefault(alias, set()).add(eid)
        if len(alias) >= 2 and is_cjk(alias):
            known.cjk.add(alias)
    return known


def write(session: Session, *, delta: GraphDelta, now: datetime) -> None:
    """The batch's graph rows, inside the caller's transaction."""
    if delta.empty:
        return
    forget_memories(session, ids=delta.deleted)
    # Rows a memory id already has are replaced: a replay writes the same deterministic
    # ids, and rows a bypassing writer left behind must not block it.
    forget_memories(session, ids={mid for _eid, mid in delta.mentions})
    existing = set(session.exec(
        select(Entity.id).where(col(Entity.id).in_(list(delta.entities)))
    )) if delta.entities else set()
    # Bulk statements, not one ORM merge (a SELECT each) per entity.
    fresh = [e.model_dump() for eid, e in delta.entities.items() if eid not in existing]
    if fresh:
        session.execute(sa.insert(Entity), fresh)
    changed = [
        {"eid": e.id, "key": e.key, "name": e.name, "kind": e.kind,
         "mention_count": e.mention_count, "last_seen": e.last_seen}
        for eid, e in delta.entities.items() if eid in existing
    ]
    if changed:
        # On the connection: an executemany UPDATE, no ORM synchronisation to do.
        session.connection().execute(
            sa.update(Entity).where(col(Entity.id) == sa.bindparam("eid"))
            .values(key=sa.bindparam("key"), name=sa.bindparam("name"),
                    kind=sa.bindparam("kind"), mention_count=sa.bindparam("mention_count"),
                    last_seen=sa.bindparam("last_seen")),
            changed,
        )
    tenant_of = {eid: e.tenant for eid, e in delta.entities.items()}
    if delta.aliases:
        session.execute(sa.insert(EntityAlias), [
            {"entity_id": eid, "alias": alias, "tenant": tenant_of.get(eid, ""),
             "scope_key": delta.scope_key}
            for eid, alias in sorted(delta.aliases)
        ])
    if delta.mentions:
        session.execute(sa.insert(EntityMention), [
            {"entity_id": eid, "memory_id": mid, "tenant": tenant_of.get(eid, ""),
             "scope_key": delta.scope_key, "role": role}
            for (eid, mid), role in sorted(delta.mentions.items())
        ])
    if delta.relations:
        session.execute(sa.insert(Relation), list(delta.relations.values()))
    follow_memories(session, memories=delta.retired, now=now)
    if delta.deleted:
        prune(session, scope_keys=[delta.scope_key])


def record_versions(
    session: Session, *, scope_key: str, new: Sequence[Memory], retired: Sequence[Memory],
    now: datetime,
) -> None:
    """The entity stage for writers outside consolidation (re-consolidation's swap, a
    person's edit or verdict): names and relations of ``new``, ``retired`` followed."""
    session.flush()
    delta = build(known=load_known(session, scope_key=scope_key), new=new, retired=retired,
                  now=now)
    write(session, delta=delta, now=now)


def follow_memories(session: Executor, *, memories: Sequence[Memory], now: datetime) -> None:
    """Relations take the status and end of validity of the memory versions stating them."""
    for mem in memories:
        session.execute(
            sa.update(Relation).where(col(Relation.memory_id) == mem.id)
            .values(status=mem.status, valid_to=mem.valid_to or now,
                    invalidated_at=mem.invalidated_at or now)
        )


def follow_status(conn: Executor, *, ids: Sequence[str], status: str, now: datetime) -> None:
    """Bulk form for the lifecycle passes: these memories left the current set at ``now``."""
    if ids:
        conn.execute(
            sa.update(Relation)
            .where(col(Relation.memory_id).in_(list(ids)), col(Relation.valid_to).is_(None))
            .values(status=status, valid_to=now, invalidated_at=now)
        )
        conn.execute(
            sa.update(Relation).where(col(Relation.memory_id).in_(list(ids)))
            .values(status=status)
        )


def forget_memories(conn: Executor, *, ids: Iterable[str]) -> list[str]:
    """Delete the mentions and relations of deleted memories; the scopes they were in."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return []
    scopes = set(conn.execute(
        sa.select(col(EntityMention.scope_key)).where(col(EntityMention.memory_id).in_(wanted))
        .distinct()
    ).scalars())
    conn.execute(sa.delete(Relation).where(col(Relation.memory_id).in_(wanted)))
    conn.execute(sa.delete(EntityMention).where(col(EntityMention.memory_id).in_(wanted)))
    return sorted(scopes)


def prune(conn: Executor, *, scope_keys: Sequence[str]) -> int:
    """Entities of these scopes that no memory mentions any more go, aliases and all (a
    name is content); the rest get their mention counts recounted."""
    if not scope_keys:
        return 0
    mentioned = sa.select(col(EntityMention.entity_id)).where(
        col(EntityMention.entity_id) == col(Entity.id))
    orphans = list(conn.execute(
        sa.select(col(Entity.id)).where(col(Entity.scope_key).in_(list(scope_keys)),
                                        ~sa.exists(mentioned))
    ).scalars())
    if orphans:
        conn.execute(sa.delete(EntityAlias).where(col(EntityAlias.entity_id).in_(orphans)))
        conn.execute(sa.delete(Entity).where(col(Entity.id).in_(orphans)))
    counted = (sa.select(sa.func.count()).select_from(EntityMention)
               .where(col(EntityMention.entity_id) == col(Entity.id)).scalar_subquery())
    conn.execute(sa.update(Entity).where(col(Entity.scope_key).in_(list(scope_keys)))
                 .values(mention_count=counted))
    return len(orphans)


def count_within(conn: Executor, *, where: sa.ColumnElement[bool]) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(Entity).where(where))
               .scalar_one())


def erase_within(conn: Executor, *, where: sa.ColumnElement[bool]) -> int:
    """Every entity row of the scopes ``where`` selects (on :class:`Entity`); the count of
    entities. Relations and mentions go with their memories, and here too."""
    ids = list(conn.execute(sa.select(col(Entity.id)).where(where)).scalars())
    if ids:
        conn.execute(sa.delete(EntityMention).where(col(EntityMention.entity_id).in_(ids)))
        conn.execute(sa.delete(Relation).where(
            sa.or_(col(Relation.subject_id).in_(ids), col(Relation.object_id).in_(ids))))
        conn.execute(sa.delete(EntityAlias).where(col(EntityAlias.entity_id).in_(ids)))
        conn.execute(sa.delete(Entity).where(col(Entity.id).in_(ids)))
    return len(ids)
