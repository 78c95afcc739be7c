"""Pick the best upstream model by error."""

from dagq.task import get_upstream_outputs, set_output

results = get_upstream_outputs()
best = min(results, key=lambda name: results[name]["mae"])
print("results:", {name: r["mae"] for name, r in results.items()})
set_output({"best": best, "best_mae": results[best]["mae"]})
