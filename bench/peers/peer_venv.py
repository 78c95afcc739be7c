"""The peers' own virtualenv: bench/peers/.venv, made from bench/peers/requirements.txt
and remade when that file changes, or an interpreter given with --python that already
has the peers installed. The project's .venv is never touched."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
DEFAULT_VENV = HERE / ".venv"
STAMP = "peer-bench-requirements.sha256"
"""A file in the virtualenv holding the hash of the requirements it was installed from."""

PROBE = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
         "('celery', 'kombu', 'dramatiq', 'dramatiq-workflow', 'redis')}))")


def _digest() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def ensure_venv(venv: Path = DEFAULT_VENV, base_python: str | None = None) -> Path:
    """The virtualenv's interpreter, creating or updating the virtualenv first when it is
    missing or its requirements stamp differs."""
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    if python.exists() and stamp.exists() and stamp.read_text().strip() == _digest():
        return python
    base = base_python or getattr(sys, "_base_executable", None) or sys.executable
    print(f"peers: installing {REQUIREMENTS.name} into {venv} (once)", flush=True)
    if not python.exists():
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(_digest() + "\n")
    return python


def peer_versions(python: Path) -> dict[str, str]:
    """The versions of the peer packages under ``python``; exits if any is missing."""
    proc = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{python} lacks a peer package (pip install -r {REQUIREMENTS}):\n"
                         f"{proc.stderr.strip()}")
    versions: dict[str, str] = json.loads(proc.stdout)
    return versions
