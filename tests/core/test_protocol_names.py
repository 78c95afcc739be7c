"""Every message and session id dagq derives fits Service Bus's 128 characters, is
deterministic, and stays distinct for distinct inputs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dagq.core.engine.types import child_workflow_id
from dagq.core.limits import SERVICE_BUS_ID_MAX_CHARS, WORKFLOW_ID_MAX_CHARS
from dagq.protocol import names

IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~", min_size=1,
              max_size=WORKFLOW_ID_MAX_CHARS)
TASKS = st.text(min_size=1, max_size=200)


def _all(wf: str, task: str, attempt: int) -> list[str]:
    key = f"{wf}/{task}/{attempt}"
    child = child_workflow_id(wf, task, attempt)
    return [names.session_id(wf), names.task_message_id(key), names.done_id(key),
            names.submit_failed_id(key), names.notice_id(key),
            names.control_id(f"{wf}/start", "start"), names.request_id(wf, "retry", "n" * 32),
            names.child_retry_request_id(child, key)]


@given(IDS, TASKS, st.integers(min_value=1, max_value=10**6))
def test_every_derived_id_fits_and_is_deterministic(wf: str, task: str, attempt: int) -> None:
    ids = _all(wf, task, attempt)
    assert all(len(i) <= SERVICE_BUS_ID_MAX_CHARS for i in ids)
    assert ids == _all(wf, task, attempt)


def test_the_long_child_retry_id_of_a_plain_workflow_is_shortened() -> None:
    wf, task = "sched-nightly-feature-pipeline-eu-20261201T020000Z", "train-model"  # 138
    key = f"{wf}/{task}/3"
    raw = f"{child_workflow_id(wf, task, 3)}/retry/by/{key}"
    assert len(raw) > SERVICE_BUS_ID_MAX_CHARS
    short = names.child_retry_request_id(child_workflow_id(wf, task, 3), key)
    assert len(short) == SERVICE_BUS_ID_MAX_CHARS and short.startswith(wf)


@given(st.text(min_size=129, max_size=400), st.text(min_size=129, max_size=400))
def test_shortened_ids_of_distinct_inputs_differ(a: str, b: str) -> None:
    if a != b:
        assert names.bounded(a) != names.bounded(b)
    assert names.bounded("x" * 128) == "x" * 128
