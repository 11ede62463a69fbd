"""structlog set-up: JSON lines, one rich line per unit of work, context bound by callers.

Every line of the process goes through one handler on the stdlib root logger whose
formatter is structlog's ``ProcessorFormatter``: sleepmem's own lines (structlog) and the
libraries' (Celery, APScheduler, uvicorn, SQLAlchemy: stdlib ``logging``) come out in the
same shape, with the same bound context (task id, tenant, scope digest), as one JSON object
per line when ``json`` is on.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

# Libraries that write a line per routine run (every scheduler tick, every task received
# and succeeded). sleepmem writes its own line per unit of work with the counts that
# matter, so at INFO these would only be noise: an idle service should be quiet.
_ROUTINE_LOGGERS = (
    "apscheduler.executors.default",
    "apscheduler.scheduler",
    "celery.worker.strategy",
    "celery.app.trace",
    "celery.worker.consumer.connection",
    "celery.worker.consumer.mingle",
    "alembic.runtime.migration",  # sleepmem.migrate logs the upgrade it ran, in one line
    # Client libraries log every request at INFO (httpx) or DEBUG: a line per search in
    # the host application's log. Shown with SLEEPMEM_LOG_LEVEL=debug only.
    "httpx",
    "httpcore",
    "urllib3",
    "openai",
    "qdrant_client",
    "asyncio",
    "multipart",
    "filelock",
    "huggingface_hub",
    "jieba",
)
_HANDLER_MARK = "_sleepmem_handler"


def configure_logging(*, level: str = "INFO", json: bool = True, stream: Any = None) -> None:
    """Configure structlog and the stdlib root logger (idempotent: a second call replaces
    the handler the first one installed, e.g. to capture into another stream)."""
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer(serializer=_dumps)
        if json
        else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _drop_color_message,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(formatter)
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        # Ours from an earlier call, and the plain-text one basicConfig adds (a test
        # runner's capture handlers, subclasses, stay).
        if getattr(old, _HANDLER_MARK, False) or type(old) is logging.StreamHandler:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    logging.captureWarnings(True)  # library warnings become log lines, not raw stderr
    for name in _ROUTINE_LOGGERS:
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        # Their own handlers would print the same record a second time, in plain text.
        lib = logging.getLogger(name)
        lib.handlers.clear()
        lib.propagate = True


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the line, not at set-up: a
    test runner or daemon that swaps stderr (and closes the old one) loses no line."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _drop_color_message(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # uvicorn adds an ANSI-coloured copy of its message as an extra.
    event.pop("color_message", None)
    return event


def _dumps(obj: Any, **kw: Any) -> str:
    # orjson: a third of the stdlib's cost, on a line the API writes for every request.
    return orjson.dumps(
        obj, default=kw.get("default") or str, option=orjson.OPT_NON_STR_KEYS
    ).decode()


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
