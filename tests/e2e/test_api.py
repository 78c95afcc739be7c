"""The HTTP API over a real loopback socket: ``dagq serve`` on the embedded store, driven
by the CLI with ``--api``, by ``dagq.Client`` and by plain HTTP."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dagq import Client
from dagq.core.parse import load_definition
from dagq.errors import DefinitionError, IdConflict, RemoteError, TaskError, WorkflowNotFound
from tests.e2e.api import Served, check_cli_parity, parity_workload, serve
from tests.e2e.harness import Dagq, eventually

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(cluster: Dagq) -> Iterator[Served]:
    """``dagq serve`` on the module's cluster store."""
    served = serve(cluster)
    yield served
    served.proc.stop()


def test_every_cli_verb_gives_the_same_answer_over_the_api(cluster: Dagq, api: Served) -> None:
    check_cli_parity(cluster, api.url)


def test_python_client_submits_waits_and_reads_outputs_and_files(cluster: Dagq, api: Served,
                                                                tmp_path: Path) -> None:
    path = parity_workload(cluster, "py")
    with Client(api.url) as client:
        run = client.submit(path, workflow_id="py-1")
        assert (run.id, run.created) == ("py-1", True)
        assert client.submit(path, workflow_id="py-1").created is False
        final = client.wait(run.id, timeout_s=120)
        assert final["status"] == "failed" and [c["id"] for c in final["children"]] == [
            "py-1~child~1"]
        assert client.output(run.id, "make") == {"rows": 3, "tag": "x"}
        assert client.output(run.id, "breaks") is None
        assert {t["name"]: t["status"] for t in client.tasks(run.id)} == {
            "make": "completed", "child": "completed", "breaks": "failed"}
        assert [t["name"] for t in client.tasks(run.id, status="failed")] == ["breaks"]
        files = client.files(run.id, "make")
        assert [(f["path"], f["size"]) for f in files] == [("a.txt", 4), ("sub/b c.txt", 4)]
        assert client.file(run.id, "make", "sub/b c.txt") == b"two\n"
        assert files[1]["md5"] == hashlib.md5(b"two\n").hexdigest()
        written = client.download_files(run.id, "make", tmp_path / "dl")
        assert sorted(p.relative_to(tmp_path / "dl").as_posix() for p in written) == [
            "a.txt", "sub/b c.txt"]
        assert any(w["id"] == "py-1" for w in client.list_workflows(status="failed"))
        # the definition as text and as an object; errors are the direct client's
        text = "name: t\ntasks:\n  - {name: a, kwargs: {cmd: 'echo 5 > $DAGQ_OUTPUT_FILE'}}\n"
        for defn in (text, load_definition(text), {"name": "t", "tasks": [
                {"name": "a", "kwargs": {"cmd": "echo 5 > $DAGQ_OUTPUT_FILE"}}]}):
            wf = client.submit(defn).id
            assert client.wait(wf, timeout_s=120)["status"] == "completed"
            assert client.output(wf, "a") == 5
        with pytest.raises(IdConflict, match="py-1"):
            client.submit(text, workflow_id="py-1")
        with pytest.raises(DefinitionError) as info:
            client.submit("name: x\ntasks:\n  - {name: a, depends_on: [a]}\n")
        assert info.value.problems and info.value.problems[0].task == "a"
        with pytest.raises(WorkflowNotFound, match="nope"):
            client.status("nope")
        with pytest.raises(TaskError, match="zz"):
            client.output(run.id, "zz")


def test_bounded_wait_ends_at_its_timeout_or_at_the_end(cluster: Dagq, api: Served) -> None:
    slow = cluster.define("nap", [{"name": "nap", "kwargs": {"cmd": "sleep 60"}}])
    with Client(api.url) as client:
        wf = client.submit(slow).id
        eventually(lambda: cluster.statuses(wf)["nap"] == "running", "nap to run")
        assert client.wait(wf, timeout_s=1.5)["status"] == "running"  # the time ran out
        answer = httpx.get(f"{api.url}/workflows/{wf}", params={"wait": "1"}, timeout=30)
        assert (answer.status_code, answer.json()["status"]) == (200, "running")
        client.cancel(wf)
        assert client.wait(wf, timeout_s=120)["status"] == "cancelled"  # ended before that
        answer = httpx.get(f"{api.url}/workflows/{wf}", params={"wait": "200"}, timeout=30)
        assert answer.json()["status"] == "cancelled"  # already ended: at once
        too_long = httpx.get(f"{api.url}/workflows/{wf}", params={"wait": "230"}, timeout=30)
        assert too_long.status_code == 400 and "wait" in too_long.json()["error"]


KEY = "s3cret-key-0123456789"


def test_a_key_guards_the_api(dagq: Dagq) -> None:
    served = serve(dagq, "--key", KEY)
    no_key = httpx.get(f"{served.url}/workflows", timeout=30)
    assert no_key.status_code == 401 and no_key.json()["code"] == "unauthorized"
    assert httpx.get(f"{served.url}/workflows", headers={"x-functions-key": "nope"},
                     timeout=30).status_code == 401
    assert httpx.get(f"{served.url}/workflows?code={KEY}", timeout=30).status_code == 200
    with Client(served.url, key=KEY) as client:
        assert client.list_workflows() == []
    with Client(served.url) as client, pytest.raises(RemoteError, match="DAGQ_API_KEY"):
        client.list_workflows()
    res = dagq.run("--api", served.url, "list", "--json", env={"DAGQ_API_KEY": KEY})
    assert (res.returncode, res.stdout.strip()) == (0, "[]")
    res = dagq.run("--api", served.url, "list")
    assert res.returncode == 1 and "401" not in res.stderr and "DAGQ_API_KEY" in res.stderr
    refused = dagq.run("serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode != 0 and "--key" in refused.stderr
    port = served.url.rsplit(":", 1)[1].split("/")[0]
    taken = dagq.run("serve", "--port", port)
    assert taken.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in taken.stderr
    assert "Traceback" not in taken.stderr
