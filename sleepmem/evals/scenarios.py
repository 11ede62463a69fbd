"""Scenario runner: scripted stories (../shared/scenarios format) against a fresh instance.

Each story gets its own data directory and embedded Redis, goes in through the SDK's
emit, is drained and consolidated by the same code the Celery task runs, swept and
refreshed by the lifecycle pipelines, and read back through search, all on a clock the
story controls.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, SQLModel, col, select

from sleepmem.adapters.redis.hits import read_hits, trim_hits
from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import configure_logging
from sleepmem.core.settings import Settings
from sleepmem.evals.harness import discard
from sleepmem.ingest.drain import drain_once
from sleepmem.models import Memory, RawEvent, Scope
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.lifecycle.refresh import refresh
from sleepmem.pipelines.ports import Embedder, VectorIndex
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.resources import Resources, build_resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([dhms])$")

# Every key a story may use, by where it stands: a misspelt key must fail loudly, not be
# ignored (an ignored expectation is a check that always passes).
STORY_KEYS = frozenset({"name", "about", "scope", "step"})
STEP_KEYS = frozenset({"emit", "consolidate", "advance", "sweep", "refresh", "check"})
EMIT_KEYS = frozenset({"at", "session", "role", "kind", "content", "scope", "meta"})
SEARCH_KEYS = frozenset({"search", "k", "scope", "as_of", "types", "top1", "top", "absent",
                         "empty", "conflict"})
ACTIVE_KEYS = frozenset({"active", "count", "mentions", "type", "not_type", "session",
                         "expires_within", "expires_after", "starts"})
NOWHERE_KEYS = frozenset({"nowhere"})
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


@dataclass(slots=True)
class CheckResult:
    step: int
    check: str
    passed: bool
    detail: str = ""


@dataclass(slots=True)
class ScenarioResult:
    name: str
    file: str
    passed: bool = True
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None
    events: int = 0
    llm_calls: int = 0


class Clock:
    def __init__(self) -> None:
        self.now: datetime | None = None

    def __call__(self) -> datetime:
        return self.now or datetime.now(UTC)


def parse_duration(text: str) -> timedelta:
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"advance must look like 90d, 12h, 30m or 10s; got {text!r}")
    return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


class StoryFormatError(ValidationError):
    """A story file uses a key the runner does not know (or misplaces one)."""


def validate_story(story: dict[str, Any], file: str) -> None:
    """Refuse unknown keys, naming the file and the step, before anything runs."""
    unknown = set(story) - STORY_KEYS
    if unknown:
        raise StoryFormatError(file, f"unknown top-level keys {sorted(unknown)}; "
                               f"allowed: {sorted(STORY_KEYS)}")
    for i, step in enumerate(story.get("step", []), start=1):
        where = f"{file} step {i}"
        bad = set(step) - STEP_KEYS
        if bad or len(step) != 1:
            raise StoryFormatError(where, f"a step holds exactly one of {sorted(STEP_KEYS)}; "
                                   f"got {sorted(step)}")
        if "emit" in step:
            bad = set(step["emit"]) - EMIT_KEYS
            allowed = EMIT_KEYS
        elif "check" in step:
            spec = step["check"]
            allowed = (NOWHERE_KEYS if "nowhere" in spec else
                       ACTIVE_KEYS if "active" in spec else SEARCH_KEYS)
            bad = set(spec) - allowed
            if not ({"nowhere", "active", "search"} & set(spec)):
                raise StoryFormatError(where, f"a check needs one of search, active, nowhere; "
                                       f"got {sorted(spec)}")
        else:
            continue
        if bad:
            raise StoryFormatError(where, f"unknown keys {sorted(bad)}; allowed here: "
                                   f"{sorted(allowed)}")


def parse_time(text: str | datetime) -> datetime:
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@contextmanager
def captured_logs() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    configure_logging(level="DEBUG", json=True, stream=buf)
    try:
        yield buf
    finally:
        configure_logging()


class StoryRun:
    """One story against one fresh instance."""

    def __init__(self, story: dict[str, Any], resources: Resources, logs: io.StringIO) -> None:
        self.story = story
        self.res = resources
        self.logs = logs
        self.clock = Clock()
        resources.clock = self.clock
        self.default_scope = dict(story.get("scope", {}))
        self.events = 0
        self.llm_calls = 0
        self.client = MemoryClient(
            resources.settings, redis_url=resources.redis_url, resources=resources
        )

    # -- steps -----------------------------------------------------------------------
    def emit(self, spec: dict[str, Any]) -> None:
        fields = dict(spec)
        scope = {**self.default_scope}
        if "scope" in fields:
            scope = dict(fields.pop("scope"))
        at = parse_time(fields.pop("at")) if "at" in fields else self.clock()
        if self.clock.now is None or at > self.clock.now:
            self.clock.now = at
        event = {k: v for k, v in scope.items() if v not in (None, "")} | fields
        self.client.emit(at=at, **event)

    def consolidate(self) -> None:
        while drain_once(
            redis=self.res.redis, keys=self.res.keys, engine=self.res.engine,
            settings=self.res.settings, consumer="scenario",
        ).read:
            pass
        with Session(self.res.engine) as s:
            scopes = sorted(
                set(s.exec(select(RawEvent.scope_key).where(col(RawEvent.consolidated).is_(False))))
            )
        for key in scopes:
            report = run_consolidation(self.res, scope_key=key, pipeline=consolidate_scope)
            self.events += report.events
            self.llm_calls += report.llm_calls

    def sweep(self) -> None:
        sweep(engine=self.res.engine, ports=self.res.ports(), settings=self.res.settings)

    def refresh(self) -> None:
        # The story's searches wrote their hits from this process's writer thread.
        self.res.hits.flush()
        hits = read_hits(self.res.redis, self.res.keys)
        refresh(engine=self.res.engine, ports=self.res.ports(), settings=self.res.settings,
                hits=hits)
        if hits:
            trim_hits(self.res.redis, self.res.keys, upto=hits[-1][0])

    def search(self, spec: dict[str, Any]) -> list[Any]:
        result = self.client.search(
            spec["search"],
            Scope(**(spec.get("scope") or self.default_scope)),
            k=int(spec.get("k", 5)),
            types=spec.get("types"),
            as_of=parse_time(spec["as_of"]) if spec.get("as_of") else None,
        )
        return list(result.cards)

    # -- checks ----------------------------------------------------------------------
    def check(self, spec: dict[str, Any]) -> tuple[bool, str]:
        if "nowhere" in spec:
            where = self.find_everywhere(str(spec["nowhere"]))
            return (not where, "found in: " + ", ".join(where) if where else "absent everywhere")
        if "active" in spec:
            return self.check_active(spec)
        cards = self.search(spec)
        texts = [_texts(c) for c in cards]
        flat = [t for ts in texts for t in ts]
        shown = json.dumps([" | ".join(ts) for ts in texts], ensure_ascii=False)
        problems: list[str] = []
        if spec.get("empty") and cards:
            problems.append("expected no card")
        if "top1" in spec:
            wants = spec["top1"] if isinstance(spec["top1"], list) else [spec["top1"]]
            first = texts[0] if texts else []
            if not any(_has(t, w) for t in first for w in wants):
                problems.append(f"top1 should contain {wants}")
        for w in spec.get("top", []):
            if not any(_has(t, w) for t in flat):
                problems.append(f"{w!r} missing from top {len(cards)}")
        for w in spec.get("absent", []):
            if any(_has(t, w) for t in flat):
                problems.append(f"{w!r} should be absent")
        if "conflict" in spec:
            groups = [c for c in cards if getattr(c, "conflict", False)]
            if not any(
                all(any(_has(s.statement, w) for s in g.sides) for w in spec["conflict"])
                for g in groups
            ):
                problems.append(f"no conflict set holding {spec['conflict']}")
        return not problems, ("; ".join(problems) + " — got " + shown) if problems else shown

    def count_active(self, text: str) -> int:
        return len(self.active_memories(text))

    def active_memories(self, text: str) -> list[Memory]:
        with Session(self.res.engine) as s:
            rows = s.exec(select(Memory).where(col(Memory.status) == "active"))
            return [m for m in rows if _has(m.statement, text)]

    def check_active(self, spec: dict[str, Any]) -> tuple[bool, str]:
        """Exactly ``count`` current memories contain the text, each as the spec says.

        ``mentions``: each has that mention_count; ``type`` / ``not_type``: each has (not)
        that type; ``session``: each is (true) or is not (false) scoped to a session;
        ``expires_within`` / ``expires_after``: its expires_at is set and no later than /
        is unset or later than the clock plus that duration; ``starts``: its statement
        starts with that text (or one of a list).
        """
        found = self.active_memories(str(spec["active"]))
        want = int(spec.get("count", 1))
        now = self.clock()
        problems: list[str] = []
        if len(found) != want:
            problems.append(f"{len(found)} active memories contain it, expected {want}")
        starts = spec.get("starts")
        starts_any = [starts] if isinstance(starts, str) else list(starts or [])
        for m in found:
            expires = parse_time(m.expires_at) if m.expires_at else None
            if "mentions" in spec and m.mention_count != int(spec["mentions"]):
                problems.append(f"mention_count {m.mention_count}, expected {spec['mentions']}")
            if "type" in spec and m.type != spec["type"]:
                problems.append(f"type {m.type}, expected {spec['type']}")
            if "not_type" in spec and m.type == spec["not_type"]:
                problems.append(f"type must not be {m.type}")
            if "session" in spec and bool(m.session) != bool(spec["session"]):
                problems.append(f"session scope {m.session!r}, expected "
                                f"{'a session' if spec['session'] else 'none'}")
            if "expires_within" in spec and (
                expires is None or expires > now + parse_duration(spec["expires_within"])
            ):
                problems.append(f"expires_at {expires}, expected within "
                                f"{spec['expires_within']}")
            if "expires_after" in spec and expires is not None and (
                expires <= now + parse_duration(spec["expires_after"])
            ):
                problems.append(f"expires_at {expires}, expected after "
                                f"{spec['expires_after']}")
            if starts_any and not any(m.statement.startswith(w) for w in starts_any):
                problems.append(f"statement should start with {starts_any}")
        shown = json.dumps([f"[{m.type}|{m.session or '-'}|x{m.mention_count}|"
                            f"{m.expires_at}] {m.statement}" for m in found],
                           ensure_ascii=False, default=str)
        return not problems, ("; ".join(problems) + " — got " + shown) if problems else shown

    def find_everywhere(self, text: str) -> list[str]:
        needle = text.casefold()
        found: list[str] = []
        with Session(self.res.engine) as s:
            for table in SQLModel.metadata.sorted_tables:
                for row in s.execute(sa_select(table)):
                    if any(needle in str(v).casefold() for v in row):
                        found.append(f"sql:{table.name}")
                        break
        index = self.res.index
        payloads = index.payloads(index.all_ids())
        if needle in json.dumps(payloads, ensure_ascii=False, default=str).casefold():
            found.append("vector payloads")
        if _in_redis(self.res, needle):
            found.append("redis")
        if needle in self.logs.getvalue().casefold():
            found.append("logs")
        return found


def _in_redis(res: Resources, needle: str) -> bool:
    r = res.redis
    raw = needle.encode()
    for key in r.scan_iter(match=res.keys.pattern(), count=1000):
        if raw in key.lower():
            return True
        kind = r.type(key).decode()
        blobs: list[bytes] = []
        if kind == "string":
            blobs = [r.get(key) or b""]
        elif kind == "hash":
            blobs = [k + b"=" + v for k, v in r.hgetall(key).items()]
        elif kind == "list":
            blobs = list(r.lrange(key, 0, -1))
        elif kind == "set":
            blobs = list(r.smembers(key))
        elif kind == "zset":
            blobs = list(r.zrange(key, 0, -1))
        elif kind == "stream":
            blobs = [b"".join(k + v for k, v in f.items()) for _, f in r.xrange(key)]
        if any(raw in b.lower() for b in blobs):
            return True
    return False


def _texts(card: Any) -> list[str]:
    if getattr(card, "conflict", False):
        return [s.statement for s in card.sides]
    return [card.statement]


def _has(text: str, want: str) -> bool:
    return want.casefold() in text.casefold()


def run_story(
    path: Path,
    *,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    index: VectorIndex | None = None,
) -> ScenarioResult:
    """Run one story on a fresh instance: its own data directory and SQLite file, Redis
    (embedded, or the keys of ``settings.namespace`` on a shared one, deleted afterwards)
    and vector index (the settings' own, or ``index``: an unopened one for this story only,
    e.g. the in-memory index the test suites use). The run takes ``index`` over and closes it."""
    story = tomllib.loads(path.read_text(encoding="utf-8"))
    validate_story(story, path.name)
    result = ScenarioResult(name=str(story.get("name", path.stem)), file=path.name)
    with tempfile.TemporaryDirectory(prefix="sleepmem-story-") as tmp, captured_logs() as logs:
        base = settings or Settings(_env_file=None)
        story_settings = base.model_copy(
            update={"data_dir": Path(tmp) / "data", "database_url": None}
            if settings is None or settings.database_url is None
            else {"data_dir": Path(tmp) / "data"}
        )
        res = build_resources(story_settings)
        if embedder is not None:
            res._embedder = embedder
        try:
            if index is not None:
                index.ensure(dim=res.embedder.dim)
                res._index = index
            run = StoryRun(story, res, logs)
            for i, step in enumerate(story.get("step", []), start=1):
                try:
                    if "emit" in step:
                        run.emit(step["emit"])
                    elif step.get("consolidate"):
                        run.consolidate()
                    elif "advance" in step:
                        run.clock.now = run.clock() + parse_duration(step["advance"])
                    elif step.get("sweep"):
                        run.sweep()
                    elif step.get("refresh"):
                        run.refresh()
                    elif "check" in step:
                        ok, detail = run.check(step["check"])
                        result.checks.append(
                            CheckResult(i, json.dumps(step["check"], ensure_ascii=False), ok,
                                        detail)
                        )
                        result.passed &= ok
                except Exception as exc:  # a broken step fails the story, not the run
                    result.passed = False
                    result.error = f"step {i}: {type(exc).__name__}: {exc}"
                    break
            run.client.close()
            result.events, result.llm_calls = run.events, run.llm_calls
        finally:
            discard(res)
    return result


def run_directory(
    directory: Path, *, settings: Settings | None = None, embedder: Embedder | None = None
) -> dict[str, Any]:
    results = [
        run_story(p, settings=settings, embedder=embedder)
        for p in sorted(directory.glob("*.toml"))
    ]
    events = sum(r.events for r in results)
    calls = sum(r.llm_calls for r in results)
    return {
        "passed": sum(r.passed for r in results),
        "failed": sum(not r.passed for r in results),
        "events": events,
        "llm_calls": calls,
        "llm_calls_per_100_events": round(100 * calls / events, 2) if events else 0.0,
        "scenarios": [asdict(r) for r in results],
    }
