"""Combine the fits: ``inputs.fit`` is the list of every instance's output, in shard
order (``get_upstream_output("fit")`` reads it)."""

from steps import reduce

from dagq.task import get_upstream_output, set_output

result = reduce({"fit": get_upstream_output("fit")})
print(f"{result['shards']} shards, {result['rows']} rows, mean loss {result['mean_loss']}, "
      f"worst {result['worst']}")
set_output(result)
