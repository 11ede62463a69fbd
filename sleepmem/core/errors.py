"""One error hierarchy for the whole service.

Every error a caller can see derives from :class:`SleepmemError`; the HTTP layer maps the
families below to status codes, the CLI prints their message, and tasks decide retries on
:class:`TransientError` alone.
"""

from __future__ import annotations


class SleepmemError(Exception):
    """Base of every error raised on purpose by sleepmem."""


class ValidationError(SleepmemError):
    """Input refused at an edge; ``field`` names what is wrong and the message how to fix it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class AuthError(SleepmemError):
    """No valid credentials were presented (HTTP 401)."""


class ForbiddenError(SleepmemError):
    """Valid credentials, but not for this tenant (HTTP 403)."""


class NotFoundError(SleepmemError):
    """The named memory, job or scope does not exist (HTTP 404).

    Its message never repeats the id that was asked for: a 404 answers whoever sent the id,
    and an id may carry what its writer put in it.
    """


NO_MEMORY = "no such memory (memory ids are per tenant; check the id)"
NO_JOB = "no such job (job ids are per tenant; check the id)"


class ConflictError(SleepmemError):
    """A write named a version that is no longer current (HTTP 409); nothing was written.

    ``current_version`` is what the writer must read (and merge with) before it retries.
    """

    def __init__(self, message: str, *, current_version: int) -> None:
        super().__init__(message)
        self.current_version = current_version


class ConfigurationError(SleepmemError):
    """Settings that cannot work together; raised at start-up, never mid-request."""


class TransientError(SleepmemError):
    """A dependency failed in a way that a retry may fix (timeouts, connection loss)."""


class LeaseHeldError(TransientError):
    """Another worker holds the lease for this scope; the task is retried later."""


class LeaseLostError(TransientError):
    """The lease ran out (or changed hands) before the commit: the run rolled back, and the
    lease's next holder redoes the batch."""


class ExtractionError(SleepmemError):
    """An extractor produced output that cannot be applied; the batch stays pending."""
