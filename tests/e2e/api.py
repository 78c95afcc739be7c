"""Helpers of the HTTP end-to-end tests: ``dagq serve`` on a test store, and the CLI run
once on the store and once through ``--api`` with every answer compared.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.harness import Dagq, Proc, eventually

_LISTENING = re.compile(r"dagq API on (http://\S+/api)")


@dataclass
class Served:
    """A running ``dagq serve`` and its URL."""

    proc: Proc
    url: str


def serve(d: Dagq, *args: str) -> Served:
    """Start ``dagq serve --port 0 ARGS`` on ``d``'s store; wait until it listens."""
    proc = d.start("serve", "serve", "--port", "0", *args)

    def url() -> str | None:
        if proc.popen.poll() is not None:
            raise AssertionError(f"dagq serve exited {proc.popen.returncode}:\n{proc.text()}")
        m = _LISTENING.search(proc.text())
        return m.group(1) if m else None

    return Served(proc, eventually(url, "dagq serve to listen", 60.0, 0.1))


def parity_workload(d: Dagq, name: str = "api") -> Path:
    """A definition with an output, synced files, a failing task and a child workflow."""
    publish = ("mkdir -p out/sub && echo one > out/a.txt && printf 'two\\n' > 'out/sub/b c.txt'"
               " && echo '{\"rows\": 3, \"tag\": \"x\"}' > \"$DAGQ_OUTPUT_FILE\"")
    return d.define(name, [
        {"name": "make", "kwargs": {"cmd": publish, "bg_dirsync_to": "out"}},
        {"name": "child", "depends_on": ["make"],
         "workflow": {"name": "inner", "tasks": [{"name": "leaf", "kwargs": {"cmd": "true"}}]}},
        {"name": "breaks", "depends_on": ["make"],
         "kwargs": {"cmd": "echo broken >&2; exit 3"}},
    ])


