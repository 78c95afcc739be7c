"""The shape of the command line (issue 31, point 9): ids as arguments, files told from
ids and a missing one said so, did-you-mean for task names, no store created by reading,
no silent local store under --api, params in `dagq.Client.submit`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from dagq.cli.exits import FAILED, NOT_FOUND, USAGE
from tests.cli.kit import dagq, define, store_env

ONE = "name: one\ntasks:\n  - name: prepare\n    kwargs: {cmd: 'true'}\n"


def test_tasks_takes_the_id_as_an_argument_and_keeps_the_old_flag(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    assert dagq(env, "submit", str(define(tmp_path, "one.yaml", ONE)), "--id", "one-1") \
        .returncode == 0
    for args in (["tasks", "one-1"], ["tasks", "--workflow", "one-1"]):
        out = dagq(env, *args, "--json")
        assert out.returncode == 0, out.stderr
        assert [t["name"] for t in json.loads(out.stdout)] == ["prepare"]
    assert "--workflow" not in dagq(env, "tasks", "--help").stdout  # hidden
    assert dagq(env, "tasks").returncode == USAGE


def test_did_you_mean_for_task_names(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    assert dagq(env, "submit", str(define(tmp_path, "one.yaml", ONE)), "--id", "one-1") \
        .returncode == 0
    out = dagq(env, "task", "one-1", "prepaer")
    assert out.returncode == NOT_FOUND and "did you mean 'prepare'?" in out.stderr


def test_a_missing_file_is_not_a_definition_problem_nor_an_id(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    for args in (["graph", "flows/missing.yaml"], ["graph", "missing.yaml"],
                 ["validate", "missing.yaml"], ["submit", "missing.yaml"],
                 ["run", "missing.yaml"]):
        out = dagq(env, *args, cwd=tmp_path)
        assert out.returncode == NOT_FOUND, (args, out)
        assert "no such file" in out.stderr and "problem" not in out.stderr, out.stderr
        assert "no workflow" not in out.stderr


def test_reading_commands_create_no_store(tmp_path: Path) -> None:
    env = {k: v for k, v in store_env(tmp_path).items() if k != "DAGQ_STORE"}
    out = dagq(env, "list", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout == ""
    assert "no store" in out.stderr
    assert dagq(env, "status", "x", cwd=tmp_path).returncode == NOT_FOUND
    assert not (tmp_path / ".dagq").exists()
    missing = tmp_path / "nonexistent" / "dir"
    out = dagq(env, "--store", f"sqlite:{missing / 'x.db'}", "list", cwd=tmp_path)
    assert out.returncode == FAILED and "does not exist" in out.stderr
    assert not missing.parent.exists()


def test_api_run_and_doctor_refuse_instead_of_using_the_local_store(tmp_path: Path) -> None:
    env = store_env(tmp_path)
    path = define(tmp_path, "one.yaml", ONE)
    for args in (["run", str(path)], ["doctor"]):
        out = dagq(env, "--api", "http://127.0.0.1:9", *args, cwd=tmp_path)
        assert out.returncode == USAGE and "--api" in out.stderr, out
    assert not (tmp_path / "x.db").exists()


def test_remote_client_submit_sends_params() -> None:
    from dagq import Client

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"id": "p-1", "created": True})

    client = Client("http://api.test")
    client._http = httpx.Client(transport=httpx.MockTransport(answer))
    done = client.submit({"name": "p", "tasks": []}, workflow_id="p-1", params={"n": 3})
    assert done.id == "p-1"
    assert json.loads(seen[0].url.params["params"]) == {"n": 3}
