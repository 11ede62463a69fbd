"""Stream positions: where an appended event sits in the event log, and how fresh a read is.

A position is the Redis stream id of an append (``"<ms>-<seq>"``): ids only grow, so "every
event up to P" is well defined across every client and API process. ``emit`` answers the
position of what it appended; ``flush`` and ``min_position`` wait until every event of a
scope up to a position is consolidated and indexed.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

# The largest sequence number Redis gives within one millisecond (an unsigned 64-bit).
_MAX_SEQ = 2**64 - 1
ORIGIN = "0-0"


def position_key(position: str) -> tuple[int, int]:
    """A position as a sortable pair; ``ValueError`` when it is not ``<ms>-<seq>``."""
    ms, sep, seq = position.partition("-")
    # ASCII digits only (str.isdigit takes other scripts' digits, which Redis refuses), and
    # each part an unsigned 64-bit, as Redis holds it: a larger one reached Redis as a 500.
    if not _digits(ms) or (sep and not _digits(seq)):
        raise ValueError(f"not a stream position: {position!r} (expected '<ms>-<seq>')")
    key = int(ms), int(seq or 0)
    if max(key) > _MAX_SEQ:
        raise ValueError(f"not a stream position: each part is at most {_MAX_SEQ}")
    return key


def _digits(part: str) -> bool:
    return part.isascii() and part.isdigit()


def latest(*positions: str) -> str:
    """The latest of the positions given (ORIGIN when none is)."""
    present = [p for p in positions if p]
    return max(present, key=position_key) if present else ORIGIN


def just_before(position: str) -> str:
    """The greatest position below ``position``: what a read has reached when the event at
    ``position`` is the first one still missing."""
    ms, seq = position_key(position)
    if seq:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{_MAX_SEQ}" if ms else ORIGIN


class EventId(str):
    """An event id that also carries the stream ``position`` of its append: a plain ``str``
    everywhere else, so code that stores or compares event ids is unchanged."""

    position: str

    def __new__(cls, event_id: str, position: str) -> EventId:
        made = super().__new__(cls, event_id)
        made.position = position
        return made


class EventIds(list[str]):
    """The ids of a batch, in order, and the stream ``position`` of its last append."""

    def __init__(self, ids: list[str], position: str) -> None:
        super().__init__(ids)
        self.position = position


class Freshness(BaseModel):
    """How far a scope's memory has caught up with the event log."""

    done: bool = Field(description="every event of the scope up to position is consolidated "
                                   "and indexed")
    position: str = Field(description="the position waited for")
    reached: str = Field(description="every event of the scope up to here is consolidated "
                                     "and indexed (equal to position when done)")
    drained: bool = Field(default=True, description="every event up to position has left "
                                                    "the stream for the SQL log")
    pending: int = Field(default=0, description="events of the scope up to position in the "
                                                "SQL log still to consolidate or index")
    waited_s: float = Field(default=0.0, description="seconds spent waiting")
