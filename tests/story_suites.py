"""One runner for the suites of behaviour stories (generalisation, paraphrases, probes):
each story on a fresh instance, the result grouped as each suite reports it.

These suites measure judgement, so each story runs where that is all that differs: its own
namespace on the machine's Redis and the in-memory vector index, which passes the engines'
contract suite (tests/runtime/test_vector_index_contract.py). ``--real-index`` runs them on
the embedded engine; the public scenarios (tests/stories/test_scenarios.py) always run on
the instance a user starts, embedded Redis and engine included."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sleepmem.adapters.vectors.memory import MemoryIndex
from sleepmem.core.settings import Settings
from sleepmem.evals.scenarios import run_story
from sleepmem.pipelines.ports import Embedder


@dataclass(slots=True)
class SuiteRun:
    total: int = 0
    groups: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return self.total - len(self.failures)

    @property
    def rate(self) -> float:
        return self.passed / self.total

    def by(self) -> dict[str, str]:
        return {k: f"{sum(v)}/{len(v)}" for k, v in sorted(self.groups.items())}


@dataclass(frozen=True, slots=True)
class StoryPlace:
    """Where the stories of one suite run: a shared Redis under a namespace of the suite's
    own (each story gets its own below it) and the in-memory index unless ``real_index``."""

    settings: Settings
    real_index: bool = False


def run_stories(paths: list[Path], embedder: Embedder,
                groups: Callable[[Path], Iterable[str]], *, place: StoryPlace) -> SuiteRun:
    """Run every story; a failure is one line: the story's stem, then its error or the
    failing checks."""
    run = SuiteRun(total=len(paths))
    for i, path in enumerate(paths):
        settings = place.settings.model_copy(
            update={"namespace": f"{place.settings.namespace}-{i}"})
        index = None if place.real_index else MemoryIndex()
        result = run_story(path, settings=settings, embedder=embedder, index=index)
        ok = result.passed and result.error is None
        for group in groups(path):
            run.groups[group].append(ok)
        if not ok:
            why = result.error or "; ".join(
                f"step {c.step}: {c.check} -> {c.detail}" for c in result.checks if not c.passed
            )
            run.failures.append(f"{path.stem}: {why}")
    return run


def check_floor(run: SuiteRun, name: str, floor: float, *, width: int = 600) -> None:
    """Print the suite's figures and failures (shown with -s or -rA), then hold it to its
    floor. A plain print: capsys would hand run_story's log reset a stream that closes
    with the test and break every later test's logging."""
    report = {"passed": run.passed, "total": run.total, "rate": round(run.rate, 3),
              "by": run.by(), "failures": [f.split(":", 1)[0] for f in run.failures]}
    print(f"\n{name}:", json.dumps(report, ensure_ascii=False))
    for line in run.failures:
        print("  FAILED", line[:width])
    assert run.rate >= floor, json.dumps(report, ensure_ascii=False) + "\n" + "\n".join(
        run.failures)
