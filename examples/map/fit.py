"""Fit a line to one shard: ``python fit.py PATH ROWS`` (the fields of the mapped task's
item, written ``{item.path} {item.size}`` in pipeline.yaml); publish the loss."""

import sys

from steps import fit

from dagq.task import set_output

result = fit({"path": sys.argv[1], "size": int(sys.argv[2])})
print(f"{result['path']}: {result['rows']} rows, slope {result['slope']}, "
      f"loss {result['loss']}")
set_output(result)
