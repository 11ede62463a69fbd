"""A LangGraph checkpointer whose threads are sleepmem sessions (extra ``sleepmem[langgraph]``).

``SleepmemSaver(Client(...), scope={"agent": …, "user": …})`` (a server anywhere, over
HTTP with the caller's key) or ``SleepmemSaver(resources, scope={"tenant": …, …})`` (in
the server's own process) stores each
LangGraph thread (``thread_id`` = the session) as that session's working-memory
checkpoint: every graph checkpoint is one compare-version-and-set write, so two processes
driving one thread cannot silently overwrite each other, and a process that dies
mid-graph resumes from the last super-step written. The graph's own checkpoints (the
last ``keep`` per namespace) and pending writes ride in ``state.variables["langgraph"]``,
serialised by LangGraph's serde; strings in them (message contents included) are redacted
before they are serialised, as for events. :meth:`SleepmemSaver.end_thread` ends the
session: the thread's messages go to the event log and consolidation folds them into
long-term memory.
"""

from __future__ import annotations

import base64
import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from sleepmem.client import Call, Client
from sleepmem.core.errors import ConflictError, NotFoundError
from sleepmem.core.redaction import redact_json
from sleepmem.models import Scope
from sleepmem.models.scope import IDENT
from sleepmem.models.working import Checkpoint as SessionCheckpoint
from sleepmem.models.working import CheckpointState, EventsAccepted
from sleepmem.resources import Resources
from sleepmem.working import WorkingMemory

