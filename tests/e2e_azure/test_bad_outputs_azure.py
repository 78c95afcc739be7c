"""Unusable task outputs on Azurite: each fails its attempt once with the rule, an
oversized re-encoding is stashed, and an unrelated workflow completes (real processes)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import Dagq
from tests.e2e.test_bad_outputs import run_bad_outputs

pytestmark = [pytest.mark.slow, pytest.mark.azurite]


def test_unusable_outputs_fail_once_and_harm_nobody_else_on_azurite(az: Dagq) -> None:
    run_bad_outputs(az)
