"""What the batched lifecycle passes (the forgetting sweep, the importance refresh) share:
the run they thread through their batches, and reports that count."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from sleepmem.core.settings import Settings
from sleepmem.pipelines.ports import VectorIndex


@dataclass(slots=True)
class Counts:
    """A pass's report: every int field is a count worth logging."""

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if isinstance(v, int)}


@dataclass(slots=True)
class BatchRun:
    """One pass: its connection (one short transaction per batch), index, clock and who."""

    conn: Connection
    index: VectorIndex
    settings: Settings
    now: datetime
    batch: int
    task_id: str
    worker: str

    @property
    def dialect(self) -> str:
        return self.conn.dialect.name
