"""Pretend to scan a dataset: publish its shards, each with a path and a row count.

The list's length is known only now, at run time; the mapped ``fit`` task runs once per
shard. ``SHARDS`` (default 6) sets how many there are. (The work itself is the same
function the Python version runs, from steps.py beside this file.)
"""

import os

from steps import scan

from dagq.task import set_output

found = scan(int(os.environ.get("SHARDS", "6")))
print(f"found {len(found['shards'])} shards, {found['rows']} rows")
set_output(found)
