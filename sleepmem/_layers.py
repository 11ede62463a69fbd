"""Where sleepmem.models, sleepmem.pipelines, sleepmem.tasks, sleepmem.workers and
sleepmem.schedules come from in a checkout.

The design card keeps these layer folders at the top of the tree, beside ``sleepmem/``. The
wheel copies them under ``sleepmem/`` (setuptools ``package-dir``), where the ordinary import
system finds them and nothing here runs. In a checkout (an editable install, or the
repository root on ``PYTHONPATH``) they are not under ``sleepmem/``: a finder maps each of
the five package names, and nothing else, to its real folder. Their modules then load from
the real files, so a traceback, ``__file__`` and ``inspect.getsourcefile`` name a path that
exists in the repository and that ``git blame`` accepts.

Why not ``__path__.append(<repository root>)``: every folder at the root would become a
subpackage (``sleepmem.tests``, ``sleepmem.docs``, ``sleepmem.scripts``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

LAYERS = ("models", "pipelines", "tasks", "workers", "schedules")


class LayerFinder(MetaPathFinder):
    """Finds ``sleepmem.<layer>`` in ``<root>/<layer>/``; their submodules then follow the
    package's ``__path__`` like any other package's."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )

    def __repr__(self) -> str:
        return f"LayerFinder({sorted(self.folders)})"


def install(package_dir: Path) -> None:
    """Map each layer missing from ``package_dir`` (``sleepmem/``) to the folder of the same
    name beside it, if that folder is a package of a sleepmem checkout."""
    root = package_dir.parent
    if not (root / "pyproject.toml").is_file():
        return  # not a checkout: an installed wheel has every layer under sleepmem/
    folders = {
        f"{package_dir.name}.{layer}": root / layer
        for layer in LAYERS
        if not (package_dir / layer / "__init__.py").is_file()
        and (root / layer / "__init__.py").is_file()
    }
    # sleepmem/__init__.py runs again when a test drops sleepmem from sys.modules and
    # imports it anew: one finder, not one per import.
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != __name__]
    if folders:
        # First, so that nothing else on sys.path or sys.meta_path (a stale copy, another
        # checkout's editable finder) answers for these five names.
        sys.meta_path.insert(0, LayerFinder(folders))
