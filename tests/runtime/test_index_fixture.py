"""The `index` and `resources` fixtures: the in-memory index for fast tests, the engine when a
test says so."""

from __future__ import annotations

import pytest

from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.adapters.vectors.memory import MemoryIndex
from sleepmem.pipelines.ports import VectorIndex
from sleepmem.resources import Resources


def test_an_unmarked_test_gets_the_in_memory_index(
    index: VectorIndex, request: pytest.FixtureRequest
) -> None:
    expected = EdgeIndex if request.config.getoption("--real-index") else MemoryIndex
    assert isinstance(index, expected)


@pytest.mark.real_index
def test_a_test_marked_real_index_gets_the_embedded_engine(index: VectorIndex) -> None:
    assert isinstance(index, EdgeIndex)
    assert index.count() == 0


def test_an_unmarked_test_gets_resources_over_the_in_memory_index(
    resources: Resources, request: pytest.FixtureRequest
) -> None:
    expected = EdgeIndex if request.config.getoption("--real-index") else MemoryIndex
    assert isinstance(resources.index, expected)
    assert resources.index.dim == resources.embedder.dim


@pytest.mark.real_index
def test_a_test_marked_real_index_gets_resources_over_the_engine_in_its_data_dir(
    resources: Resources,
) -> None:
    assert isinstance(resources.index, EdgeIndex)
    assert resources.index.path == resources.settings.data_dir / "index"
