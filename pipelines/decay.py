"""The decay rule shared by the sweep, the refresh and explain (DESIGN rules 5 and 6).

survival = 0.5 ** ((now − last_access) / half_life(type)) × importance. Identity facts,
procedures and rules written by people are never touched by a lifecycle job; a type whose
half-life is unset never decays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from sleepmem.core.settings import Settings
from sleepmem.models import Memory

PROTECTED_TYPES: tuple[str, ...] = ("identity", "procedure")

FloatArray = npt.NDArray[np.float64]


def aware(t: datetime) -> datetime:
    """SQLite hands datetimes back naive; every stored time is UTC."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def survival(*, importance: float, age_s: float, half_life_s: float | None) -> float:
    if half_life_s is None or half_life_s <= 0:
        return importance
    return float(0.5 ** (max(0.0, age_s) / half_life_s) * importance)


def survival_array(
    importance: FloatArray, age_s: FloatArray, half_life_s: FloatArray
) -> FloatArray:
    """Vectorised survival; a half-life of +inf means 'never decays'."""
    with np.errstate(divide="ignore", invalid="ignore"):
        decay = np.power(0.5, np.maximum(age_s, 0.0) / half_life_s)
    return np.asarray(np.where(np.isfinite(half_life_s), decay, 1.0) * importance)


def half_life_array(settings: Settings, types: Sequence[str]) -> FloatArray:
    table = {t: (math.inf if s is None or s <= 0 else float(s))
             for t, s in settings.half_life_s.items()}
    return np.fromiter((table.get(t, math.inf) for t in types), dtype=np.float64,
                       count=len(types))


def falls_below_at(
    *, last_access: datetime, importance: float, half_life_s: float | None, threshold: float
) -> datetime | None:
    """When survival drops under ``threshold`` (None: never; last_access: already)."""
    if half_life_s is None or half_life_s <= 0 or threshold <= 0:
        return None
    if importance <= threshold:
        return aware(last_access)
    return aware(last_access) + timedelta(seconds=half_life_s * math.log2(importance / threshold))


# -- SQL fragments ------------------------------------------------------------------------


def epoch_sql(column: Any, dialect: str) -> ColumnElement[float]:
    """A timestamp column as epoch seconds, computed by the database (no Python parsing)."""
    if dialect == "sqlite":
        # SQLAlchemy stores UTC wall time as text; julianday parses it in C.
        return sa.cast((sa.func.julianday(column) - 2440587.5) * 86400.0, sa.Float)
    return sa.cast(sa.func.extract("epoch", column), sa.Float)


def authored_sql() -> ColumnElement[bool]:
    """True for rules written by people (``details.authored``): no worker changes them."""
    return sa.func.coalesce(col(Memory.details)["authored"].as_boolean(), sa.false())


def lifecycle_managed_sql() -> ColumnElement[bool]:
    """Rows a lifecycle job may change: not identity, not a procedure, not authored."""
    return sa.and_(col(Memory.type).not_in(PROTECTED_TYPES), sa.not_(authored_sql()))
