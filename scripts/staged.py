"""Run a static tool (mypy, lint-imports) over the tree as the wheel installs it, and
report the repository's real paths.

    .venv/bin/python scripts/staged.py mypy
    .venv/bin/python scripts/staged.py lint-imports [ARGS...]

The design card's layer folders (models/, pipelines/, tasks/, workers/, schedules/) are
sleepmem.models, sleepmem.pipelines, ... At run time sleepmem/_layers.py maps the names to
the folders, and the wheel copies the folders under sleepmem/. mypy and import-linter find
modules by walking directories, so neither can follow that mapping. This script builds, in
.staged/ (git-ignored), the tree they expect: sleepmem/ with models/, pipelines/, ... under
it, every file a hard link to the real one (a copy where links are not possible); no
symlinks, so it works wherever the checkout does. It runs the tool there, with the
project's pyproject.toml, and rewrites every staged path the tool prints (.staged/sleepmem/
pipelines/x.py) back to the file in the repository (pipelines/x.py), so an editor or
`git blame` can open what it names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / ".staged"
LAYERS = ("models", "pipelines", "tasks", "workers", "schedules")
# What the tools read: sources, stubs and the PEP 561 marker.
WANTED = {".py", ".pyi"}


def sources() -> Iterator[tuple[Path, Path]]:
    """(path in the stage, real file) for every module of the installed tree."""
    package = ROOT / "sleepmem"
    for real in sorted(package.rglob("*")):
        rel = real.relative_to(package)
        # A leftover sleepmem/<layer> (an old symlink, a stale folder) must not stand in
        # for the real layer folder.
        if rel.parts[0] in LAYERS or not _wanted(real):
            continue
        yield Path("sleepmem") / rel, real
    for layer in LAYERS:
        for real in sorted((ROOT / layer).rglob("*")):
            if _wanted(real):
                yield Path("sleepmem") / layer / real.relative_to(ROOT / layer), real


def _wanted(path: Path) -> bool:
    return (
        path.is_file()
        and "__pycache__" not in path.parts
        and (path.suffix in WANTED or path.name == "py.typed")
    )


def _place(real: Path, staged: Path) -> None:
    staged.parent.mkdir(parents=True, exist_ok=True)
    try:
        # A hard link keeps the real file's mtime and size, so mypy's cache stays valid
        # from run to run.
        os.link(real, staged)
    except OSError:
        shutil.copy2(real, staged)


def stage() -> None:
    """Rebuild .staged/sleepmem and .staged/pyproject.toml from the working tree. The
    tools' caches (.staged/.mypy_cache, ...) stay."""
    shutil.rmtree(STAGE / "sleepmem", ignore_errors=True)
    (STAGE / "pyproject.toml").unlink(missing_ok=True)
    for staged, real in sources():
        _place(real, STAGE / staged)
    _place(ROOT / "pyproject.toml", STAGE / "pyproject.toml")


@contextmanager
def exclusive() -> Iterator[None]:
    """One run at a time: another run's stage() would delete files under this run's tool."""
    STAGE.mkdir(exist_ok=True)
    with open(STAGE / ".lock", "w") as lock:
        if sys.platform != "win32":  # no flock there: runs are not serialised
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def real_paths(text: str, base: str) -> str:
    """Staged paths, relative (sleepmem/pipelines/x.py) or absolute, back to the real ones,
    relative to ``base`` ("" for the repository root, else the root's absolute path)."""
    pattern = re.compile(
        rf"(?<![\w./-])({re.escape(str(STAGE))}/)?sleepmem/(?:({'|'.join(LAYERS)})/)?"
    )

    def real(match: re.Match[str]) -> str:
        prefix = f"{ROOT}/" if match.group(1) else base
        layer = match.group(2)
        return f"{prefix}{layer}/" if layer else f"{prefix}sleepmem/"

    return pattern.sub(real, text)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    tool, *args = argv
    # The tool of this interpreter's environment (.venv/bin/mypy beside .venv/bin/python).
    executable = Path(sys.executable).parent / tool
    command = [str(executable) if executable.exists() else tool, *args]
    base = "" if Path.cwd().resolve() == ROOT else f"{ROOT}/"
    with exclusive():
        stage()
        # The tools look for pyproject.toml in the working directory, and lint-imports puts
        # the working directory first on sys.path, where it finds the staged sleepmem.
        with subprocess.Popen(
            command, cwd=STAGE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(real_paths(line, base))
                sys.stdout.flush()
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
