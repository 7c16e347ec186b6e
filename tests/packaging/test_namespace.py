"""One import name: attacks/, defenses/, tradeoff/ and reports/ install as subpackages of vflpriv.

Checked in the installed (editable) environment from outside the repository, where the repository root is
not on ``sys.path``, and in a wheel built from a copy of the sources: its file list and its entry points.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"vflpriv": "vflpriv", "attacks": "vflpriv/attacks", "defenses": "vflpriv/defenses",
           "auditors": "vflpriv/auditors", "tradeoff": "vflpriv/tradeoff", "reports": "vflpriv/reports"}
GENERIC = ("attacks", "defenses", "auditors", "tradeoff", "reports")

PROBE = """
import importlib.util, json, sys
import vflpriv.attacks.base, vflpriv.defenses.iso, vflpriv.tradeoff.cap, vflpriv.reports.tables
from vflpriv.config.registry import ATTACKS, DEFENSES
found = {n: getattr(importlib.util.find_spec(n), "origin", None) for n in %r}
print(json.dumps({"attacks": vflpriv.attacks.base.__file__, "generic": found,
                  "mc": ATTACKS.get("mc").__module__, "iso": DEFENSES.get("iso").__module__}))
"""


def _probe(cwd: Path, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE % (GENERIC,)], cwd=cwd, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_installed_environment_has_one_import_name(tmp_path):
    result = _probe(tmp_path)
    assert Path(result["attacks"]).resolve() == ROOT / "attacks" / "base.py"
    assert result["mc"].startswith("vflpriv.attacks.") and result["iso"].startswith("vflpriv.defenses.")
    for name, origin in result["generic"].items():
        assert origin is None or not Path(origin).resolve().is_relative_to(ROOT), f"top-level {name} from vflpriv"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built (no build isolation: offline-safe) from a copy of the tracked sources."""
    src = tmp_path_factory.mktemp("src")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in tracked.split():
        if rel.split("/")[0] in (*FOLDERS, "pyproject.toml", "README.md"):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(src)], check=True, capture_output=True)
    return next(dist.glob("vflpriv-*.whl"))


def test_wheel_installs_one_top_level_package_holding_every_source_file(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"vflpriv"}
    for folder, installed in FOLDERS.items():
        for path in [*(ROOT / folder).rglob("*.py"), *(ROOT / folder).rglob("*.yaml")]:
            rel = path.relative_to(ROOT / folder).as_posix()
            assert f"{installed}/{rel}" in names, f"{folder}/{rel} missing from the wheel"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    targets = [line.split("=", 1)[1].strip() for line in text.splitlines() if "=" in line]
    assert targets and all(t.startswith("vflpriv.") for t in targets), text


def test_wheel_install_resolves_the_subpackages(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    result = _probe(tmp_path, env)
    assert Path(result["attacks"]).resolve().is_relative_to(site.resolve())
    assert all(origin is None for origin in result["generic"].values())
