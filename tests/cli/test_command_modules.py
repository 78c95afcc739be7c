"""The ``dagq`` group names every command's module and loads only what a command needs."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import dagq.cli
from dagq.cli.main import COMMAND_MODULES


def test_the_group_names_exactly_the_commands_the_modules_define() -> None:
    defined: dict[str, str] = {}
    for info in pkgutil.iter_modules(dagq.cli.__path__):
        module = importlib.import_module(f"dagq.cli.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            assert command.name not in defined, f"{command.name} is defined twice"
            defined[command.name] = info.name
    assert defined == COMMAND_MODULES


def test_submit_loads_neither_the_server_nor_the_scheduler_nor_the_renderer() -> None:
    code = ("import sys; from dagq.cli.main import main; sys.argv = ['dagq', 'submit', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('dagq.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "dagq.cli.submitting" in out
    for heavy in ("dagq.cli.serve", "dagq.cli.schedule", "dagq.graph.svg", "dagq.cli.run"):
        assert f"'{heavy}'" not in out, heavy
