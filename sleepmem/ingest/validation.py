"""Event validation at the edges (SDK, HTTP, CLI): pydantic errors become field + rule.

Every edge refuses bad input the same way: a :class:`sleepmem.core.errors.ValidationError`
naming the field (``events[3].tenant`` in a batch) and the rule it broke, raised before
anything is written.
"""

from __future__ import annotations

import functools
import gc
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pydantic

from sleepmem.core.errors import ValidationError
from sleepmem.core.redaction import contains_secret, secret_in_ids
from sleepmem.core.settings import Settings
from sleepmem.models.events import (
    DEFAULT_LIMITS,
    Event,
    EventFields,
    EventKind,
    Limits,
    Role,
    check_content,
    check_meta,
    utcnow,
)
from sleepmem.models.scope import IDENT_PATTERN, IDENT_RULE

EVENT_FIELDS: tuple[str, ...] = tuple(Event.model_fields)
DEFAULT_FIELDS = ("tenant", "agent", "user", "project", "session")
NAME_FIELDS = frozenset({"event_id", *DEFAULT_FIELDS})


@dataclass(frozen=True, slots=True)
class FieldProblem:
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class EventValidationError(ValidationError):
    """One or more events refused; ``problems`` lists every bad field, the first one leads."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__(problems[0].field, problems[0].message)
        self.problems = problems


def limits_for(settings: Settings) -> Limits:
    return Limits(
        content_max_bytes=settings.content_max_bytes, meta_max_bytes=settings.meta_max_bytes
    )


def _message(err: Any) -> str:
    kind = err["type"]
    field = str(err["loc"][-1]) if err["loc"] else ""
    if field in NAME_FIELDS and kind in ("string_pattern_mismatch", "string_type"):
        if err.get("input") == "" and field in ("tenant", "agent"):
            return f"{field} is required ({IDENT_RULE})"
        return f"{field} must be {IDENT_RULE}"
    if kind == "missing":
        return "this field is required"
    if kind == "extra_forbidden":
        return "is not an event field; allowed fields are " + ", ".join(EVENT_FIELDS)
    if kind == "enum":
        field = err["loc"][-1] if err["loc"] else ""
        allowed = EventKind if field == "kind" else Role
        return "must be one of " + ", ".join(m.value for m in allowed)
    if kind == "string_type":
        return "must be a string"
    if kind.startswith("datetime"):
        return "must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z"
    if kind == "dict_type":
        return "must be a JSON object"
    if kind == "model_type":
        return "must be a JSON object with the event fields"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def field_problems(
    exc: pydantic.ValidationError, *, prefix: str = "", indexed: bool = False
) -> list[FieldProblem]:
    """One problem per bad field, named ``<prefix>.<field>``; input values never echoed.

    ``indexed``: the error came from a batch, so each location starts with the event's
    index and names read ``events[3].tenant``.
    """
    out: list[FieldProblem] = []
    # Inputs are read to word the message, never echoed back (they may hold secrets).
    for err in exc.errors(include_url=False):
        path = [str(p) for p in err["loc"]]
        head = prefix
        if indexed and path:
            head = f"events[{path.pop(0)}]"
        if not path and err["type"] in ("dict_type", "model_type"):
            out.append(FieldProblem(head or "event", "must be a JSON object with the event fields"))
            continue
        loc = ".".join(path)
        name = f"{head}.{loc}" if head and loc else (head or loc or "event")
        out.append(FieldProblem(name, _message(err)))
    return out


class _EventIds:
    """Event ids for a process: 16 random hex digits, then a 16-digit counter.

    As unique as a fresh random id per event (the random prefix is new for every process
    and fork) at a tenth of the cost of reading the OS random source for each one. A forked
    child draws a new prefix at the fork (``os.register_at_fork``) rather than comparing
    process ids at every call: a system call per id was a sixth of what validating an
    event costs.
    """

    def __init__(self) -> None:
        self._prefix = ""
        self._counter = itertools.count()
        self.reset()

    def reset(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._counter = itertools.count(int.from_bytes(os.urandom(4), "big"))

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFFFFFF:016x}"


next_event_id = _EventIds()
# A forked child must not repeat its parent's ids.
os.register_at_fork(after_in_child=next_event_id.reset)


@functools.lru_cache(maxsize=16)
def _context(limits: Limits) -> dict[str, Limits]:
    # One context dict per Limits, not one per event (it is read, never written).
    return {"limits": limits}


# Built with the module, as a model's validator is: building on first use put ~8 ms on an
# agent's first emit.
_BATCH: pydantic.TypeAdapter[list[EventFields]] = pydantic.TypeAdapter(list[EventFields])
_SINGLE: pydantic.TypeAdapter[EventFields] = pydantic.TypeAdapter(EventFields)


# -- the common case, checked without the core validator -----------------------------------
# Most events are a plain dict of plain strings: names seen before, no time, a small content
# and meta. For those, _plain_event returns exactly what the general path returns (the same
# values in a new dict, in the same order, enum members for kind and role, a time added
# last), in one pass over the event and without the core validator: together they were
# half of what an emit costs. Anything else, valid or not, takes the general path, which
# alone decides what is refused and words why: the plain path only ever accepts, and only
# what the general path accepts (tests/ingest/test_event_schema.py holds the two to the same
# answers).
_FIELD_SET = frozenset(EventFields.__annotations__)
_DEFAULT_SET = frozenset(DEFAULT_FIELDS)
# The core matches the anchored pattern against the whole string; fullmatch of its body is
# the same language (a Python "$" would also let a final newline through, fullmatch not).
_NAME_BODY = re.compile(IDENT_PATTERN.removeprefix("^").removesuffix("$"))
# Names that are valid and hold no secret, by value: an agent's events repeat the same
# tenant, agent, user and session, so each distinct name is checked once. Bounded.
_NAMES: dict[str, None] = {}
_NAMES_MAX = 8192
_KINDS: dict[str, EventKind] = {m.value: m for m in EventKind}
_ROLES: dict[str, Role] = {m.value: m for m in Role}
_STR = frozenset({str})
_ABSENT: Any = object()


def _new_name(value: str) -> bool:
    """Whether ``value`` is a name the general path accepts (then remembered)."""
    if _NAME_BODY.fullmatch(value) is None or contains_secret(value) is not None:
        return False
    if len(_NAMES) >= _NAMES_MAX:
        _NAMES.clear()
    _NAMES[value] = None
    return True


def _plain_event(
    item: dict[str, Any], defaults: Mapping[str, str], limits: Limits
) -> EventFields | None:
    """``item`` as the general path returns it, or None to let the general path decide.

    ``defaults`` holds scope fields only (checked by the callers).
    """
    if not item.keys() <= _FIELD_SET or "at" in item:
        return None
    get = item.get
    default = defaults.get
    event_id = get("event_id", _ABSENT)  # absent: one is drawn last, for an event accepted
    if event_id is not _ABSENT and (
        type(event_id) is not str
        or _NAME_BODY.fullmatch(event_id) is None
        or contains_secret(event_id) is not None
    ):
        return None
    tenant = get("tenant", default("tenant", _ABSENT))
    if not (type(tenant) is str and (tenant in _NAMES or _new_name(tenant))):
        return None
    agent = get("agent", default("agent", _ABSENT))
    if not (type(agent) is str and (agent in _NAMES or _new_name(agent))):
        return None
    out: EventFields = {"event_id": event_id, "tenant": tenant, "agent": agent}
    if (user := get("user", default("user", _ABSENT))) is not _ABSENT:
        if not (type(user) is str and (user in _NAMES or user == "" or _new_name(user))):
            return None
        out["user"] = user
    if (project := get("project", default("project", _ABSENT))) is not _ABSENT:
        if not (
            type(project) is str and (project in _NAMES or project == "" or _new_name(project))
        ):
            return None
        out["project"] = project
    if (session := get("session", default("session", _ABSENT))) is not _ABSENT:
        if not (
            type(session) is str and (session in _NAMES or session == "" or _new_name(session))
        ):
            return None
        out["session"] = session
    if (kind := get("kind", _ABSENT)) is not _ABSENT:
        if type(kind) is str:
            kind = _KINDS.get(kind)
        if type(kind) is not EventKind:
            return None
        out["kind"] = kind
    if (role := get("role", _ABSENT)) is not _ABSENT:
        if type(role) is str:
            role = _ROLES.get(role)
        if type(role) is not Role:
            return None
        out["role"] = role
    if (content := get("content", _ABSENT)) is not _ABSENT:
        if type(content) is not str:
            return None
        try:
            check_content(content, limits)
        except ValueError:
            return None
        out["content"] = content
    if (meta := get("meta", _ABSENT)) is not _ABSENT:
        if type(meta) is not dict or not _STR.issuperset(map(type, meta)):
            return None
        meta = dict(meta)  # the core's copy: a caller changing its dict later changes nothing
        try:
            check_meta(meta, limits)
        except ValueError:
            return None
        out["meta"] = meta
    if event_id is _ABSENT:
        out["event_id"] = next_event_id()  # valid by construction, and no secret
    out["at"] = utcnow()
    return out


def _plain_events(
    items: list[object], defaults: Mapping[str, str], limits: Limits
) -> list[EventFields] | None:
    if not defaults.keys() <= _DEFAULT_SET:
        return None
    out: list[EventFields] = []
    for item in items:
        if type(item) is not dict:
            return None
        event = _plain_event(item, defaults, limits)
        if event is None:
            return None
        out.append(event)
    return out


def _normalise(item: object, defaults: Mapping[str, str]) -> object:
    """A dict with an event id and the client's scope defaults filled in.

    Anything that is not a mapping is passed through for the validator to refuse by name.
    """
    if type(item) is dict:  # the common case first: isinstance on an ABC costs ~0.5 µs
        if "event_id" not in item:
            # Filled here rather than by a uuid4 default: 0.4 µs instead of 1.8, which
            # matters at 50k events/s. Same shape as uuid4().hex: 32 hex digits.
            return {"event_id": next_event_id(), **defaults, **item}
        return {**defaults, **item} if defaults else item
    if isinstance(item, Event):
        return item.model_dump()  # checked again: it may have been built under other limits
    if isinstance(item, Mapping):
        return _normalise(dict(item), defaults)
    return item


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while a batch is parsed.

    Thousands of fresh objects trigger full collections that walk the whole heap: measured,
    they double the cost of validating a batch. Events hold no cycles, so nothing is lost by
    collecting after the batch instead of during it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def validate_events(
    items: Iterable[Event | Mapping[str, Any]],
    *,
    limits: Limits = DEFAULT_LIMITS,
    defaults: Mapping[str, str] | None = None,
    max_events: int | None = None,
) -> list[EventFields]:
    """Validate a batch as a whole: every problem of every event, or all the events.

    Missing scope fields are taken from ``defaults``; each event gets an ``event_id`` and
    an ``at`` if it has none.
    """
    given = defaults or {}
    received: list[object] = []
    with gc_paused():
        for item in items:
            if max_events is not None and len(received) >= max_events:
                raise EventValidationError(
                    [FieldProblem("events", f"at most {max_events} events per batch; split it")]
                )
            received.append(item)
        plain = _plain_events(received, given, limits)
        if plain is not None:
            return plain
        # whether the caller chose the event id (ours hold no secret)
        named = [_names_its_id(item) for item in received]
        batch = [_normalise(item, given) for item in received]
        try:
            events = _BATCH.validate_python(batch, context=_context(limits))
        except pydantic.ValidationError as exc:
            raise EventValidationError(field_problems(exc, indexed=True)) from None
        return _ids_checked(events, named, batch=True)


def validate_event(
    item: Event | Mapping[str, Any],
    *,
    limits: Limits = DEFAULT_LIMITS,
    defaults: Mapping[str, str] | None = None,
) -> EventFields:
    """Validate one event, as :func:`validate_events` does; problems name bare fields."""
    given = defaults or {}
    if type(item) is dict and given.keys() <= _DEFAULT_SET:
        plain = _plain_event(item, given, limits)
        if plain is not None:
            return plain
    own_id = not _names_its_id(item)
    data = _normalise(item, given)
    try:
        event = _SINGLE.validate_python(data, context=_context(limits))
    except pydantic.ValidationError as exc:
        raise EventValidationError(field_problems(exc)) from None
    return _ids_checked([event], [not own_id], batch=False)[0]


def _names_its_id(item: object) -> bool:
    if type(item) is dict:
        return "event_id" in item
    return isinstance(item, Event | Mapping)


_ID_FIELDS = ("tenant", "agent", "user", "project", "session")


def _ids_checked(
    events: list[EventFields], named: list[bool], *, batch: bool
) -> list[EventFields]:
    """The events timed and their ids checked: a secret in an id is refused, not rewritten.

    Ids are stored and logged as they are. The size of the redacted content and meta was
    checked by the field rules (sleepmem.models.events), before any of a batch is written.
    """
    problems: list[FieldProblem] = []
    for i, event in enumerate(events):
        # After validation, not as a default: a time made here is already valid.
        if "at" not in event:
            event["at"] = utcnow()
        found = secret_in_ids(
            (
                event["tenant"],
                event["agent"],
                event.get("user", ""),
                event.get("project", ""),
                event.get("session", ""),
            )
        )
        if found is None and named[i] and (kind := contains_secret(event["event_id"])):
            found = (-1, kind)
        if found is not None:
            index, kind = found
            name = _ID_FIELDS[index] if index >= 0 else "event_id"
            problems.append(
                FieldProblem(
                    f"events[{i}].{name}" if batch else name,
                    f"looks like a secret ({kind}); ids are stored and logged as they are, "
                    "so use an opaque name and put nothing secret in it",
                )
            )
    if problems:
        raise EventValidationError(problems)
    return events


def scope_defaults(**levels: str | None) -> dict[str, str]:
    """The scope levels a client fills into events that leave them out."""
    return {k: v for k, v in levels.items() if k in DEFAULT_FIELDS and v}
