"""The pure rules of concurrency keys and priorities (dagq.core.concurrency,
dagq.core.priority): key rendering, the drain order's starvation rule, band queues
decided by the graph (also after a state's round trip through its stored form)."""

from __future__ import annotations

import pytest

from dagq.core import engine
from dagq.core.concurrency import render_key
from dagq.core.engine import loads
from dagq.core.engine.codec import encode_state
from dagq.core.parse import definition_to_dict, load_definition
from dagq.core.priority import LOW_FIRST_EVERY, base_queue, drain_order, split_band


def test_keys_render_named_single_placeholders_and_text() -> None:
    assert render_key("{params.dataset}", {"dataset": "x"}, (False, None)) == "dataset=x"
    assert render_key("host-{item.host}", {}, (True, {"host": "g7"})) == "host-g7"
    assert render_key("{item}", {}, (True, 3)) == "item=3"
    with pytest.raises(ValueError, match="no parameter 'user'"):
        render_key("{params.user}", {}, (False, None))


def test_every_band_gets_one_take_in_eight() -> None:
    orders = [drain_order(k) for k in range(LOW_FIRST_EVERY)]
    assert sum(o[0] == "low" for o in orders) == 1
    assert sum(o[0] == "normal" for o in orders) == 1
    assert sum(o[0] == "high" for o in orders) == LOW_FIRST_EVERY - 2
    assert split_band("gpu~high") == ("gpu", "high") and base_queue("gpu~low") == "gpu"


def test_band_queues_survive_the_stored_form() -> None:
    defn = load_definition("""
name: p
priority: low
concurrency: {key: "{params.d}", limit: 2}
params: {d: x}
tasks:
  - {name: a, kwargs: {cmd: echo}, priority: high, queue: gpu}
  - {name: b, kwargs: {cmd: echo}}
  - {name: c, kwargs: {cmd: echo}, priority: normal}
""")
    assert load_definition(str(definition_to_dict(defn)).replace("'", '"')) == defn
    state = engine.create(defn, "w", 0.0)
    assert state.graph.queue == ["gpu~high", "default~low", "default"]
    again = loads(encode_state(state))
    assert again.graph.queue == ["gpu~high", "default~low", "default"]
    assert again.definition.concurrency == {"key": "{params.d}", "limit": 2}
