"""Contract: the task cache as stored (dagq.protocol.cache), on every backend.

An entry is saved once per key (first writer wins), read back only when it is young enough
and its output matches its digest, and a corrupt, cut or orphaned entry reads as a miss,
never as an error. An inline output is kept as its canonical JSON text (``output_json``);
a large one lives under a name of its writer's own, ``cache/KEY/RUN.ATTEMPT.json``; an
entry that is corrupt or older than a writer's ``max_age`` is replaced by that writer.
Azure Table limits (64 KiB of UTF-16 per string property) must hold for every entry
``save`` accepts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest

from dagq.core import values
from dagq.core.caching import cache_key, components, policy_of
from dagq.core.limits import TABLE_STRING_MAX_BYTES, utf16_bytes
from dagq.core.model import OutputRef
from dagq.errors import NotFound
from dagq.ports import Backend
from dagq.protocol import cache
from dagq.protocol.cache import INLINE_BYTES, MAX_COMPONENT_BYTES, RECORD_BYTES, Entry
from dagq.protocol.messages import CompletionMessage, TaskMessage

T0 = 1_700_000_000.0


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _components(inputs: dict[str, Any] | None = None, version: str = "") -> dict[str, Any]:
    policy = policy_of({"version": version}, None)
    assert policy is not None
    return components(policy, {"cmd": "train"}, {}, inputs or {"prep": {"rows": 1}},
                      "default", (False, None))


def _entry(output: Any, *, key: str | None = None, task: str = "train", at: float = T0,
           workflow: str = "ml", comps: dict[str, Any] | None = None
           ) -> tuple[Entry, bytes | None]:
    comps = comps if comps is not None else _components()
    data = values.dumps(output) if output is not None else None
    entry = Entry(key or cache_key(comps), task, workflow, f"{workflow}-1", 1, at,
                  cache.output_digest(output), output, None, comps)
    if data is not None and len(data) > INLINE_BYTES:  # what lookup gives back for it
        entry = replace(entry, output=None)
    return entry, data


def _names(backend: Backend, prefix: str) -> list[str]:
    return sorted(name for name, *_ in backend.outputs.list(prefix))


def _raw(backend: Backend, key: str) -> dict[str, Any]:
    return backend.records.get(cache.PARTITION, key)[0]


# -- save and lookup -----------------------------------------------------------------------


def test_an_inline_entry_reads_back_whole(backend: Backend, other: Backend) -> None:
    output = {"name": "é→中😀", "rows": [1, 2, None, True], "score": 0.93}  # keys sorted
    entry, data = _entry(output)
    assert cache.save(backend, entry, data) is True
    raw = _raw(backend, entry.key)
    # the canonical text: a store that reorders an object's keys cannot change the bytes
    assert raw["output_json"] == values.dumps(output).decode()
    assert "output" not in raw and "ref" not in raw
    assert raw["digest"] == _md5(values.dumps(output))
    got = cache.lookup(other, entry.key, T0 + 1, None)  # another process reads it
    assert got == entry
    assert got is not None and got.source() == "ml-1/train/1"
    assert _names(backend, "cache/") == []  # nothing stored beside the record


def test_an_inline_output_keeps_its_key_order(backend: Backend) -> None:
    # (the Azure Table adapter writes records with sorted keys: the output travels as text)
    # what a task writes: keys in its own order, nested too
    output = {"score": 0.93, "metrics": {"loss": 0.1, "acc": 0.9}, "name": "run"}
    entry, data = _entry(output)
    assert cache.save(backend, entry, data)
    got = cache.lookup(backend, entry.key, T0, None)
    assert got is not None, "a verified entry of a dict output reads as a miss"
    assert values.dumps(got.output) == data  # the bytes downstream input digests are of
    assert list(got.output) == ["score", "metrics", "name"]


@pytest.mark.parametrize("output", [{"a": 1, "b": [1, "é"]}, "text", 7, None],
                         ids=["object", "string", "number", "none"])
def test_a_record_of_the_earlier_form_with_output_still_reads(backend: Backend,
                                                              output: Any) -> None:
    # entries written before outputs were kept as text hold the value under "output"
    entry, _ = _entry(output)
    raw = {k: v for k, v in entry.to_json().items() if k != "output_json"}
    raw["output"] = output
    backend.records.put(cache.PARTITION, entry.key, raw)
    got = cache.lookup(backend, entry.key, T0, None)
    assert got == entry and got is not None and got.output == output


def test_an_entry_with_no_output_is_a_hit(backend: Backend) -> None:
    entry, data = _entry(None)
    assert entry.digest == ""
    assert cache.save(backend, entry, data)
    got = cache.lookup(backend, entry.key, T0, None)
    assert got is not None and got.output is None and got.ref is None


def test_a_large_output_is_stored_under_its_writers_name(backend: Backend,
                                                         other: Backend) -> None:
    output = {"weights": list(range(3000))}
    entry, data = _entry(output)
    assert data is not None and len(data) > INLINE_BYTES
    assert cache.save(backend, entry, data)
    name = cache.object_name(entry.key, "ml-1", "train", 1)
    assert name == f"cache/{entry.key}/ml-1/train.1.json"
    assert cache.object_name("k", "a/b", "t/x", 2) == "cache/k/a%2Fb/t%2Fx.2.json"  # segments
    assert _names(backend, "cache/") == [name]
    assert backend.outputs.get(name) == data
    raw = _raw(backend, entry.key)
    assert "output" not in raw and "output_json" not in raw
    assert raw["ref"] == [name, _md5(data), len(data)]
    got = cache.lookup(other, entry.key, T0, None)
    assert got is not None
    assert got.output is None and got.ref == OutputRef(name, _md5(data), len(data))
    assert got.digest == _md5(data)
    assert json.loads(other.outputs.get(got.ref.name)) == output


def test_an_output_of_exactly_inline_bytes_stays_in_the_record(backend: Backend) -> None:
    text = "x" * (INLINE_BYTES - 2)  # two quotes: INLINE_BYTES canonical bytes
    entry, data = _entry(text)
    assert data is not None and len(data) == INLINE_BYTES
    assert cache.save(backend, entry, data)
    assert _raw(backend, entry.key)["output_json"] == f'"{text}"'
    assert _names(backend, "cache/") == []
    bigger, more = _entry(text + "x", key="k-bigger")
    assert cache.save(backend, bigger, more)
    assert "ref" in _raw(backend, "k-bigger")
    assert "output_json" not in _raw(backend, "k-bigger")


def test_the_first_writer_wins(backend: Backend, other: Backend) -> None:
    first, data = _entry({"v": 1})
    second = replace(first, workflow_id="ml-2", attempt=3, created_at=T0 + 5,
                     output={"v": 2}, digest=cache.output_digest({"v": 2}))
    assert cache.save(backend, first, data) is True
    assert cache.save(other, second, values.dumps({"v": 2})) is False
    got = cache.lookup(backend, first.key, T0 + 10, None)
    assert got == first
    assert _names(backend, "cache/") == []
    # the loser wrote no pointer either: the plan compares with the winner
    assert [k for k, _ in backend.records.list(cache.task_partition("ml"))] == [
        f"train/{round(T0 * 1000):013d}"]


def test_the_first_writer_wins_for_large_entries_too(backend: Backend, other: Backend) -> None:
    first, data = _entry({"w": list(range(3000))})
    assert cache.save(backend, first, data)
    late = {"w": list(range(1, 3001))}
    second, late_data = _entry(late, key=first.key, at=T0 + 5)
    second = replace(second, workflow_id="ml-2", attempt=3)  # another run
    assert cache.save(other, second, late_data) is False
    got = cache.lookup(backend, first.key, T0 + 10, None)
    # the winner's record still verifies and still reads the winner's bytes
    assert got is not None and got.digest == first.digest
    assert got.ref is not None and got.ref.name == cache.object_name(first.key, "ml-1", "train", 1)
    assert backend.outputs.get(got.ref.name) == data
    # and the loser removed its own object
    assert _names(backend, "cache/") == [got.ref.name]


def test_two_tasks_of_one_run_with_one_key_leave_a_usable_large_entry(
        backend: Backend, other: Backend) -> None:
    # the key holds neither task nor workflow name: two tasks of one run doing the same
    # work (attempt 1 both) compute one key
    first, data = _entry({"w": list(range(3000))}, task="fit-a")
    second = replace(first, task="fit-b", created_at=T0 + 5)
    assert cache.save(backend, first, data)
    assert cache.save(other, second, data) is False
    got = cache.lookup(backend, first.key, T0 + 10, None)
    assert got is not None, (
        "the loser's object name is the winner's (object_name has no task): writing it "
        "and deleting it on losing removed the winner's bytes")


def test_a_missing_key_is_a_miss(backend: Backend) -> None:
    assert cache.lookup(backend, "0" * 32, T0, None) is None
    assert cache.entries(backend) == []
    assert cache.latest_components(backend, "ml") == {}


def test_max_age(backend: Backend) -> None:
    entry, data = _entry({"v": 1})
    cache.save(backend, entry, data)
    assert cache.lookup(backend, entry.key, T0 + 100, None) == entry
    assert cache.lookup(backend, entry.key, T0 + 100, 100.0) == entry  # exactly max_age
    assert cache.lookup(backend, entry.key, T0 + 100.5, 100.0) is None
    assert cache.lookup(backend, entry.key, T0 + 100, 0.0) is None
    # an expired entry is not removed: a task with a longer max_age still uses it
    assert cache.lookup(backend, entry.key, T0 + 100, 7 * 86400.0) == entry


# -- corrupt entries are misses ----------------------------------------------------------


@pytest.mark.parametrize("damage", [
    {"drop": "task"}, {"attempt": "first"}, {"created_at": "yesterday"},
    {"attempt": None}, {"created_at": [1]}, {"ref": [1]}, {"ref": ["cache/x.json", "m", "big"]},
    {"drop": "key"}, {"drop": "digest"}, {"components": "abc"}, {"output_json": '{"v": '},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_a_malformed_record_is_a_miss(backend: Backend, damage: dict[str, Any],
                                      caplog: pytest.LogCaptureFixture) -> None:
    entry, _ = _entry({"v": 1})
    raw = entry.to_json()
    raw.update({k: v for k, v in damage.items() if k != "drop"})
    raw.pop(damage.get("drop", ""), None)
    backend.records.put(cache.PARTITION, entry.key, raw)
    assert cache.lookup(backend, entry.key, T0, None) is None
    assert cache.entries(backend) == []  # listings skip it too
    assert "malformed" in caplog.text or "cannot be used" in caplog.text


def test_a_record_whose_output_does_not_match_its_digest_is_a_miss(backend: Backend) -> None:
    entry, data = _entry({"v": 1})
    cache.save(backend, entry, data)
    raw = _raw(backend, entry.key)
    assert raw["output_json"] == '{"v":1}'
    backend.records.put(cache.PARTITION, entry.key, {**raw, "output_json": '{"v":2}'})
    assert cache.lookup(backend, entry.key, T0, None) is None
    backend.records.put(cache.PARTITION, entry.key, {**raw, "digest": "0" * 32})
    assert cache.lookup(backend, entry.key, T0, None) is None
    no_text = {k: v for k, v in raw.items() if k != "output_json"}
    backend.records.put(cache.PARTITION, entry.key, no_text)  # output: null
    assert cache.lookup(backend, entry.key, T0, None) is None
    backend.records.put(cache.PARTITION, entry.key, {**no_text, "output": {"v": 2}})
    assert cache.lookup(backend, entry.key, T0, None) is None
    backend.records.put(cache.PARTITION, entry.key, raw)
    assert cache.lookup(backend, entry.key, T0, None) == entry  # as stored: a hit again


def test_a_large_entry_whose_object_is_gone_or_altered_is_a_miss(backend: Backend) -> None:
    entry, data = _entry({"w": list(range(3000))})
    assert data is not None
    cache.save(backend, entry, data)
    name = cache.object_name(entry.key, entry.workflow_id, entry.task, entry.attempt)
    altered = data.replace(b"2999", b"2998")
    backend.outputs.put(name, altered)
    assert cache.lookup(backend, entry.key, T0, None) is None  # MD5 differs from the ref
    cut = data[:-10]
    backend.outputs.put(name, cut)
    assert cache.lookup(backend, entry.key, T0, None) is None
    backend.outputs.delete(name)
    assert cache.lookup(backend, entry.key, T0, None) is None
    # a record re-pointed at the altered bytes (ref MD5 updated, digest not) is a miss too
    backend.outputs.put(name, altered)
    raw = _raw(backend, entry.key)
    backend.records.put(cache.PARTITION, entry.key,
                        {**raw, "ref": [name, _md5(altered), len(altered)]})
    assert cache.lookup(backend, entry.key, T0, None) is None
    backend.records.put(cache.PARTITION, entry.key, raw)
    backend.outputs.put(name, data)
    assert cache.lookup(backend, entry.key, T0, None) is not None  # restored: a hit


# -- listings and deletion -----------------------------------------------------------------


def test_entries_are_listed_oldest_first(backend: Backend) -> None:
    saved = []
    for i, at in enumerate([T0 + 30, T0 + 10, T0 + 20, T0 + 15.5]):
        entry, data = _entry({"i": i}, key=f"{'f' if i % 2 else 'a'}{i:031d}", at=at,
                             task=f"t{i}")
        assert cache.save(backend, entry, data)
        saved.append(entry)
    big, big_data = _entry({"w": list(range(3000))}, key="b" * 32, at=T0 + 1)
    cache.save(backend, big, big_data)
    backend.records.put(cache.PARTITION, "c" * 32, {"key": "c" * 32})  # malformed: skipped
    listed = cache.entries(backend)
    assert [e.created_at for e in listed] == [T0 + 1, T0 + 10, T0 + 15.5, T0 + 20, T0 + 30]
    assert listed[0].ref is not None and listed[0].output is None
    assert listed[1:] == sorted(saved, key=lambda e: e.created_at)


def test_latest_components_are_the_newest_per_task(backend: Backend) -> None:
    old = _components(version="1")
    new = _components(version="2")
    prep = _components(inputs={})
    for key, task, at, comps in [("k1", "train", T0 + 1, old), ("k3", "train", T0 + 300, new),
                                 ("k2", "train", T0 + 20, old), ("k4", "prep", T0, prep),
                                 ("k5", "train[0]", T0 + 9, old)]:
        entry, data = _entry({"k": key}, key=key, task=task, at=at, comps=comps)
        assert cache.save(backend, entry, data)
    other_wf, data = _entry({"x": 1}, key="k6", task="train", at=T0 + 999, workflow="etl",
                            comps=prep)
    cache.save(backend, other_wf, data)
    assert cache.latest_components(backend, "ml") == {
        "train": new, "prep": prep, "train[0]": old}
    assert cache.latest_components(backend, "etl") == {"train": prep}
    assert cache.latest_components(backend, "none") == {}


def test_delete_removes_the_record_the_object_and_the_pointer(backend: Backend) -> None:
    big, data = _entry({"w": list(range(3000))}, key="big")
    small, small_data = _entry({"v": 1}, key="small", at=T0 + 1)
    cache.save(backend, big, data)
    cache.save(backend, small, small_data)
    (stored,) = [e for e in cache.entries(backend) if e.key == "big"]
    cache.delete(backend, stored)
    with pytest.raises(NotFound):
        backend.records.get(cache.PARTITION, "big")
    with pytest.raises(NotFound):
        backend.outputs.get(cache.object_name("big", "ml-1", "train", 1))
    assert cache.lookup(backend, "big", T0, None) is None
    assert [e.key for e in cache.entries(backend)] == ["small"]
    assert [k for k, _ in backend.records.list(cache.task_partition("ml"))] == [
        f"train/{round((T0 + 1) * 1000):013d}"]
    cache.delete(backend, stored)  # again: nothing left, no error
    # the key is free again: a new result can be stored under it
    assert cache.save(backend, replace(big, created_at=T0 + 2), data)
    assert cache.lookup(backend, "big", T0 + 3, None) is not None


def test_large_components_are_kept_as_one_inputs_digest(backend: Backend) -> None:
    inputs = {f"upstream-{i:04d}": {"i": i} for i in range(400)}
    comps = _components(inputs=inputs)
    assert len(json.dumps(comps)) > MAX_COMPONENT_BYTES
    entry, data = _entry({"v": 1}, comps=comps)
    assert cache.save(backend, entry, data)
    stored = _raw(backend, entry.key)["components"]
    assert set(stored["inputs"]) == {"*"} and len(stored["inputs"]["*"]) == 32
    assert {k: v for k, v in stored.items() if k != "inputs"} == \
        {k: v for k, v in comps.items() if k != "inputs"}
    assert len(json.dumps(stored)) < MAX_COMPONENT_BYTES
    assert cache.latest_components(backend, "ml")["train"] == stored
    got = cache.lookup(backend, entry.key, T0, None)
    assert got is not None and got.components == stored
    # the digest stands for all inputs: another set of inputs gives another digest
    other = _components(inputs={**inputs, "upstream-0000": {"i": -1}})
    e2, d2 = _entry({"v": 1}, comps=other)
    cache.save(backend, e2, d2)
    assert _raw(backend, e2.key)["components"]["inputs"] != stored["inputs"]
    # small components are kept one input at a time
    small, small_data = _entry({"v": 1}, key="small")
    cache.save(backend, small, small_data)
    assert _raw(backend, "small")["components"]["inputs"] == _components()["inputs"]


# -- Azure Table limits ------------------------------------------------------------------


def _record_utf16(backend: Backend, key: str) -> int:
    """What the record takes in a Table string property (the JSON the adapter writes)."""
    return utf16_bytes(json.dumps(_raw(backend, key), sort_keys=True))


@pytest.mark.parametrize("char", ["é", "中", "😀", "\x01", '"'])
def test_an_inline_output_near_inline_bytes_of_any_text_is_accepted(backend: Backend,
                                                                    char: str) -> None:
    per_char = len(values.dumps(char)) - 2  # canonical bytes of one character
    text = char * ((INLINE_BYTES - 2) // per_char)
    entry, data = _entry(text, key="k" + str(ord(char)))
    assert data is not None and INLINE_BYTES - per_char < len(data) <= INLINE_BYTES
    assert cache.save(backend, entry, data)
    assert _raw(backend, entry.key)["output_json"] == values.dumps(text).decode()
    assert _record_utf16(backend, entry.key) <= TABLE_STRING_MAX_BYTES
    assert cache.lookup(backend, entry.key, T0, None) == entry


def test_an_entry_at_both_limits_fits_one_table_property(backend: Backend) -> None:
    # a fan-in of ~300 upstream tasks: components just under MAX_COMPONENT_BYTES
    inputs = {f"part-{i:04d}": {"i": i} for i in range(340)}
    while len(json.dumps(_components(inputs=inputs))) > MAX_COMPONENT_BYTES:
        inputs.popitem()
    comps = _components(inputs=inputs)
    assert len(json.dumps(comps)) > MAX_COMPONENT_BYTES - 100  # kept one by one
    text = "é" * ((INLINE_BYTES - 2) // 2)
    entry, data = _entry(text, comps=comps)
    assert data is not None and len(data) <= INLINE_BYTES
    assert cache.save(backend, entry, data)  # azurite, before: StoreError "takes ... bytes"
    assert _record_utf16(backend, entry.key) <= TABLE_STRING_MAX_BYTES
    # the record would not hold it: the output went to output storage
    got = cache.lookup(backend, entry.key, T0, None)
    assert got is not None and got.digest == entry.digest and got.output is None
    assert got.ref is not None and backend.outputs.get(got.ref.name) == data


def _utf16_of(entry: Entry) -> int:
    return utf16_bytes(json.dumps(entry.to_json(), sort_keys=True))


def test_an_output_stays_in_the_record_up_to_record_bytes(backend: Backend) -> None:
    assert RECORD_BYTES == 60 * 1024 <= TABLE_STRING_MAX_BYTES
    inputs = {f"part-{i:04d}": {"i": i} for i in range(340)}
    while len(json.dumps(_components(inputs=inputs))) > MAX_COMPONENT_BYTES:
        inputs.popitem()
    comps = _components(inputs=inputs)
    # the longest text of "é" whose record is at most RECORD_BYTES (12 bytes a character)
    n = 1
    while _utf16_of(_entry("é" * (n + 1), key="k-over", comps=comps)[0]) <= RECORD_BYTES:
        n += 1
    assert n < INLINE_BYTES // 2  # the record limit, not INLINE_BYTES, decides here
    fits, fits_data = _entry("é" * n, key="k-fits", comps=comps)
    over, over_data = _entry("é" * (n + 1), key="k-over", comps=comps)
    assert cache.save(backend, fits, fits_data) and cache.save(backend, over, over_data)
    assert "ref" not in _raw(backend, "k-fits")
    assert RECORD_BYTES - 12 < _record_utf16(backend, "k-fits") <= RECORD_BYTES
    assert cache.lookup(backend, "k-fits", T0, None) == fits
    assert "output_json" not in _raw(backend, "k-over")
    got = cache.lookup(backend, "k-over", T0, None)
    assert got is not None and got.ref is not None
    assert got.ref.name == cache.object_name("k-over", "ml-1", "train", 1)
    assert backend.outputs.get(got.ref.name) == over_data


# -- replacing an entry that is not usable -------------------------------------------------


def test_a_corrupt_entry_is_replaced_by_the_next_writer(backend: Backend,
                                                        other: Backend) -> None:
    first, data = _entry({"v": 1})
    assert cache.save(backend, first, data)
    raw = _raw(backend, first.key)
    backend.records.put(cache.PARTITION, first.key, {**raw, "output_json": '{"v":666}'})
    assert cache.lookup(backend, first.key, T0, None) is None
    second = replace(first, workflow_id="ml-2", created_at=T0 + 5)
    assert cache.save(other, second, data) is True
    assert cache.lookup(backend, first.key, T0 + 10, None) == second
    # a malformed record too
    backend.records.put(cache.PARTITION, first.key, {"key": first.key})
    third = replace(first, workflow_id="ml-3", created_at=T0 + 6)
    assert cache.save(other, third, data) is True
    assert cache.lookup(backend, first.key, T0 + 10, None) == third


def test_a_large_entry_whose_object_is_gone_is_replaced(backend: Backend) -> None:
    first, data = _entry({"w": list(range(3000))})
    assert data is not None and cache.save(backend, first, data)
    backend.outputs.delete(cache.object_name(first.key, "ml-1", "train", 1))
    second = replace(first, workflow_id="ml-2", created_at=T0 + 5)
    assert cache.save(backend, second, data) is True
    got = cache.lookup(backend, first.key, T0 + 10, None)
    assert got is not None and got.workflow_id == "ml-2"
    assert got.ref is not None and got.ref.name == cache.object_name(first.key, "ml-2", "train", 1)


def test_an_entry_older_than_the_writers_max_age_is_replaced(backend: Backend) -> None:
    first, data = _entry({"v": 1})
    assert cache.save(backend, first, data)
    later = replace(first, workflow_id="ml-2", created_at=T0 + 3600)
    # young enough for this writer, or no max_age at all: the first writer's stays
    assert cache.save(backend, later, data, max_age_s=3600.0) is False
    assert cache.save(backend, later, data) is False
    assert cache.lookup(backend, first.key, T0 + 3600, None) == first
    # older than this writer's max_age: replaced
    newer = replace(first, workflow_id="ml-3", created_at=T0 + 3601)
    assert cache.save(backend, newer, data, max_age_s=3600.0) is True
    assert cache.lookup(backend, first.key, T0 + 3601, 0.0) == newer
    # the plan compares with the newest entry
    assert [k for k, _ in backend.records.list(cache.task_partition("ml"))][-1] == \
        f"train/{round((T0 + 3601) * 1000):013d}"


def test_a_writer_that_replaces_a_large_entry_keeps_its_own_object(backend: Backend) -> None:
    first, data = _entry({"w": list(range(3000))})
    assert data is not None and cache.save(backend, first, data)
    newer = replace(first, workflow_id="ml-2", created_at=T0 + 7200)
    assert cache.save(backend, newer, data, max_age_s=3600.0) is True
    got = cache.lookup(backend, first.key, T0 + 7200, 3600.0)
    assert got is not None and got.workflow_id == "ml-2"
    assert got.ref is not None and backend.outputs.get(got.ref.name) == data


# -- cache.remember (the worker's side) ------------------------------------------------


def _task(key: str) -> TaskMessage:
    return TaskMessage("ml-1", "train", 1, "ml-1/train/1", kwargs={"cmd": "train"},
                       cache={"key": key, "components": _components(), "workflow": "ml"})


@pytest.mark.parametrize("output", [{"v": 1}, list(range(3000))], ids=["small", "large"])
def test_remember_stores_a_usable_entry_from_an_inline_completion(backend: Backend,
                                                                  output: Any) -> None:
    done = CompletionMessage("ml-1", "train", 1, True, output=output)
    cache.remember(backend, _task("k"), done, T0)
    got = cache.lookup(backend, "k", T0, None)
    assert got is not None and got.source() == "ml-1/train/1"
    assert (got.ref is not None) == (len(values.dumps(output)) > INLINE_BYTES)


@pytest.mark.parametrize("output", [{"v": 1}, list(range(3000))], ids=["small", "large"])
def test_remember_stores_a_usable_entry_from_a_completion_by_reference(backend: Backend,
                                                                       output: Any) -> None:
    data = values.dumps(output)
    ref = OutputRef("outputs/ml-1/train/1.json",
                    backend.outputs.put("outputs/ml-1/train/1.json", data), len(data))
    done = CompletionMessage("ml-1", "train", 1, True, output_ref=ref)
    cache.remember(backend, _task("k"), done, T0)
    got = cache.lookup(backend, "k", T0, None)
    assert got is not None, "the entry remember() stored does not verify"
    if len(data) <= INLINE_BYTES:  # small: kept in the record
        assert got.ref is None and got.output == output
        assert _raw(backend, "k")["output_json"] == data.decode()
    else:  # large: a copy of its own, not the run's object
        assert got.ref is not None and got.ref.name == cache.object_name("k", "ml-1", "train", 1)
        assert backend.outputs.get(got.ref.name) == data


def test_remember_replaces_an_entry_older_than_the_tasks_max_age(backend: Backend) -> None:
    old = CompletionMessage("ml-0", "train", 1, True, output={"v": 0})
    cache.remember(backend, replace(_task("k"), workflow_id="ml-0"), old, T0)
    task = _task("k")
    assert task.cache is not None
    with_age = replace(task, cache={**task.cache, "max_age_s": 3600.0})
    done = CompletionMessage("ml-1", "train", 1, True, output={"v": 1})
    cache.remember(backend, with_age, done, T0 + 1800)  # young enough: stays
    got = cache.lookup(backend, "k", T0 + 1800, None)
    assert got is not None and got.output == {"v": 0}
    cache.remember(backend, task, done, T0 + 3601)  # no max_age_s: stays
    got = cache.lookup(backend, "k", T0 + 3601, None)
    assert got is not None and got.output == {"v": 0}
    cache.remember(backend, with_age, done, T0 + 3601)  # older than max_age_s: replaced
    got = cache.lookup(backend, "k", T0 + 3601, 3600.0)
    assert got is not None and got.output == {"v": 1} and got.source() == "ml-1/train/1"


def test_remember_stores_nothing_for_a_failure_a_cached_answer_or_an_uncached_task(
        backend: Backend) -> None:
    cache.remember(backend, _task("k1"), CompletionMessage("w", "t", 1, False, error="x"), T0)
    cache.remember(backend, _task("k2"), CompletionMessage("w", "t", 1, True, output=1,
                                                           cached="w0/t/1"), T0)
    plain = replace(_task("k3"), cache=None)
    cache.remember(backend, plain, CompletionMessage("w", "t", 1, True, output=1), T0)
    assert cache.entries(backend) == []
