"""Finding the other Python interpreters of this machine (3.11, 3.12, 3.13, ...).

Ground truth must not depend on the interpreter that traced it, so tests and benchmarks
run the model-free code under every interpreter they can find: the project's light
environments first (`.venv-3.12/bin/python`, made by `make venvs`, which hold the
model-free dependencies) and the main `.venv`, then `python3.X` on PATH, then pyenv's
installs. Nothing here
imports anything beyond the standard library.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSIONS = ("3.11", "3.12", "3.13")  # the interpreters the project supports and tests


def version_of(python: str, needs: tuple[str, ...] = ()) -> str | None:
    """`major.minor` of an interpreter, or None when it does not run (or cannot import
    every module of `needs`)."""
    check = "".join(f"import {m}; " for m in needs)
    try:
        out = subprocess.run(
            [python, "-c", check + "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def candidates(version: str) -> list[str]:
    """Places an interpreter of `version` may be, best first."""
    found = [os.path.join(ROOT, f".venv-{version}", "bin", "python"), os.path.join(ROOT, ".venv", "bin", "python")]
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        found.append(sys.executable)
    on_path = shutil.which(f"python{version}")
    if on_path:
        found.append(on_path)
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")), reverse=True)
    return found


def find(version: str, needs: tuple[str, ...] = ()) -> str | None:
    """An interpreter of `version` that runs and imports `needs`, or None."""
    for path in candidates(version):
        if os.path.exists(path) and version_of(path, needs) == version:
            return path
    return None


def current() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def dataset_python(path: str) -> str | None:
    """The interpreter that traced a dataset (its build folder's stats.json, one or two
    folders up: `DIR/codenetmut/codenetmut` -> `DIR/codenetmut/stats.json`), or None."""
    here = os.path.abspath(path)
    for folder in (here, os.path.dirname(here), os.path.dirname(os.path.dirname(here))):
        stats = os.path.join(folder, "stats.json")
        if os.path.isfile(stats):
            try:
                with open(stats) as f:
                    return json.load(f).get("python")
            except (OSError, ValueError):
                return None
    return None
