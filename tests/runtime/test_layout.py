"""What ships: one import package, ``sleepmem``, holding every module of the tree, and an
SDK that an application with its own ``models.py`` and ``tasks.py`` can import. And what a
checkout is: the top-level layer folders are the real source of ``sleepmem.models`` & co.,
with no symlink, for the interpreter (tracebacks, ``__file__``) and the static tools."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import traceback
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
    ".*_cache", ".hypothesis", "tests", "docs", ".staged",
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
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "sleepmem").rglob("*.py")}
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
        "finders": [type(finder).__module__ for finder in sys.meta_path],
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
        # The installed layer folders are plain directories the ordinary import system
        # finds: the checkout's finder (sleepmem/_layers.py) stays out.
        for folder in MAPPED:
            installed = site / "sleepmem" / folder
            assert installed.is_dir() and not installed.is_symlink(), folder
        assert "sleepmem._layers" not in seen["finders"]
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


def git(*args: str) -> str:
    """``git`` in the repository, or a skip where the tree is not a git checkout."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True,
        timeout=60,
    ).stdout


def run_python(
    code: str, cwd: Path, python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH would decide where sleepmem comes from in place of what is under test.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


class TestACheckout:
    """The layer folders at the top of the tree are where sleepmem.models & co. come from,
    with no symlink under sleepmem/ (issue 42)."""

    def test_has_no_symlink(self) -> None:
        for folder in MAPPED:
            assert not os.path.lexists(ROOT / "sleepmem" / folder), folder
        # git records a symlink with mode 120000; a checkout without symlink support (some
        # Windows set-ups, some archive tools) would turn it into a text file.
        links = [line for line in git("ls-files", "-s").splitlines() if line.startswith("120000")]
        assert links == []

    def test_imports_each_layer_from_its_top_level_folder(self) -> None:
        for folder in MAPPED:
            package = importlib.import_module(f"sleepmem.{folder}")
            assert Path(package.__file__ or "") == ROOT / folder / "__init__.py"
            assert list(package.__path__) == [str(ROOT / folder)]
        from sleepmem.models import tables
        from sleepmem.pipelines import types

        assert Path(types.__file__) == ROOT / "pipelines" / "types.py"
        assert Path(tables.__file__) == ROOT / "models" / "tables.py"

    def test_a_traceback_names_the_file_in_the_repository(self) -> None:
        from sleepmem.pipelines.types import open_slot

        with pytest.raises(AttributeError) as caught:
            open_slot(None)  # type: ignore[arg-type]  # None has no .lower(): raises inside
        where = Path(str(caught.traceback[-1].path))
        assert where == ROOT / "pipelines" / "types.py"
        assert where.is_file()
        text = "".join(traceback.format_exception(caught.value))
        assert f'File "{ROOT / "pipelines" / "types.py"}"' in text
        assert "sleepmem/pipelines" not in text
        # git blame takes the path a traceback prints.
        assert git("blame", "--porcelain", "-L", "1,1", "--", str(where.relative_to(ROOT)))

    def test_makes_no_other_folder_of_the_root_a_subpackage(self) -> None:
        for name in ("tests", "docs", "scripts", "sleepmem"):
            assert importlib.util.find_spec(f"sleepmem.{name}") is None, name

    @pytest.mark.parametrize(
        ("code", "folder"),
        [
            ("import models", "models"),
            ("import models.tables", "models"),
            ("from models.tables import RawEvent", "models"),
            # The case that failed with "Table 'raw_event' is already defined".
            ("import sleepmem.models.tables\nimport models.tables", "models"),
            ("import pipelines.types", "pipelines"),
            ("import tasks", "tasks"),
            ("import workers", "workers"),
            ("import schedules", "schedules"),
        ],
    )
    def test_importing_a_layer_by_its_folder_name_says_to_import_it_from_sleepmem(
        self, code: str, folder: str,
    ) -> None:
        # python -c puts its working directory, the repository root, first on sys.path.
        done = run_python(code, cwd=ROOT)
        assert done.returncode != 0
        assert "already defined" not in done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: "), done.stderr[-2000:]
        assert f"import sleepmem.{folder}" in last

    def test_a_copy_without_symlinks_installs_editable_and_runs_from_its_real_files(
        self, tmp_path: Path,
    ) -> None:
        # What a clone of the working tree holds: the files git tracks or would track.
        copy = tmp_path / "checkout"
        for name in git("ls-files", "-co", "--exclude-standard", "-z").split("\0"):
            source = ROOT / name
            if name and os.path.lexists(source):
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy / name, follow_symlinks=False)
        assert not any(p.is_symlink() for p in copy.rglob("*"))
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        python = str(venv / "bin" / "python")
        # The dependencies come from this interpreter's environment; only sleepmem itself
        # is installed, editable, from the copy.
        (purelib,) = {
            line.strip() for line in run_python(
                "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path,
                python=python,
            ).stdout.splitlines()
        }
        ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
        (Path(purelib) / "zz_dependencies.pth").write_text("\n".join(ours) + "\n")
        install = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(copy)],
            capture_output=True, text=True, timeout=300,
        )
        assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
        probe = textwrap.dedent(
            """
            import json, traceback
            import sleepmem.models.tables as tables
            from sleepmem.pipelines.types import open_slot
            try:
                open_slot(None)
            except AttributeError as exc:
                where = traceback.extract_tb(exc.__traceback__)[-1].filename
            print(json.dumps({"tables": tables.__file__, "raised_in": where}))
            """
        )
        done = run_python(probe, cwd=tmp_path, python=python)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen == {
            "tables": str(copy / "models" / "tables.py"),
            "raised_in": str(copy / "pipelines" / "types.py"),
        }
        # The layer contracts run there too, over the staged tree, without a symlink.
        lint = subprocess.run(
            [sys.executable, str(copy / "scripts" / "staged.py"), "lint-imports"],
            cwd=copy, capture_output=True, text=True, timeout=300,
        )
        assert lint.returncode == 0, lint.stdout[-3000:]
        assert re.search(r"Contracts: [1-9]\d* kept, 0 broken\.", lint.stdout), lint.stdout
        assert not any(p.is_symlink() for p in (copy / ".staged").rglob("*"))


class TestAnInstallWithoutTheEvalExtra:
    def test_an_evaluation_says_how_to_install_what_it_needs(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from sleepmem.core.errors import ConfigurationError
        from sleepmem.evals.extra import require

        monkeypatch.setitem(sys.modules, "rank_bm25", None)  # as if not installed
        with pytest.raises(ConfigurationError, match=r"pip install 'sleepmem\[eval\]'"):
            require("rank_bm25")
