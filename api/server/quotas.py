"""Per-tenant request rates: a token bucket per tenant, 429 with ``Retry-After`` past it.

One tenant's runaway loop must not take the server's time from the others. Every request
a tenant makes to ``/v1`` takes a token from its bucket, which refills at
``tenant_requests_per_second`` up to ``tenant_request_burst``; a request that finds the
bucket empty is refused with 429 and the whole seconds until a token is back. The frames
on a producer's WebSocket are not counted: its credits already bound them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from api.server.context import TENANT
from service.app import Limits, ServiceError


class TooManyRequests(ServiceError):
    """The tenant is over its request rate; ``retry_after`` seconds bring a token back."""

    status = 429
    slug = "too-many-requests"
    title = "Too many requests"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class TenantRates:
    """The tenants' token buckets (one per tenant that has made a request)."""

    __slots__ = ("_buckets", "_clock", "burst", "rate")

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = limits.tenant_requests_per_second
        self.burst = float(limits.tenant_request_burst or max(1.0, self.rate))
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, tenant: str) -> None:
        """Take a token for ``tenant``'s request; :class:`TooManyRequests` if none is left."""
        if self.rate <= 0:
            return
        now = self._clock()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = _Bucket(self.burst, now)
        else:
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
        if bucket.tokens < 1.0:
            wait = max(1, math.ceil((1.0 - bucket.tokens) / self.rate))
            raise TooManyRequests(
                f"tenant {tenant!r} is over tenant_requests_per_second ({self.rate:g}, "
                f"bursts of {self.burst:g}): retry in {wait} s",
                wait,
            )
        bucket.tokens -= 1.0


RATES = web.AppKey("rates", TenantRates)


@web.middleware
async def rate_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Charge the request to its tenant (set by the auth middleware, which runs first)."""
    tenant = request.get(TENANT)
    if tenant is not None:
        request.app[RATES].take(tenant)
    return await handler(request)