def remote(d: Dagq, url: str, *args: str, cwd: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    """``dagq --api URL ARGS`` with ``DAGQ_STORE`` naming an empty store of its own, so it
    can only answer through the API."""
    decoy = {"DAGQ_STORE": f"sqlite:{d.root / 'not-the-store' / 'x.db'}"}
    return d.run("--api", url, *args, cwd=cwd, env=decoy)


def run_both(d: Dagq, url: str, *args: str, cwd: Path | None = None
             ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``dagq ARGS`` on the store and ``dagq --api URL ARGS``."""
    return d.run(*args, cwd=cwd), remote(d, url, *args, cwd=cwd)


def remote_ok(d: Dagq, url: str, *args: str) -> str:
    """``remote(...)``, asserting exit 0; its stdout."""
    res = remote(d, url, *args)
    assert res.returncode == 0, f"dagq --api {shlex.join(args)}: {res.stdout}{res.stderr}"
    return res.stdout


def assert_same(d: Dagq, url: str, *args: str, cwd: Path | None = None) -> str:
    """Both ways give the same exit code, stdout and stderr; the stdout."""
    direct, answer = run_both(d, url, *args, cwd=cwd)
    what = shlex.join(["dagq", *args])
    assert (direct.returncode, direct.stdout, direct.stderr) == (
        answer.returncode, answer.stdout, answer.stderr), (
        f"{what} differs over --api\n--- store: rc={direct.returncode}\n{direct.stdout}"
        f"{direct.stderr}\n--- api: rc={answer.returncode}\n{answer.stdout}{answer.stderr}")
    return direct.stdout


def check_cli_parity(d: Dagq, url: str, deadline_s: float = 60.0) -> None:
    """Every workflow command gives the same output, stderr and exit code over ``url``
    (``deadline_s``: how long one workflow may take to end)."""
    path = parity_workload(d)
    bad = d.write("bad.yaml", "name: bad\ntasks:\n  - {name: a, depends_on: [nowhere]}\n")
    other = d.write("other.yaml", "name: api\ntasks:\n  - {name: make, kwargs: {cmd: 'true'}}\n")
    assert remote_ok(d, url, "submit", str(path), "--id", "p1").split() == ["p1"]
    assert d.ok("submit", str(path), "--id", "p2").split() == ["p2"]
    for wf in ("p1", "p2"):
        assert d.wait_terminal(wf, deadline_s)["status"] == "failed"
    # submit: idempotent resubmission, an id conflict and an invalid file
    assert assert_same(d, url, "submit", str(path), "--id", "p1") == "p1\n"
    assert_same(d, url, "submit", str(other), "--id", "p1")
    assert_same(d, url, "submit", str(bad))
    for args in (["status", "p1", "--json"], ["status", "p1"], ["list", "--json"], ["list"],
                 ["list", "--status", "failed", "--json"], ["list", "--limit", "1", "--json"],
                 ["list", "--name", "AP", "--since", "1h", "--json"], ["list", "--name", "zz"],
                 ["tasks", "--workflow", "p1", "--json"], ["tasks", "--workflow", "p1"],
                 ["tasks", "--workflow", "p1", "--status", "failed", "--json"],
                 ["tasks", "--workflow", "p1", "--prefix", "ma", "--queue", "default", "--json"],
                 ["output", "p1", "make"], ["output", "p1", "breaks"],
                 ["files", "p1", "make", "--json"], ["files", "p1", "make"],
                 ["files", "p1", "breaks"],
                 # errors: the server's message and the same exit code
                 ["status", "nope"], ["status", "nope", "--json"], ["tasks", "--workflow", "nope"],
                 ["output", "p1", "zz"], ["output", "nope", "make"], ["files", "nope", "make"],
                 ["cancel", "nope"], ["retry", "nope"]):
        assert_same(d, url, *args)
    assert '"children"' in remote_ok(d, url, "status", "p1", "--json")
    # the verbs that follow, explain and draw a run, and read what a task printed
    for args in (["wait", "p1"], ["wait", "p1", "nope"], ["logs", "p1", "breaks"],
                 ["logs", "p1", "breaks", "--all"], ["logs", "p1", "zz"],
                 ["graph", "p1", "--format", "mermaid"]):
        assert_same(d, url, *args)
    # an explanation's reasons say "Ns ago": the two calls may fall in different seconds
    ago = re.compile(r"\d+s ago")
    for args in (["explain", "p1", "breaks"], ["task", "p1", "breaks", "--json"]):
        direct, answer = run_both(d, url, *args)
        assert (direct.returncode, ago.sub("_", direct.stdout), direct.stderr) == (
            answer.returncode, ago.sub("_", answer.stdout), answer.stderr), (direct, answer)
        assert "no retries left" in answer.stdout and " ago" in answer.stdout
    for where in ("a", "b"):
        (d.root / where).mkdir()
    direct, answer = (d.run("files", "p1", "make", "--get", "dl", cwd=d.root / "a"),
                      remote(d, url, "files", "p1", "make", "--get", "dl", cwd=d.root / "b"))
    assert (direct.returncode, direct.stderr) == (answer.returncode, answer.stderr) == (
        0, "2 file(s) from dirs/p1/make/ written to dl\n")
    for rel, text in (("a.txt", "one\n"), ("sub/b c.txt", "two\n")):
        assert (d.root / "a/dl" / rel).read_text() == (d.root / "b/dl" / rel).read_text() == text
    # control: retry and cancel report the same way; their effect is seen both ways
    direct, answer = d.run("retry", "p2"), remote(d, url, "retry", "p1")
    assert (direct.returncode, answer.returncode) == (0, 0)
    # the reset is in the state already (the counts depend on how far a coordinator got)
    assert direct.stderr.startswith("p2 running: ") and answer.stderr.startswith("p1 running: ")
    for wf in ("p1", "p2"):
        eventually(lambda wf=wf: d.tasks(wf)["breaks"]["attempt"] == 2, f"{wf} retried",
                   deadline_s)
        assert d.wait_terminal(wf, deadline_s)["status"] == "failed"
    slow = d.define("slow", [{"name": "nap", "kwargs": {"cmd": "sleep 60"}}])
    assert remote_ok(d, url, "submit", str(slow), "--id", "s1").split() == ["s1"]
    eventually(lambda: d.statuses("s1")["nap"] == "running", "s1 to run", deadline_s)
    answer = remote(d, url, "cancel", "s1")
    assert answer.returncode == 0, answer
    assert answer.stderr in ("s1 cancelled\n",  # its worker already stopped the task
                             "s1 cancelling: 1 running task(s) are being stopped\n"), answer
    assert d.wait_terminal("s1", deadline_s)["status"] == "cancelled"
