"""Cancel and retry on the embedded store, through the real CLI (see cancel_cases)."""

from __future__ import annotations

import pytest

from tests.e2e import cancel_cases
from tests.e2e.harness import Dagq

pytestmark = pytest.mark.slow


def test_retry_is_visible_at_once_and_run_finishes_it(dagq: Dagq) -> None:
    cancel_cases.retry_is_visible_at_once_and_run_finishes_it(dagq)


def test_cancel_before_any_coordinator_runs_nothing(dagq: Dagq) -> None:
    cancel_cases.cancel_before_any_coordinator_runs_nothing(dagq)


def test_cancel_with_a_message_nobody_serves(dagq: Dagq) -> None:
    cancel_cases.cancel_with_a_message_nobody_serves(dagq)


def test_cancel_kills_an_escaped_grandchild_with_default_settings(dagq: Dagq) -> None:
    cancel_cases.cancel_kills_an_escaped_grandchild_with_default_settings(dagq)


def test_cancel_and_retry_of_finished_workflows_change_nothing(dagq: Dagq) -> None:
    cancel_cases.cancel_and_retry_of_finished_workflows_change_nothing(dagq)


def test_ctrl_c_in_run_stops_the_workflow(dagq: Dagq) -> None:
    cancel_cases.ctrl_c_in_run_stops_the_workflow(dagq)
