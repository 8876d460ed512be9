"""Fixtures of the runtime tests: the clusters of child processes that layouts run on."""

from collections.abc import Iterator

import pytest

from tests.runtime.fabrics import Clusters


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    """Runs programs on a :class:`~tests.runtime.fabrics.Layout`; kills its children after."""
    pools = Clusters()
    try:
        yield pools
    finally:
        pools.close()
