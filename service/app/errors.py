"""The errors a client can cause, one class per kind, each with its HTTP status.

The API maps each to an ``application/problem+json`` response (RFC 9457) whose ``type`` is
``https://frontier.dev/problems/<slug>``; anything else is a 500.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ServiceError(Exception):
    """Base of the errors a client can cause; ``detail`` is the precise message."""

    status: ClassVar[int] = 400
    slug: ClassVar[str] = "bad-request"
    title: ClassVar[str] = "Bad request"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class BadRequest(ServiceError):
    """The request is malformed: a body that is not JSON, a query parameter out of range."""

    status = 400
    slug = "bad-request"
    title = "Bad request"


class NotFound(ServiceError):
    """The dataflow, input, output, session or transaction does not exist (for this tenant)."""

    status = 404
    slug = "not-found"
    title = "Not found"


class Conflict(ServiceError):
    """The request contradicts the current state.

    For example a time already advanced past, a stale sequence number, or an idempotency
    key reused for different work.
    """

    status = 409
    slug = "conflict"
    title = "Conflict"


class IdempotencyKeyReused(Conflict):
    """A commit's idempotency key was already used to commit other work.

    A conflict of its own type (``idempotency-key-reused``), so a client can tell it from the
    other conflicts by ``type`` alone: either both commits carry a digest of their rows and
    the digests differ (the key committed other rows), or one of them carries none and they
    name other transactions (for example a Spark micro-batch replayed with other task
    attempts, by a producer that sends no digest). Nothing of this request was applied.
    ``idempotency_key``, ``committed`` (the transactions committed under the key) and, when
    that commit had one, ``digest`` (its digest) travel as extension members of the problem.
    """

    slug = "idempotency-key-reused"
    title = "Idempotency key reused"

    def __init__(
        self, detail: str, idempotency_key: str, committed: list[str], digest: str | None
    ) -> None:
        extra: dict[str, Any] = {"idempotency_key": idempotency_key, "committed": committed}
        if digest is not None:
            extra["digest"] = digest
        super().__init__(detail, **extra)
        self.idempotency_key = idempotency_key
        self.committed = committed
        self.digest = digest


class Gone(ServiceError):
    """The dataflow (or session) existed but was dropped or closed."""

    status = 410
    slug = "gone"
    title = "Gone"


class Invalid(ServiceError):
    """The request is well-formed JSON but not a valid graph or batch; ``problems`` has all."""

    status = 422
    slug = "invalid"
    title = "Unprocessable content"

    def __init__(self, detail: str, problems: list[dict[str, str]] | None = None) -> None:
        super().__init__(detail, problems=problems or [])
        self.problems = problems or []


class LimitExceeded(ServiceError):
    """A configured limit would be exceeded (dataflows per tenant, staged records, ...)."""

    status = 429
    slug = "limit-exceeded"
    title = "Limit exceeded"


class Unauthorized(ServiceError):
    """No valid bearer token."""

    status = 401
    slug = "unauthorized"
    title = "Unauthorized"


class Forbidden(ServiceError):
    """The request may not be made from where it comes (a page of another site, say)."""

    status = 403
    slug = "forbidden"
    title = "Forbidden"


class Unavailable(ServiceError):
    """The service cannot take this now (recovering, or its disk refuses writes): retry.

    ``retry_after`` (seconds) becomes the ``Retry-After`` header.
    """

    status = 503
    slug = "unavailable"
    title = "Service unavailable"

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
