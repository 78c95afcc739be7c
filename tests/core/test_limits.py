"""Azure's limits as pure checks: each exactly at the limit, and one over."""

from __future__ import annotations

import pytest

from dagq.core import limits
from dagq.core.name_rules import workflow_id_problem, workflow_name_problem
from dagq.core.parse import definition_from_dict
from dagq.errors import DefinitionError


def test_blob_names_at_and_over_the_length_limit() -> None:
    assert limits.blob_name_problem("a" * limits.BLOB_NAME_MAX_CHARS) is None
    over = limits.blob_name_problem("a" * (limits.BLOB_NAME_MAX_CHARS + 1))
    assert over is not None and "1024" in over


def test_blob_names_at_and_over_the_segment_limit() -> None:
    assert limits.blob_name_problem("/".join(["a"] * limits.BLOB_NAME_MAX_SEGMENTS)) is None
    assert limits.blob_name_problem("/".join(["a"] * (limits.BLOB_NAME_MAX_SEGMENTS + 1)))


@pytest.mark.parametrize("name", ["a/../b", "a/./b", "x.", "a//b", "dir/", ""])
def test_blob_names_the_service_would_rewrite(name: str) -> None:
    assert limits.blob_name_problem(name) is not None


def test_table_keys_at_and_over_1_kib() -> None:
    assert limits.table_key_problem("k" * 512, "key") is None  # 2 bytes per character
    over = limits.table_key_problem("k" * 513, "key")
    assert over is not None and "1024" in over
    assert limits.table_key_problem("a/b", "key") is not None


def test_table_string_properties_at_and_over_64_kib() -> None:
    entity: dict[str, object] = {"PartitionKey": "p", "RowKey": "r", "json": "x" * 32768}
    assert limits.entity_problem(entity, "record") is None
    entity["json"] = "x" * 32769
    assert "65536" in (limits.entity_problem(entity, "record") or "")


def test_service_bus_ids_at_and_over_128() -> None:
    assert limits.service_bus_id_problem("i" * 128, "message id") is None
    assert limits.service_bus_id_problem("i" * 129, "message id") is not None


def test_base64_body_fits_the_storage_queue_message() -> None:
    import base64

    encoded = base64.b64encode(b"x" * limits.STORAGE_QUEUE_BODY_BYTES)
    assert len(encoded) == limits.STORAGE_QUEUE_MESSAGE_BYTES


def test_workflow_ids_at_and_over_the_limit() -> None:
    assert workflow_id_problem("w" * limits.WORKFLOW_ID_MAX_CHARS) is None
    over = workflow_id_problem("w" * (limits.WORKFLOW_ID_MAX_CHARS + 1))
    assert over is not None and "201 characters" in over and "w" * 100 not in over


@pytest.mark.parametrize("bad", ["wf.", "-wf", "wf\n", "a/b", ""])
def test_workflow_ids_must_start_and_end_with_a_letter_or_digit(bad: str) -> None:
    assert workflow_id_problem(bad) is not None


def test_workflow_names_at_and_over_the_limit_are_reported_at_validation() -> None:
    task = [{"name": "a", "kwargs": {"cmd": "true"}}]
    definition_from_dict({"name": "n" * limits.WORKFLOW_NAME_MAX_CHARS, "tasks": task})
    with pytest.raises(DefinitionError) as err:
        definition_from_dict({"name": "n" * 40_000, "tasks": task})
    assert "40000 characters" in str(err.value) and len(str(err.value)) < 400
    assert workflow_name_problem("n" * 201) is not None


def test_task_names_too_long_once_encoded_are_reported_at_validation() -> None:
    ok = "é" * (limits.SEGMENT_MAX_CHARS // 6)
    definition_from_dict({"name": "w", "tasks": [{"name": ok, "kwargs": {"cmd": "true"}}]})
    with pytest.raises(DefinitionError) as err:
        definition_from_dict({"name": "w", "tasks": [{"name": ok + "é",
                                                      "kwargs": {"cmd": "true"}}]})
    assert "tasks[0].name" in str(err.value)
