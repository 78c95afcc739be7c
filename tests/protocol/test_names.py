"""Message and session ids: one builder each, bounded to Service Bus's 128 characters."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dagq.core.engine import child_workflow_id
from dagq.protocol import names

ids = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1,
              max_size=400)


@given(ids)
def test_every_builder_stays_within_the_limit_and_is_deterministic(value: str) -> None:
    built = [names.session_id(value), names.task_message_id(value), names.done_id(value),
             names.submit_failed_id(value), names.notice_id(value),
             names.control_id(value, "cancel"), names.request_id(value, "retry", "abc"),
             names.child_retry_request_id(value, value)]
    assert all(len(b) <= names.MAX_ID_LENGTH for b in built)
    assert names.done_id(value) == names.done_id(value)


def test_short_ids_are_kept_as_they_are() -> None:
    assert names.task_message_id("wf/a/1") == "wf/a/1"
    assert names.done_id("wf/a/1") == "wf/a/1/done"
    assert names.session_id("wf") == "wf"


def test_a_long_child_retry_id_gets_a_readable_short_form() -> None:
    parent = "nightly-feature-pipeline-eu"
    child = child_workflow_id(parent, "train-model", 1)
    key = f"{parent}/train-model/2"
    full = f"{child}/retry/by/{key}"
    short = names.child_retry_request_id(child, key)
    if len(full) > names.MAX_ID_LENGTH:
        assert len(short) == names.MAX_ID_LENGTH
        assert short.startswith(full[:60])
    else:
        assert short == full


def test_distinct_long_ids_stay_distinct() -> None:
    base = "w" * 200
    a, b = names.session_id(base + "a"), names.session_id(base + "b")
    assert a != b and len(a) == len(b) == names.MAX_ID_LENGTH


def test_the_reserved_queues_are_the_core_rules_ones() -> None:
    from dagq.core.rules import RESERVED_QUEUES

    assert names.RESERVED_QUEUES is RESERVED_QUEUES
    assert {names.COMPLETIONS, names.DEADLETTER, names.NOTIFICATIONS,
            names.EVENTS} == RESERVED_QUEUES