KEY = "langgraph"
# LangGraph writes a super-step's task results from several threads at once; a saver
# serialises its own writes, and re-reads on a conflict with another process's saver.
RETRIES = 20
_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _redact(value: Any) -> Any:
    """Secrets out of a graph value: JSON-like data, and LangChain messages' text."""
    content = getattr(value, "content", None)
    if content is not None and hasattr(value, "model_copy"):
        clean = redact_json(content)
        return value if clean is content else value.model_copy(update={"content": clean})
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in redact_json(value).items()}
    if isinstance(value, list | tuple):
        items = [_redact(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return redact_json(value)


# A serialised value rides as base64 in pieces shorter than any run the server's redaction
# scans for (tokens, high-entropy strings: 16+ characters), so a server that redacts what
# it is sent (the HTTP path) stores the bytes unchanged; the values inside were redacted
# before they were serialised (_redact).
PIECE = 12


def _pack(typed: tuple[str, bytes]) -> list[Any]:
    text = base64.b64encode(typed[1]).decode()
    return [typed[0], [text[i:i + PIECE] for i in range(0, len(text), PIECE)]]


def _unpack(packed: Sequence[Any]) -> tuple[str, bytes]:
    body = packed[1]
    text = body if isinstance(body, str) else "".join(body)  # a str: written whole, before
    return str(packed[0]), base64.b64decode(text)


class _Remote:
    """The working-memory calls the saver makes, sent to a server through its client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, scope: Scope) -> SessionCheckpoint:
        return self.client.get_checkpoint(scope.model_dump())

    def put(self, scope: Scope, state: CheckpointState, *, base_version: int,
            redacted: bool) -> SessionCheckpoint:
        # The server redacts what it is sent; the saver's values already are (_redact).
        return self.client.put_checkpoint(state, base_version=base_version,
                                          scope=scope.model_dump())

    def evict(self, request: Mapping[str, Any]) -> EventsAccepted:
        scope: Scope = request["scope"]
        ids = self.client.evict(request["messages"], scope.model_dump())
        return EventsAccepted(ids=ids)

    def end_session(self, request: Mapping[str, Any]) -> EventsAccepted:
        scope: Scope = request["scope"]
        body = {"scope": scope.model_dump(), "outcome": request["outcome"]}
        # The client has no call of its own for the working-memory session end yet.
        ended: EventsAccepted = self.client._send(
            Call("POST", "/v1/sessions/end", json=body, parse=EventsAccepted))
        return ended


class SleepmemSaver(BaseCheckpointSaver[str]):
    def __init__(
        self,
        resources: Resources | Client,
        *,
        scope: Mapping[str, str],
        keep: int = 10,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.wm: WorkingMemory | _Remote
        if isinstance(resources, Client):
            self.wm = _Remote(resources)
            # The client's key names the tenant; its defaults fill the levels left out.
            defaults = {k: v for k, v in resources.target.defaults.items() if k != "session"}
            self.base = {**defaults, **{k: v for k, v in scope.items() if k != "session"}}
        else:
            self.wm = WorkingMemory(resources)
            self.base = {k: v for k, v in scope.items() if k != "session"}
        self.keep = max(1, keep)
        self._writing = threading.Lock()

    # -- where a thread lives ------------------------------------------------------------

    def _scope(self, config: RunnableConfig) -> Scope:
        thread = str(config["configurable"]["thread_id"])
        return Scope(**{**self.base, "session": thread})

    def _load(self, scope: Scope) -> tuple[int, dict[str, Any]]:
        try:
            current = self.wm.get(scope)
        except NotFoundError:
            return 0, {}
        return current.version, dict(current.state.variables.get(KEY) or {})

    def _update(self, scope: Scope, change: Any) -> None:
        """Apply ``change(graph_doc)`` and write it, re-reading on a version conflict: the
        change is keyed by checkpoint id, so re-applying it to a newer document is safe."""
        with self._writing:
            for attempt in range(RETRIES):
                version, doc = self._load(scope)
                step = change(doc)
                state = CheckpointState(current_step=step, variables={KEY: doc})
                try:
                    # Every value was redacted before serialisation (_redact).
                    self.wm.put(scope, state, base_version=version, redacted=True)
                    return
                except ConflictError:
                    if attempt == RETRIES - 1:
                        raise

    # -- BaseCheckpointSaver -------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        scope = self._scope(config)
        ns = str(config["configurable"].get("checkpoint_ns", ""))
        _version, doc = self._load(scope)
        space = doc.get(ns) or {}
        saved: list[dict[str, Any]] = space.get("checkpoints") or []
        wanted = get_checkpoint_id(config)
        entry = next((c for c in reversed(saved) if c["id"] == wanted), None) if wanted else (
            saved[-1] if saved else None)
        if entry is None:
            return None
        return self._tuple(scope, ns, entry, space)

    def _tuple(self, scope: Scope, ns: str, entry: dict[str, Any],
               space: dict[str, Any]) -> CheckpointTuple:
        thread = scope.session
        writes = sorted(space.get("writes", {}).get(entry["id"], []),
                        key=lambda w: (w[1], w[0], w[2]))
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                     "checkpoint_id": entry["id"]}},
            checkpoint=self.serde.loads_typed(_unpack(entry["checkpoint"])),
            metadata=self.serde.loads_typed(_unpack(entry["metadata"])),
            parent_config=(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                  "checkpoint_id": entry["parent"]}}
                if entry.get("parent") else None
            ),
            pending_writes=[(w[0], w[3], self.serde.loads_typed(_unpack(w[4])))
                            for w in writes],
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if config is None:
            return
        scope = self._scope(config)
        _version, doc = self._load(scope)
        wanted_ns = config["configurable"].get("checkpoint_ns")
        wanted_id = get_checkpoint_id(config)
        cutoff = get_checkpoint_id(before) if before else None
        n = 0
        for ns, space in sorted(doc.items()):
            if wanted_ns is not None and ns != wanted_ns:
                continue
            for entry in reversed(space.get("checkpoints") or []):
                if wanted_id and entry["id"] != wanted_id:
                    continue
                if cutoff and entry["id"] >= cutoff:
                    continue
                found = self._tuple(scope, ns, entry, space)
                if filter and not all(found.metadata.get(k) == v for k, v in filter.items()):
                    continue
                if limit is not None and n >= limit:
                    return
                n += 1
                yield found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        scope = self._scope(config)
        ns = str(config["configurable"].get("checkpoint_ns", ""))
        clean: Checkpoint = {**checkpoint,
                             "channel_values": _redact(checkpoint["channel_values"])}
        entry = {
            "id": checkpoint["id"],
            "parent": config["configurable"].get("checkpoint_id"),
            "checkpoint": _pack(self.serde.dumps_typed(clean)),
            "metadata": _pack(self.serde.dumps_typed(
                _redact(get_checkpoint_metadata(config, metadata)))),
        }

        def change(doc: dict[str, Any]) -> str:
            space = doc.setdefault(ns, {"checkpoints": [], "writes": {}})
            kept = [c for c in space["checkpoints"] if c["id"] != entry["id"]]
            space["checkpoints"] = [*kept, entry][-self.keep:]
            ids = {c["id"] for c in space["checkpoints"]}
            space["writes"] = {k: v for k, v in space.get("writes", {}).items() if k in ids}
            return f"{ns or 'graph'}: step {metadata.get('step', '?')}"

        self._update(scope, change)
        return {"configurable": {"thread_id": scope.session, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        scope = self._scope(config)
        ns = str(config["configurable"].get("checkpoint_ns", ""))
        checkpoint_id = str(config["configurable"]["checkpoint_id"])
        fresh: list[list[Any]] = [
            [task_id, task_path, WRITES_IDX_MAP.get(channel, idx), channel,
             _pack(self.serde.dumps_typed(_redact(value)))]
            for idx, (channel, value) in enumerate(writes)
        ]

        def change(doc: dict[str, Any]) -> str | None:
            space = doc.setdefault(ns, {"checkpoints": [], "writes": {}})
            stored: list[list[Any]] = space.setdefault("writes", {}).setdefault(
                checkpoint_id, [])
            have = {(w[0], w[2]) for w in stored}
            for w in fresh:
                # Special writes (errors, interrupts) replace; ordinary ones are kept once.
                if (w[0], w[2]) in have and w[2] >= 0:
                    continue
                stored[:] = [s for s in stored if (s[0], s[2]) != (w[0], w[2])] + [w]
            return f"{ns or 'graph'}: task {task_path or task_id}"

        self._update(scope, change)

    def delete_thread(self, thread_id: str) -> None:
        scope = Scope(**{**self.base, "session": thread_id})
        self._update(scope, lambda doc: doc.clear())

    def get_next_version(self, current: str | None, channel: None) -> str:
        # The same scheme as LangGraph's own savers: monotonic, string-comparable.
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- the end of a thread -------------------------------------------------------------

    def end_thread(self, thread_id: str, *, outcome: str = "") -> EventsAccepted:
        """End the session: the latest messages of the thread become events (so
        consolidation sees the conversation), then the checkpoint is frozen and folded."""
        scope = Scope(**{**self.base, "session": thread_id})
        found = self.get_tuple({"configurable": {"thread_id": thread_id}})
        messages = []
        if found is not None:
            for m in found.checkpoint["channel_values"].get("messages") or []:
                role = _ROLES.get(str(getattr(m, "type", "")), "")
                text = getattr(m, "content", None)
                if role and isinstance(text, str) and text.strip():
                    messages.append({"role": role, "content": text,
                                     **({"event_id": m.id} if _ident(getattr(m, "id", None))
                                        else {})})
        if messages:
            self.wm.evict({"scope": scope, "messages": messages})
        return self.wm.end_session({"scope": scope, "outcome": outcome})


def _ident(value: object) -> bool:
    return isinstance(value, str) and IDENT.match(value) is not None
