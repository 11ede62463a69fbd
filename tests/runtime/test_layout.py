"""What ships: one import package, ``sleepmem``, holding every module of the tree, and an
SDK that an application with its own ``models.py`` and ``tasks.py`` can import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
from support import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]
# The folders the project's contract keeps at the top, each installed under sleepmem.
MAPPED = ("models", "pipelines", "tasks", "workers", "schedules")
_SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "data", ".sleepmem", "*.egg-info", "__pycache__",
    ".*_cache", ".hypothesis", "tests", "docs",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the tree (a build in place would write build/ into
    the worktree under other runs' feet)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=_SKIP, symlinks=True)
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (built,) = out.glob("sleepmem-*.whl")
    return built


def names_in(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def read_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(name).decode()


def source_modules() -> set[str]:
    """Every module of the tree, named by where the wheel must put it."""
    found = {
        str(p.relative_to(ROOT)) for p in (ROOT / "sleepmem").rglob("*.py")
        if not any(part in MAPPED for part in p.relative_to(ROOT / "sleepmem").parts[:1])
    }
    for folder in MAPPED:
        found |= {f"sleepmem/{p.relative_to(ROOT)}" for p in (ROOT / folder).rglob("*.py")}
    return {name for name in found if "__pycache__" not in name}


class TestTheWheel:
    def test_declares_sleepmem_as_its_only_top_level_package(self, wheel: Path) -> None:
        with zipfile.ZipFile(wheel) as zf:
            (top_level,) = [n for n in zf.namelist() if n.endswith(".dist-info/top_level.txt")]
            assert zf.read(top_level).decode().split() == ["sleepmem"]

    def test_holds_no_file_outside_sleepmem_and_its_metadata(self, wheel: Path) -> None:
        tops = {name.split("/", 1)[0] for name in names_in(wheel)}
        assert tops == {"sleepmem", "sleepmem-0.1.0.dist-info"}

    def test_installs_the_layer_folders_under_sleepmem(self, wheel: Path) -> None:
        names = set(names_in(wheel))
        for module in (
            "sleepmem/models/__init__.py",
            "sleepmem/pipelines/write/consolidate.py",
            "sleepmem/pipelines/write/extract/rules.py",
            "sleepmem/pipelines/lifecycle/reconsolidate.py",
            "sleepmem/tasks/consolidate.py",
            "sleepmem/workers/main.py",
            "sleepmem/schedules/triggers.py",
            "sleepmem/core/errors.py",
            "sleepmem/adapters/redis/locks.py",
        ):
            assert module in names, module

    def test_carries_the_apache_license(self, wheel: Path) -> None:
        metadata = read_metadata(wheel)
        assert "License-Expression: Apache-2.0" in metadata
        assert any(n.endswith("dist-info/licenses/LICENSE") for n in names_in(wheel))

    def test_leaves_the_evaluation_tools_to_the_eval_extra(self, wheel: Path) -> None:
        requires = [line for line in read_metadata(wheel).splitlines()
                    if line.startswith("Requires-Dist:")]
        (bm25,) = [r for r in requires if "rank-bm25" in r]
        assert 'extra == "eval"' in bm25
        # Search and context count max_tokens and budget_tokens in cl100k: the tokenizer
        # is the service's own.
        (tokenizer,) = [r for r in requires if "bpe-openai" in r]
        assert "extra ==" not in tokenizer

    def test_ships_every_module_of_the_tree(self, wheel: Path) -> None:
        # A new subpackage missing from [tool.setuptools] packages would be left out.
        missing = source_modules() - set(names_in(wheel))
        assert not missing, f"not in the wheel (list them in pyproject.toml): {sorted(missing)}"


FOREIGN = {
    # An application's own modules named like the layer folders.
    "models.py": "LEVELS = 'the application'\nclass User: pass\n",
    "tasks.py": "def send_welcome_mail() -> str:\n    return 'sent'\n",
    "pipelines.py": "STEPS = ['theirs']\n",
}

PROBE = textwrap.dedent(
    """
    import json, sys
    import models, tasks
    from sleepmem.sdk import MemoryClient
    from sleepmem.api.app import create_app
    from sleepmem.core.settings import Settings
    from fastapi.testclient import TestClient
    import sleepmem

    settings = Settings(redis_url=sys.argv[1], namespace=sys.argv[2], embedder="hashing",
                        data_dir=sys.argv[3], _env_file=None)
    client = MemoryClient(settings, tenant="acme", agent="bot", user="ann")
    event_id = client.emit(kind="message", role="user", content="I live in Lisbon.")
    with TestClient(create_app(settings)) as http:
        health = http.get("/healthz").json()
    print(json.dumps({
        "sleepmem": sleepmem.__file__,
        "models": models.__file__, "levels": models.LEVELS,
        "tasks": tasks.send_welcome_mail(),
        "sleepmem_models": sys.modules["sleepmem.models"].__file__,
        "event_id": event_id, "health": health,
    }))
    """
)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    for name, text in FOREIGN.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.fixture
def namespace() -> Iterator[str]:
    ns = f"smtest-{uuid.uuid4().hex[:10]}"
    yield ns
    client = redis_lib.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{ns}:*"):
        client.delete(key)
    client.close()


class TestAnApplicationWithItsOwnModels:
    def test_imports_the_sdk_and_the_api_beside_its_own_models_and_tasks(
        self, wheel: Path, app_dir: Path, tmp_path_factory: pytest.TempPathFactory,
        namespace: str,
    ) -> None:
        site = tmp_path_factory.mktemp("site")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
             str(site), str(wheel)],
            check=True, timeout=120,
        )
        data = tmp_path_factory.mktemp("data")
        # The application's folder comes first on sys.path (python -c puts its cwd there),
        # then the installed wheel; dependencies come from this interpreter's site-packages.
        done = subprocess.run(
            [sys.executable, "-c", PROBE, REDIS_URL, namespace, str(data)],
            cwd=app_dir, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert Path(seen["sleepmem"]).is_relative_to(site)
        assert Path(seen["sleepmem_models"]).is_relative_to(site / "sleepmem" / "models")
        # The application's own modules are untouched by ours, and ours by theirs.
        assert Path(seen["models"]) == app_dir / "models.py"
        assert seen["levels"] == "the application"
        assert seen["tasks"] == "sent"
        assert seen["health"] == {"status": "ok"}
        stream = redis_lib.Redis.from_url(REDIS_URL)
        try:
            entries = stream.xrange(f"{namespace}:events")
        finally:
            stream.close()
        assert len(entries) == 1


class TestAnInstallWithoutTheEvalExtra:
    def test_an_evaluation_says_how_to_install_what_it_needs(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from sleepmem.core.errors import ConfigurationError
        from sleepmem.evals.extra import require

        monkeypatch.setitem(sys.modules, "rank_bm25", None)  # as if not installed
        with pytest.raises(ConfigurationError, match=r"pip install 'sleepmem\[eval\]'"):
            require("rank_bm25")
