"""Object names: every user-chosen name is one encoded segment, so names never collide,
climb out of their place, or lose a trailing dot on the Blob service."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dagq.core import paths
from dagq.core.limits import SEGMENT_MAX_CHARS, blob_name_problem


def test_dot_segments_and_trailing_dots_are_encoded() -> None:
    assert paths.segment("x.") == "x%2E"
    assert paths.segment("x..") == "x%2E%2E"
    assert paths.segment("..") == "%2E%2E"
    assert paths.segment(".") == "%2E"
    assert paths.segment("a/../b") == "a%2F..%2Fb"
    assert paths.segment("v1.2") == "v1.2"


def test_a_task_prefix_is_not_the_start_of_another_tasks_prefix() -> None:
    ck, ck_x = paths.dir_prefix("wf", "ck"), paths.dir_prefix("wf", "ck/x")
    assert not ck_x.startswith(ck)
    assert ck == "dirs/wf/ck/"


def test_every_built_name_is_a_valid_blob_name() -> None:
    for task in ("a/../b", "x.", "..", "é", "#?\\"):
        for name in (paths.output_name("wf-1", task, 3), paths.file_name("wf-1", task, "f."),
                     paths.input_spill_name("wf-1", task, 1), paths.log_name("wf-1", task, 2),
                     paths.dir_entry(paths.dir_prefix("wf-1", task), "sub./x..")):
            assert blob_name_problem(name) is None, name


@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_the_encoding_is_injective(a: str, b: str) -> None:
    if a != b:
        assert paths.segment(a) != paths.segment(b)
    assert "/" not in paths.segment(a)


@given(st.lists(st.text(st.characters(blacklist_characters="/"), min_size=1, max_size=10),
                min_size=1, max_size=4))
def test_dir_entries_round_trip(parts: list[str]) -> None:
    prefix = paths.dir_prefix("wf", "t")
    relative = "/".join(parts)
    assert paths.dir_relative(prefix, paths.dir_entry(prefix, relative)) == relative


def test_segment_length_at_and_over_the_limit() -> None:
    at = "é" * (SEGMENT_MAX_CHARS // 6)  # 6 characters each once encoded
    assert len(paths.segment(at)) == SEGMENT_MAX_CHARS
    assert paths.segment_problem(at, "task name") is None
    over = paths.segment_problem(at + "é", "task name")
    assert over is not None and f"the limit is {SEGMENT_MAX_CHARS}" in over
