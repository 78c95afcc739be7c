"""Definitions that once escaped as tracebacks are refused with a problem naming the
field and the rule, exit 1, and nothing is written (several files: none is stored)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DAGQ = str(Path(sys.executable).parent / "dagq")

TASK = '{"name":"a","tasks":[{"name":"t","kwargs":{"cmd":"true"%s}%s}]}'
BAD: dict[str, tuple[str, str]] = {
    "bigint.json": (TASK % (',"n":' + "1" * 5000, ""), "more than 4300 digits"),
    "bigint.yaml": ("name: a\ntasks:\n  - name: t\n    kwargs: {cmd: 'true', n: "
                    + "1" * 5000 + "}\n", "more than 4300 digits"),
    "inf.json": (TASK % ("", ',"timeout_s":1e400'), "timeout_s must be a number"),
    "huge-delay.json": (TASK % ("", ',"delay_s":1e300'), "more than the limit of"),
    "huge-backoff.json": (TASK % ("", ',"retry_backoff_s":1e300'), "retry_backoff_s is 1e+300"),
    "surrogate-name.json": ('{"name":"a","tasks":[{"name":"t\\ud800","kwargs":{"cmd":"true"}}]}',
                            "lone surrogate U+D800"),
    "surrogate-cmd.json": ('{"name":"a","tasks":[{"name":"t","kwargs":{"cmd":"echo \\ud800"}}]}',
                           "lone surrogate U+D800"),
    "surrogate-key.json": (TASK % (',"\\udfff":1', ""), "lone surrogate U+DFFF"),
    "control-key.json": (TASK % (',"a\\u0001":1', ""), "control character U+0001"),
    "control-field.json": (TASK % ("", ',"\\u0001x":1'), "unknown field"),
    "nul-cmd.json": ('{"name":"a","tasks":[{"name":"t","kwargs":{"cmd":"echo a\\u0000"}}]}',
                     "NUL byte"),
    "nul-cwd.json": (TASK % (',"cwd":"/tmp\\u0000"', ""), "NUL byte"),
    "env-name.json": (TASK % (',"env":{"A=B":"x"}', ""), "environment variable name"),
    "env-nul.json": (TASK % (',"env":{"A":"x\\u0000"}', ""), "NUL byte"),
    "child-device.yaml": ("name: p\ntasks:\n  - name: t\n    workflow: /dev/zero\n",
                          "must be a regular file"),
}


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DAGQ_STORE=f"sqlite:{tmp_path / 'x.db'}")
    return subprocess.run([DAGQ, *args], env=env, capture_output=True, text=True,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)


def test_each_bad_definition_is_a_clear_error_and_nothing_is_stored(tmp_path: Path) -> None:
    for name, (text, _) in BAD.items():
        (tmp_path / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    (tmp_path / "good.yaml").write_text("name: g\ntasks:\n  - {name: t, kwargs: {cmd: 'true'}}\n")
    files = ["good.yaml", *BAD]
    for verb in ("validate", "submit"):
        out = _run(tmp_path, verb, *files)
        assert out.returncode == 1, out
        assert "Traceback" not in out.stderr + out.stdout, out.stderr
        text = out.stdout + out.stderr
        assert "good.yaml: invalid" not in text
        for name, (_, rule) in BAD.items():
            assert name in text, f"{verb}: {name} not reported:\n{text}"
            assert rule in _block(text, name), f"{verb} {name}: expected {rule!r}:\n{text}"
    listed = _run(tmp_path, "list", "--json")
    assert listed.returncode == 0, listed
    assert json.loads(listed.stdout or "[]") == []  # the good file was not stored either


def _block(text: str, name: str) -> str:
    """The part of ``text`` about file ``name``: up to the next file's report."""
    start = text.index(name)
    ends = [text.find(other, start + len(name)) for other in BAD if other != name]
    return text[start:min([e for e in ends if e > 0], default=len(text))]
