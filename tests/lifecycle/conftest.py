"""Shared by the lifecycle tests: one embedded index per module, a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lifecycle_support import Clock, make_ports, open_index

from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.pipelines.ports import Ports


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeIndex]:
    idx = open_index(tmp_path_factory.mktemp("index"))
    yield idx
    idx.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ports(index: EdgeIndex, clock: Clock) -> Ports:
    return make_ports(index, clock)
