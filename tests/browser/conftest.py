"""Fixtures of the web status-page tests: a headless Chromium (Debian's ``chromium``,
which scripts/test installs when it is missing) and loopback servers that call the HTTP
handlers of the Function App."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.cdp import Browser

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def chromium_binary() -> str | None:
    """The Chromium executable on PATH, if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch(*flags: str) -> Iterator[Browser]:
    """A headless Chromium with extra ``flags`` until the generator is closed (the test is
    skipped with a reason when none is installed)."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium on PATH: scripts/test installs it with apt-get "
                    "(apt-get install -y chromium); the install was impossible here")
    b = Browser(binary, flags)
    yield b
    b.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module (skipped with a reason when none is installed)."""
    yield from launch()
