"""Where dataset files live, and the one error message every loader gives when they are missing.

Loaders never download anything. They look, in order, in the ``root`` argument, in
``data_root()/<dataset>``, and, for the benchmark sets that Debian packages, in that package's install
location, both unpacked under ``data_root()`` (what ``scripts/get-datasets.sh`` does without root) and
installed system-wide (``scripts/get-datasets.sh --system``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from vflpriv.common.errors import DataError
from vflpriv.store.folders import kind_of

ENV_VAR = "VFLPRIV_DATA"
GET_SCRIPT = "bash scripts/get-datasets.sh"

_MLBENCH = (Path("/usr/lib/R/site-library/mlbench/data"), Path("/usr/local/lib/R/site-library/mlbench/data"))

#: Install locations of the Debian packages (dataset-fashion-mnist, r-cran-mlbench) per dataset.
SYSTEM_DIRS: dict[str, tuple[Path, ...]] = {
    "fashion-mnist": (Path("/usr/share/datasets/fashion-mnist"),),
    "letter": _MLBENCH,
    "satellite": _MLBENCH,
}


#: Where the Debian packages' folders are read from: the machine's root (the tests of the loaders point it elsewhere).
SYSTEM_ROOT = Path("/")

#: Datasets made from another dataset's files (searched, and got, as that one).
FILES_OF = {"fashion-mnist-views": "fashion-mnist"}


def data_root() -> Path:
    """The user's dataset directory: ``$VFLPRIV_DATA`` if set, else ``~/.local/share/vflpriv``."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "vflpriv"


def candidate_dirs(dataset: str, root: Path | str | None = None) -> list[Path]:
    """Directories searched for ``dataset``'s files, most specific first; a ``root`` the user gives is the only one
    (its files, or an error: never other files under a record that names it)."""
    if root is not None:
        return [Path(root).expanduser()]
    dataset = FILES_OF.get(dataset, dataset)
    dirs = [data_root() / dataset]
    for system in SYSTEM_DIRS.get(dataset, ()):
        dirs += [data_root() / system.relative_to("/"), SYSTEM_ROOT / system.relative_to("/")]
    return dirs


def how_to_get(dataset: str, layout: str) -> str:
    """The instruction to make ``dataset``'s files available (a command, or where to put them)."""
    dataset = FILES_OF.get(dataset, dataset)
    if dataset in SYSTEM_DIRS:
        return f"run `{GET_SCRIPT}` (or `{GET_SCRIPT} --system` as root)"
    where = f"{data_root() / dataset} (or point --set dataset.root=DIR at them, or set ${ENV_VAR})"
    return f"put the files in {where}; layout: {layout}"


def locate(dataset: str, root: Path | str | None, names: Sequence[str], layout: str) -> tuple[Path, Path]:
    """Find the first candidate directory holding one of ``names``; return (directory, that file).

    ``names`` are paths relative to the directory and may be glob patterns (``*/train/*.png``).
    Raises :class:`DataError` naming the wanted file, the directories searched and how to get it.
    """
    dirs = candidate_dirs(dataset, root)
    where = "dataset.root" if root is not None else f"{dataset}'s folder"
    for directory in dirs:
        for name in names:
            found = next(directory.glob(name), None) if kind_of(directory, what=where) == "folder" else None
            if found is not None:
                return directory, found
    searched = ", ".join(str(d) for d in dirs)
    wanted = " or ".join(names)
    if root is not None:
        raise DataError(f"{dataset}: cannot find {wanted} in dataset.root {searched}; put the files there (layout: "
                        f"{layout}) or leave dataset.root unset for the usual places")
    raise DataError(f"{dataset}: cannot find {wanted} (searched {searched}); {how_to_get(dataset, layout)}")


def require(dataset: str, path: Path, layout: str) -> Path:
    """Return ``path`` if it exists, else raise :class:`DataError` naming it and the expected layout."""
    if not path.exists():
        raise DataError(f"{dataset}: missing file {path}; expected layout: {layout}")
    return path


def corrupt(dataset: str, path: Path, problem: str, layout: str) -> DataError:
    """The error for a file that exists but cannot be read as the expected format."""
    return DataError(f"{dataset}: cannot read {path}: {problem}; expected layout: {layout}")
