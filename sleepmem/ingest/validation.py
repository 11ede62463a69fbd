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
    utcnow,
)
from sleepmem.models.scope import IDENT_RULE

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
    and fork) at a tenth of the cost of reading the OS random source for each one.
    """

    def __init__(self) -> None:
        self._pid = -1
        self._prefix = ""
        self._counter = itertools.count()

    def __call__(self) -> str:
        if self._pid != os.getpid():  # a forked child must not repeat its parent's ids
            self._pid = os.getpid()
            self._prefix = os.urandom(8).hex()
            self._counter = itertools.count(int.from_bytes(os.urandom(4), "big"))
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFFFFFF:016x}"


next_event_id = _EventIds()


@functools.lru_cache(maxsize=16)
def _context(limits: Limits) -> dict[str, Limits]:
    # One context dict per Limits, not one per event (it is read, never written).
    return {"limits": limits}


# Built with the module, as a model's validator is: building on first use put ~8 ms on an
# agent's first emit.
_BATCH: pydantic.TypeAdapter[list[EventFields]] = pydantic.TypeAdapter(list[EventFields])
_SINGLE: pydantic.TypeAdapter[EventFields] = pydantic.TypeAdapter(EventFields)


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
    batch: list[object] = []
    named: list[bool] = []  # whether the caller chose the event id (ours hold no secret)
    with gc_paused():
        for item in items:
            if max_events is not None and len(batch) >= max_events:
                raise EventValidationError(
                    [FieldProblem("events", f"at most {max_events} events per batch; split it")]
                )
            named.append(_names_its_id(item))
            batch.append(_normalise(item, given))
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
    own_id = not _names_its_id(item)
    data = _normalise(item, defaults or {})
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
