"""Benchmark of the pure engine: completions applied per second and state size.

Workflow shape: one root, N parallel middle tasks, one sink depending on all of them
(fan-out/fan-in). Completions are applied in batches (default 32) the way the
coordinator does, clearing the outbox after each batch as the runtime would. State
serialisation is timed separately: ``dumps`` as every later write pays it (the
definition's encoding is cached in the state) and the first one; ``loads`` with the
definition already decoded (a re-read of the same run) and cold. Sizes are taken
mid-run (half of the middle tasks done, outbox cleared) and at the end.

Run: ``.venv/bin/python bench/core_bench.py [--sizes 1000,10000,100000] [--batch 32]``
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import TypeVar

from dagq.core import engine
from dagq.core.engine import Completion, dumps, loads
from dagq.core.engine.codec import clear_definition_cache
from dagq.core.model import TaskDef, WorkflowDef

T = TypeVar("T")


def fan_out_fan_in(n: int) -> WorkflowDef:
    """root -> n middle tasks -> sink."""
    mids = tuple(
        TaskDef(f"mid-{i:06d}", kwargs={"cmd": f"python work.py --shard {i}"},
                depends_on=("root",))
        for i in range(n))
    sink = TaskDef("sink", kwargs={"cmd": "python reduce.py"},
                   depends_on=tuple(t.name for t in mids))
    return WorkflowDef("fan", (TaskDef("root", kwargs={"cmd": "python split.py"}), *mids, sink))


def run(n: int, batch: int, keep_gc: bool = False) -> dict[str, float]:
    """Drive one fan-out/fan-in of ``n`` middle tasks to completion; return figures."""
    defn = fan_out_fan_in(n)
    t0 = 1_800_000_000.0
    state = engine.create(defn, "bench-wf", t0)
    engine.start(state, t0)
    engine.clear_outbox(state, list(state.outbox))
    names = [f"mid-{i:06d}" for i in range(n)]
    # (task names, first index) per batch; completions are built just before each
    # batch, outside the timing, as a coordinator decodes them from messages
    plan = [(["root"], 0)] + [(names[k:k + batch], k) for k in range(0, n, batch)]
    plan.append((["sink"], 0))
    half = 1 + (len(plan) - 2) // 2
    mid_state: bytes = b""
    applied = 0
    elapsed = 0.0
    gc.collect()
    if not keep_gc:
        gc.disable()  # measure the engine, not the collector's scans of a big heap
    try:
        for b_no, (group, first) in enumerate(plan):
            comps = [Completion(name, 1, True, output={"rows": i})
                     for i, name in enumerate(group, first)]
            now = t0 + 1 + b_no * 0.01
            t = time.perf_counter()
            fx = engine.apply(state, comps, now)
            engine.clear_outbox(state, [d.key for d in fx.dispatched])
            elapsed += time.perf_counter() - t
            applied += len(comps)
            if b_no == half:
                mid_state = dumps(state)
    finally:
        gc.enable()
    assert state.status == "completed", state.status
    state.def_blob = None  # as after create: the definition is not encoded yet
    dump_cold, final = timed(lambda: dumps(state))
    dump_s, final = timed(lambda: dumps(state))
    clear_definition_cache()
    load_cold, loaded = timed(lambda: loads(final))
    load_s, loaded = timed(lambda: loads(final))
    assert loaded.counts() == state.counts()
    tasks = n + 2
    return {
        "tasks": tasks, "completions": applied, "seconds": elapsed,
        "per_s": applied / elapsed, "us_per": elapsed / applied * 1e6,
        "mid_bytes": len(mid_state), "final_bytes": len(final),
        "mid_bpt": len(mid_state) / tasks, "final_bpt": len(final) / tasks,
        "dumps_cold_ms": dump_cold * 1000, "dumps_ms": dump_s * 1000,
        "loads_cold_ms": load_cold * 1000, "loads_ms": load_s * 1000,
    }


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds one call of ``fn`` took, and its result."""
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    """Parse arguments, run every size, print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    ap.add_argument("--gc", action="store_true", help="leave the garbage collector on")
    args = ap.parse_args()
    print(f"fan-out/fan-in, batches of {args.batch}, best of {args.repeat}, "
          f"gc {'on' if args.gc else 'off'}; times in ms\n")
    print(f"{'tasks':>8} {'compl/s':>8} {'us/compl':>8} {'vs 1st':>6} {'mid B':>10} "
          f"{'B/task':>6} {'end B':>10} {'B/task':>6} {'dumps':>6} {'(1st)':>6} "
          f"{'loads':>6} {'(cold)':>6}")
    base = None
    for n in (int(x) for x in args.sizes.split(",")):
        runs = [run(n, args.batch, args.gc) for _ in range(args.repeat)]
        r = min(runs, key=lambda r: r["us_per"])
        base = base or r["us_per"]
        print(f"{r['tasks']:>8,} {r['per_s']:>8,.0f} {r['us_per']:>8.2f} "
              f"{r['us_per'] / base:>6.2f} {r['mid_bytes']:>10,} {r['mid_bpt']:>6.2f} "
              f"{r['final_bytes']:>10,} {r['final_bpt']:>6.2f} {r['dumps_ms']:>6.1f} "
              f"{r['dumps_cold_ms']:>6.1f} {r['loads_ms']:>6.1f} {r['loads_cold_ms']:>6.1f}")


if __name__ == "__main__":
    main()
