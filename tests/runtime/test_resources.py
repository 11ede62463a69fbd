"""A process's resources: built lazily, once, even when threads ask for them together."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support import all_at_once

from sleepmem.resources import Resources


class TestLazyResources:
    def test_threads_asking_together_for_the_index_share_one_opened_index(
        self, resources: Resources
    ) -> None:
        # The embedded runtime's worker threads do this at start-up; opening the same index
        # directory twice at once used to fail one of them ("already contains segment data").
        def ask() -> Any:
            index = resources.index
            index.count()
            return index

        got, errors = all_at_once(8, ask)
        assert errors == []
        assert len(got) == 8
        assert all(index is got[0] for index in got)

    def test_the_embedder_is_built_once(self, resources: Resources) -> None:
        assert resources.embedder is resources.embedder


class TestPortsAreBuiltComplete:
    def test_the_ports_a_process_builds_cannot_be_changed_afterwards(
        self, resources: Resources
    ) -> None:
        ports = resources.ports()
        with pytest.raises(dataclasses.FrozenInstanceError):
            ports.extractor = None  # type: ignore[misc]
        assert ports.lease is None

    def test_a_runs_lease_is_part_of_the_ports_it_is_given(self, resources: Resources) -> None:
        class Held:
            def confirm(self) -> bool:
                return True

        lease = Held()
        assert resources.ports(lease=lease).lease is lease
