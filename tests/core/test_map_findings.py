"""Mapped tasks: regression tests for two problems found while documenting them.

1. ``{item}`` in a ``kwargs`` key that ``render_kwargs`` does not render
   (``bg_dirsync_to``, ``x_...`` keys) reached the worker as the internal parameter
   name ``{params.__dagq_item}``; it is now the item's text.
2. The 16 KiB item limit counted characters of the JSON text, not bytes, although its
   message said bytes: an item of 9,000 ``é`` (18,002 bytes of UTF-8 JSON) was accepted.
"""

from __future__ import annotations

import json

import pytest

from dagq.core.mapping import MAX_ITEM_BYTES, MapError, map_spec, read_items, with_item
from dagq.core.params import render_kwargs


def test_item_in_keys_render_kwargs_leaves_alone_is_the_items_text() -> None:
    kwargs, values = with_item({"cmd": "true", "bg_dirsync_to": "out/{item.k}",
                                "x_note": "shard {item}"}, {"k": "a b"})
    rendered = render_kwargs(kwargs, values)
    assert "__dagq_item" not in json.dumps(rendered), rendered
    assert rendered["bg_dirsync_to"] == "out/a b"
    assert rendered["x_note"] == 'shard {"k":"a b"}'


def test_the_item_limit_counts_bytes_of_json() -> None:
    item = "é" * 9000
    assert len(json.dumps(item, ensure_ascii=False)) < MAX_ITEM_BYTES
    assert len(json.dumps(item, ensure_ascii=False).encode()) > MAX_ITEM_BYTES
    with pytest.raises(MapError, match="bytes of JSON"):
        read_items(map_spec({"over": "params.files"}), {}, {"files": [item]}, None)
