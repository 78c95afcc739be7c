"""A mapped task as the views show it: one folded row, box and explanation with its
instances counted per status; the instances on demand (``expand``, a ``fit[`` prefix)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagq.client import WorkflowClient
from dagq.core import engine
from dagq.core.engine import Completion, WorkflowState
from dagq.core.explain import Facts, explain
from dagq.core.folding import folded_status, label, workflow_counts
from dagq.core.model import TaskDef, WorkflowDef
from dagq.functions.http_api import http_blueprint, openapi_document
from dagq.functions.runtime import Runtime
from dagq.functions.status_api import status_blueprint
from dagq.graph.model import from_definition
from dagq.graph.render import render
from dagq.remote.client import Client
from tests.functions.host import app_of
from tests.functions.loopback import serve
from tests.views.maps import build_map, map_definition

WF = "map-views"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[WorkflowClient]:
    backend = build_map(f"sqlite:{tmp_path / 'x.db'}")
    yield WorkflowClient(backend)
    backend.close()


def mapped(items: list[object], **map_opts: object) -> WorkflowState:
    s = engine.create(WorkflowDef("m", (
        TaskDef("scan"), TaskDef("fit", depends_on=("scan",),
                                 map={"over": "inputs.scan.files", **map_opts}),
        TaskDef("reduce", depends_on=("fit",)))), "wf", 100.0)
    engine.start(s, 100.0)
    engine.apply(s, [Completion("scan", 1, True, output={"files": items})], 101.0)
    return s


def fit(s: WorkflowState) -> int:
    return s.graph.index["fit"]


def test_the_folded_status_is_running_while_an_instance_runs_then_failed_then_completed(
        ) -> None:
    s = mapped(["a", "b", "c"])
    assert folded_status(s, fit(s)) == "running"
    engine.apply(s, [Completion("fit[0]", 1, False, error="x")], 102.0)
    assert folded_status(s, fit(s)) == "running"  # fit[1] and fit[2] still run
    engine.apply(s, [Completion("fit[1]", 1, True), Completion("fit[2]", 1, True)], 103.0)
    assert folded_status(s, fit(s)) == "failed"
    ok = mapped(["a"])
    engine.apply(ok, [Completion("fit[0]", 1, True)], 102.0)
    assert folded_status(ok, fit(ok)) == "completed"
    assert folded_status(mapped([]), 1) == "completed"  # a map of no items
    before = engine.create(map_definition(), "wf", 100.0)
    assert folded_status(before, 1) == "pending"  # not expanded: its own status


def test_workflow_counts_count_instances_and_not_the_expanded_head() -> None:
    s = mapped(["a", "b"])
    engine.apply(s, [Completion("fit[0]", 1, True), Completion("fit[1]", 1, True)], 102.0)
    assert s.counts()["completed"] == 3  # scan and two instances: not the head
    assert workflow_counts(s)[3] == 3  # scan and two instances (COMPLETED is code 3)


def test_a_map_head_row_carries_its_counts_and_the_instances_are_left_out(
        client: WorkflowClient) -> None:
    page = client.task_page(WF)
    assert [r["name"] for r in page.rows] == ["scan", "fit", "reduce", "audit"]
    assert page.total == 4
    row = page.rows[1]
    assert row["map"] == {"over": "inputs.scan.files", "items": 12,
                          "counts": {"completed": 9, "failed": 2, "running": 1}}
    assert (row["status"], row["phase"], row["finished_at"]) == ("running", "queued", None)
    assert "9 completed, 2 failed (fit[3], fit[7]), 1 running" in row["note"]
    # scan, audit and nine instances; the expanded head is no task of its own
    assert page.counts == {"completed": 11, "failed": 2, "queued": 1, "upstream_failed": 1}


def test_expand_lists_each_instance_after_its_head_and_a_bracket_prefix_lists_them(
        client: WorkflowClient) -> None:
    names = [r["name"] for r in client.tasks(WF, expand=True)]
    assert names == ["scan", "fit", *[f"fit[{k}]" for k in range(12)], "reduce", "audit"]
    rows = client.tasks(WF, prefix="fit[")
    assert [r["name"] for r in rows] == [f"fit[{k}]" for k in range(12)]
    assert rows[3]["status"] == "failed" and rows[3]["map_of"] == "fit"
    assert [r["name"] for r in client.tasks(WF, prefix="fit[1")] == ["fit[1]", "fit[10]",
                                                                       "fit[11]"]
    assert [r["name"] for r in client.tasks(WF, prefix="fit")] == ["fit"]
    page = client.task_page(WF, prefix="fit[", offset=10, limit=5)
    assert [r["name"] for r in page.rows] == ["fit[10]", "fit[11]"] and page.total == 12
    assert [r["name"] for r in client.tasks(WF, status="running")] == ["fit"]
    assert [r["name"] for r in client.tasks(WF, status="failed", expand=True)] == [
        "fit[3]", "fit[7]"]


def test_attention_order_ranks_a_map_by_its_folded_status(client: WorkflowClient) -> None:
    page = client.task_page(WF, limit=2, attention_first=True)
    assert [r["name"] for r in page.rows] == ["reduce", "fit"]


def test_explain_describes_the_map_and_one_instance(client: WorkflowClient) -> None:
    (head,) = client.explain(WF, "fit")
    assert head["status"] == "running"
    text = " | ".join(head["reasons"])
    assert "mapped over 12 items of inputs.scan.files" in text
    assert "failed instances: fit[3], fit[7]" in text
    (one,) = client.explain(WF, "fit[3]")
    assert one["status"] == "failed"
    assert one["reasons"][0] == "instance 3 of map 'fit' (item: file-003.csv)"
    assert "fit 3 diverged" in one["reasons"][1]
    assert [e["task"] for e in client.explain(WF)] == ["scan", "fit", "reduce", "audit"]


def test_an_instance_waiting_for_its_maps_slot_says_so() -> None:
    s = mapped(["a", "b", "c"], max_parallelism=1)
    (e,) = explain(s, Facts(102.0), "fit[2]")
    assert e.status == "pending"
    assert "at most 1 instance(s) of 'fit' run at once" in " | ".join(e.reasons)


def test_the_graph_draws_a_map_as_one_node_with_its_counts(client: WorkflowClient) -> None:
    model = client.graph(WF)
    assert [t["name"] for t in model["tasks"]] == ["scan", "fit", "reduce", "audit"]
    node = model["tasks"][1]
    assert node["status"] == "running" and node["map"]["items"] == 12
    assert model["tasks"][2]["deps"] == ["fit"]
    mermaid = render(model, "mermaid")
    assert '["fit ×12 (9 ✓ 2 ✗ 1 ▶)"]' in mermaid and "fit[" not in mermaid
    svg = render(model, "svg")
    assert 'data-task="fit" data-status="running"' in svg and 'data-map="12"' in svg
    assert "fit ×?" in render(from_definition(map_definition()), "mermaid")
    assert label("fit", {"items": 1000, "counts": {"completed": 998, "failed": 2}}) == \
        "fit ×1000 (998 ✓ 2 ✗)"


def test_the_http_api_expands_on_demand_and_reads_an_instance_by_its_bracketed_name(
        tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'x.db'}"
    build_map(store).close()
    runtime = Runtime({"DAGQ_STORE": store})
    with serve(app_of(http_blueprint(runtime), status_blueprint(runtime))) as url:
        remote = Client(url)
        assert [r["name"] for r in remote.tasks(WF)] == ["scan", "fit", "reduce", "audit"]
        assert len(remote.tasks(WF, expand=True)) == 16
        assert remote.task_page(WF, prefix="fit[", limit=3).total == 12
        assert remote.task(WF, "fit[3]")["explanation"]["reasons"][0].startswith(
            "instance 3 of map 'fit'")
        (e,) = remote.explain(WF, "fit[7]")
        assert e["status"] == "failed"
    runtime.close()


def test_openapi_documents_expand_and_the_map_of_a_task_row() -> None:
    doc = json.loads(openapi_document())
    params = {p.get("name") for p in doc["paths"]["/workflows/{id}/tasks"]["get"]["parameters"]}
    assert "expand" in params
    task = doc["components"]["schemas"]["Task"]["properties"]
    assert {"map", "map_of"} <= set(task)
    graph_task = doc["components"]["schemas"]["Graph"]["properties"]["tasks"]["items"]
    assert "map" in graph_task["properties"]
