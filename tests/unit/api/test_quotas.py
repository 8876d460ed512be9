"""The default rate limit lets an ordinary producer through (issue 22), and stops a flood.

``bench/producer_rate.py`` measured what an ordinary producer does: batches of 100 over
HTTP, one request in flight, at 1,000-1,700 requests a second alone and 1,500-2,200 with four
producers of one tenant. The default bucket (``Limits()``) is checked against a steady 2,500
a second for a minute (a clock the test moves), and against a flood at 10,000 a second.
"""

import pytest

from api.server.quotas import TenantRates, TooManyRequests
from service.app import Limits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused_at(rate: float, seconds: int) -> int:
    """How many of ``rate`` evenly spaced requests a second for ``seconds`` are refused."""
    clock = Clock()
    rates = TenantRates(Limits(), clock)
    refused = 0
    for _ in range(int(rate * seconds)):
        clock.now += 1 / rate
        try:
            rates.take("producer")
        except TooManyRequests:
            refused += 1
    return refused


def test_an_ordinary_producer_is_never_refused_by_the_default() -> None:
    assert refused_at(2_500, 60) == 0


def test_a_flood_is_refused_by_the_default_with_retry_after() -> None:
    clock = Clock()
    rates = TenantRates(Limits(), clock)
    for _ in range(int(Limits().tenant_requests_per_second)):  # a second's burst, at once
        rates.take("flood")
    with pytest.raises(TooManyRequests) as refused:
        rates.take("flood")
    assert refused.value.retry_after == 1
    # 20,000 requests in 2 s: the bucket's 5,000 and 2 s of refill are taken, the rest refused
    # (within one request: the clock moves in steps of 1/10,000 s).
    assert abs(refused_at(10_000, 2) - 5_000) <= 1
