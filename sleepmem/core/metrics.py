"""Process-wide counters, rendered in the Prometheus text format.

Counters are per process on purpose (each Celery worker or API process counts its own
work; a scraper sums them). They hold numbers and label values only, never content.
Kept dependency-free: a handful of counters does not justify a client library.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class Counter:
    """A monotonically increasing count, optionally split by label values."""

    def __init__(self, name: str, help_text: str, labels: Iterable[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.labels = tuple(labels)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter only goes up (got {amount})")
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.name}: labels must be exactly {self.labels}, got {labels}")
        key = tuple(str(labels[k]) for k in self.labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        """The count for these label values; with none given, the sum over all of them."""
        with self._lock:
            if not labels:
                return sum(self._values.values())
            return sum(
                v for k, v in self._values.items()
                if all(k[self.labels.index(n)] == str(x) for n, x in labels.items())
            )

    def samples(self) -> list[tuple[dict[str, str], float]]:
        with self._lock:
            return [(dict(zip(self.labels, k, strict=True)), v) for k, v in self._values.items()]

    def reset(self) -> None:
        """For tests only: counters never go down in a running process."""
        with self._lock:
            self._values.clear()


class Registry:
    def __init__(self) -> None:
        self._counters: dict[str, Counter] = {}
        self._lock = threading.Lock()

    def counter(self, name: str, help_text: str, labels: Iterable[str] = ()) -> Counter:
        with self._lock:
            existing = self._counters.get(name)
            if existing is not None:
                return existing
            made = self._counters[name] = Counter(name, help_text, labels)
            return made

    def render(self) -> str:
        """All counters in the Prometheus text exposition format (version 0.0.4)."""
        lines: list[str] = []
        with self._lock:
            counters = list(self._counters.values())
        for c in counters:
            lines.append(f"# HELP {c.name} {c.help}")
            lines.append(f"# TYPE {c.name} counter")
            for labels, value in c.samples():
                if labels:
                    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                    lines.append(f"{c.name}{{{body}}} {value:g}")
                else:
                    lines.append(f"{c.name} {value:g}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


REGISTRY = Registry()

LLM_CALLS = REGISTRY.counter(
    "sleepmem_llm_calls_total", "Chat model calls, by model and outcome.", ("model", "outcome")
)
LLM_TOKENS = REGISTRY.counter(
    "sleepmem_llm_tokens_total", "Chat model tokens, by model and kind.", ("model", "kind")
)
EXTRACTED = REGISTRY.counter(
    "sleepmem_extracted_candidates_total", "Candidates extracted, by extractor and type.",
    ("extractor", "type"),
)


def render() -> str:
    return REGISTRY.render()
