"""One runner for the suites of behaviour stories (generalisation, paraphrases, probes):
each story on a fresh embedded instance, the result grouped as each suite reports it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

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


def run_stories(paths: list[Path], embedder: Embedder,
                groups: Callable[[Path], Iterable[str]]) -> SuiteRun:
    """Run every story; a failure is one line: the story's stem, then its error or the
    failing checks."""
    run = SuiteRun(total=len(paths))
    for path in paths:
        result = run_story(path, embedder=embedder)
        ok = result.passed and result.error is None
        for group in groups(path):
            run.groups[group].append(ok)
        if not ok:
            why = result.error or "; ".join(
                f"step {c.step}: {c.check} -> {c.detail}" for c in result.checks if not c.passed
            )
            run.failures.append(f"{path.stem}: {why}")
    return run
