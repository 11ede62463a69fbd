"""The ``sleepmem`` command and its groups; commands live in the sibling modules."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import typer

from sleepmem.core.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    SleepmemError,
    TransientError,
    ValidationError,
)

if TYPE_CHECKING:
    from pydantic import ValidationError as PydanticValidationError
    from pydantic_settings import SettingsError

    from sleepmem.core.settings import Settings

# The settings (pydantic-settings) and logging (structlog) modules are imported where they
# are used: deferred, they take ~0.25 s to import and `sleepmem --help` needs neither.

app = typer.Typer(
    name="sleepmem",
    no_args_is_help=True,
    add_completion=False,
    help="Long-term memory for LLM agents that does its thinking at sleep time.",
)
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print one JSON object.")
eval_app = typer.Typer(no_args_is_help=True, help="Memory-quality evaluations.")
app.add_typer(bench_app, name="bench")
app.add_typer(eval_app, name="eval")


# The exit code of each error kind, first match wins; the CLI's mirror of the HTTP API's
# status table (sleepmem/api/app.py _STATUS). Anything else exits 1.
EXIT_CODES: tuple[tuple[type[SleepmemError], int], ...] = (
    (ValidationError, 2),  # bad input, like a usage error: fix the command and rerun
    (AuthError, 4),
    (ForbiddenError, 4),
    (NotFoundError, 3),
    (ConflictError, 5),  # a stale version: read the current one and try again
    (TransientError, 75),  # EX_TEMPFAIL: a dependency is down or busy; try again later
)


def exit_code(exc: SleepmemError) -> int:
    return next((code for kind, code in EXIT_CODES if isinstance(exc, kind)), 1)


def fail(exc: SleepmemError) -> typer.Exit:
    """Report an error raised on purpose as one line on stderr; raise the Exit returned."""
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(exit_code(exc))


def config_error_line(exc: SleepmemError | PydanticValidationError | SettingsError) -> str:
    """One line naming the variable and what is wrong with it, never a traceback."""
    from pydantic import ValidationError as PydanticValidationError
    from pydantic_settings import SettingsError

    from sleepmem.core.settings import ENV_PREFIX

    if isinstance(exc, SettingsError):
        # pydantic-settings names the field only in its message ('error parsing value for
        # field "api_keys" from source …'); the reason is the JSON error it chains.
        named = re.search(r'field "([^"]+)"', str(exc))
        name = f"{ENV_PREFIX}{named.group(1).upper()}" if named else f"a {ENV_PREFIX}* setting"
        reason = exc.__cause__ or exc
        return f"{name}: cannot be read as JSON ({reason})"
    if isinstance(exc, PydanticValidationError):
        parts = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "settings"
            message = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"{ENV_PREFIX}{field.upper()}: {message}")
        return "; ".join(parts)
    return str(exc)


def load_settings(log_level: str | None = None, *, role: str | None = None) -> Settings:
    """Settings from the environment, logging configured; bad settings exit 2 with the
    reason on one line (``error: …``). A distributed ``role`` also needs its stores."""
    # deferred: pydantic-settings and structlog take ~0.25 s to import (see the top)
    from pydantic import ValidationError as PydanticValidationError
    from pydantic_settings import SettingsError

    from sleepmem.core.logs import configure_logging
    from sleepmem.core.settings import Settings, check_environment

    try:
        check_environment()
        settings = Settings()
        if role is not None:
            settings.require_stores(role)
    except (SleepmemError, PydanticValidationError, SettingsError) as exc:
        typer.echo(f"error: {config_error_line(exc)}", err=True)
        raise typer.Exit(2) from None
    configure_logging(level=log_level or settings.log_level, json=settings.log_json)
    return settings
