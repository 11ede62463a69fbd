"""Scopes: who a memory belongs to, nested tenant ⊃ agent ⊃ user ⊃ project ⊃ session."""

from __future__ import annotations

import re
from typing import Protocol, Self

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from sleepmem.core.errors import ValidationError
from sleepmem.core.redaction import secret_in_ids

IDENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
IDENT = re.compile(IDENT_PATTERN)
LEVELS: tuple[str, ...] = ("tenant", "agent", "user", "project", "session")
IDENT_RULE = "1-128 characters of letters, digits and _ . : @ -, starting with a letter or digit"


def check_ident(field: str, value: str | None, *, required: bool) -> str:
    """Normalise one scope level; '' means 'not set'. Raises ValueError naming the rule."""
    if value is None or value == "":
        if required:
            raise ValueError(f"{field} is required ({IDENT_RULE})")
        return ""
    if not isinstance(value, str) or not IDENT.fullmatch(value):
        raise ValueError(f"{field} must be {IDENT_RULE}")
    return value


class Placed(Protocol):
    """Anything stored at a scope position: a Scope, a memory row."""

    @property
    def tenant(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def project(self) -> str: ...
    @property
    def session(self) -> str: ...


class Scope(BaseModel):
    """A position in the scope tree. Unset levels are ''."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent: str = ""
    user: str = ""
    project: str = ""
    session: str = ""

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant(cls, v: str | None) -> str:
        return check_ident("tenant", v, required=True)

    @field_validator("agent", "user", "project", "session", mode="before")
    @classmethod
    def _level(cls, v: str | None, info: object) -> str:
        name = getattr(info, "field_name", "scope")
        return check_ident(name, v, required=False)

    @model_validator(mode="after")
    def _no_secret(self) -> Self:
        # Ids are stored and logged as they are (checkpoint rows, job rows, keys): one that
        # holds a secret is refused, as an event's ids are, rather than redacted into another.
        found = secret_in_ids((self.tenant, self.agent, self.user, self.project, self.session))
        if found is not None:
            level, kind = found
            raise ValueError(
                f"{LEVELS[level]} holds what looks like a secret ({kind}); ids are stored as "
                "they are, so choose an id that is not a credential"
            )
        return self

    @property
    def key(self) -> str:
        """Canonical string of every level; the unit of consolidation drops the session."""
        return "/".join(f"{lvl[0]}={getattr(self, lvl)}" for lvl in LEVELS)

    @property
    def owner(self) -> Self:
        """The consolidation scope: this scope without its session."""
        return self.model_copy(update={"session": ""})

    @classmethod
    def from_key(cls, key: str) -> Scope:
        pairs = [p.split("=", 1) for p in key.split("/")]
        parts = dict(pairs)
        if len(parts) != len(pairs):
            # 't=acme/t=globex' would otherwise mean globex (the last level wins): a key
            # that names a level twice is ambiguous, and erasure must never guess.
            raise ValueError("a level is named more than once")
        return cls(**{lvl: parts.get(lvl[0], "") for lvl in LEVELS})

    @classmethod
    def parse_key(
        cls, key: object, *, field: str = "scope", canonical: bool = True, owner: bool = False
    ) -> Scope:
        """The scope a key names, or a ValidationError that says what a key looks like.

        The one parser every edge uses (HTTP, CLI, task arguments, pipelines). ``canonical``
        refuses keys that only parse after normalising (an operator who typed a level out of
        order gets told the canonical form); ``owner`` refuses keys with a session, for the
        consolidation unit.
        """
        rule = "a scope key like 't=acme/a=bot/u=ann/p=/s='"
        if not isinstance(key, str) or not key:
            raise ValidationError(field, f"must be {rule}")
        try:
            scope = cls.from_key(key)
        except (ValueError, TypeError, PydanticValidationError) as exc:
            reason = exc.errors()[0]["msg"] if isinstance(exc, PydanticValidationError) else exc
            raise ValidationError(field, f"must be {rule} ({reason})") from None
        if owner and scope.session:
            raise ValidationError(
                field, "must name a consolidation scope: leave the session level empty (s=)"
            )
        if canonical and scope.key != key:
            raise ValidationError(
                field, f"must be {rule}, in canonical form: every level once, in that order"
            )
        return scope

    @classmethod
    def parse_levels(cls, *, field: str = "scope", **levels: str) -> Scope:
        """The scope of these levels (query parameters, form fields), or a ValidationError
        naming the level that is wrong; the keyword twin of :meth:`parse_key`."""
        try:
            return cls(**levels)
        except PydanticValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or field
            message = str(err["msg"]).removeprefix("Value error, ")
            raise ValidationError(f"{field}.{where}", message) from None

    def levels(self) -> dict[str, str]:
        return {lvl: getattr(self, lvl) for lvl in LEVELS}

    def sees(self, other: Placed) -> bool:
        """True when a search in ``self`` may return a memory stored at ``other`` (a scope,
        or a row with the same level columns: validating a Scope per row made the
        search's re-check of its candidates more than twice as slow).

        Each level of the memory must be unset or equal to the searcher's: broader scopes
        are visible, siblings and narrower scopes are not.
        """
        return other.tenant == self.tenant and all(
            getattr(other, lvl) in ("", getattr(self, lvl)) for lvl in LEVELS[1:]
        )
