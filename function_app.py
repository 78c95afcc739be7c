"""Azure Functions entry point: creates the app and registers dagq's blueprints.

The engine package ``dagq`` is deployed as ``shared/dagq`` beside this file (the
Functions layout keeps shared code under ``shared/``), so ``shared/`` goes on the import
path first. Which coordinator trigger is registered is decided by app settings at
start-up; see ``dagq.functions`` and docs/functions.md.
"""

import sys
from pathlib import Path

_SHARED = str(Path(__file__).resolve().parent / "shared")
if _SHARED not in sys.path:
    sys.path.insert(0, _SHARED)

from dagq.functions import build_app  # noqa: E402

app = build_app()
