"""Peer benchmark: the same three workflow shapes, in one run on this machine, on dagq,
Celery (canvas) and dramatiq (dramatiq-workflow), printed side by side with ratios.

    .venv/bin/python bench/peers/run.py                        # everything, defaults
    .venv/bin/python bench/peers/run.py --only dagq,celery --reps 5 --json peers.json

Shapes (every task runs the shell command ``true`` in a subprocess): fan-out 1 -> WIDTH ->
1 (tasks/s over all WIDTH + 2 tasks), a chain of CHAIN tasks (ms per hop), a lattice of
LAYERS x LAYER_WIDTH where each task depends on every task of the previous layer
(tasks/s). Each system gets two worker slots, its workers are started once, one warm-up
run of each shape at small sizes comes first, then REPS rounds of the three shapes; the
table shows the medians. dagq runs first and last so that drift of the machine shows.

dagq runs under the project's .venv (bench/runtime_bench.py's workflows and timing, its
coordinator and worker on the embedded SQLite store); the peers run under
bench/peers/.venv, made from bench/peers/requirements.txt on first use, with a Redis
server that this script starts on a free loopback port without persistence and stops.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import REDIS_URL_ENV, Sizes, log
from peer_venv import DEFAULT_VENV, ensure_venv, peer_versions
from redis_server import RedisServer, find_redis_server
from report import PEERS, reps_table, summarise, table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SYSTEMS = ("dagq", *PEERS)
RUNNERS = {"dagq": HERE / "dagq_side.py", "celery": HERE / "celery_side.py",
           "dramatiq": HERE / "dramatiq_side.py"}


def parse_args() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="repetitions per shape (median)")
    parser.add_argument("--width", type=int, default=1000, help="fan-out width")
    parser.add_argument("--chain", type=int, default=200, help="chain length")
    parser.add_argument("--layers", type=int, default=10, help="lattice layers")
    parser.add_argument("--layer-width", type=int, default=20, help="tasks per lattice layer")
    parser.add_argument("--slots", type=int, default=2, help="worker slots per system")
    parser.add_argument("--only", default=",".join(SYSTEMS),
                        help="comma-separated systems to run (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write the figures as one JSON document")
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="interpreter with the peers installed (default: "
                             "bench/peers/.venv, made from requirements.txt)")
    parser.add_argument("--dagq-python", default=str(ROOT / ".venv" / "bin" / "python"),
                        metavar="PATH", help="interpreter with dagq (default: %(default)s)")
    parser.add_argument("--dramatiq-layout", choices=("threads", "processes"),
                        default="processes",
                        help="processes: SLOTS processes x 1 thread (default: equal on "
                             "the fan-out and the lattice, faster on the chain); "
                             "threads: 1 process x SLOTS threads")
    parser.add_argument("--dagq-layout", choices=("threads", "processes"),
                        default="processes",
                        help="processes: dagq worker --processes SLOTS --concurrency 1 "
                             "(default, the layout of Celery's prefork pool and of dramatiq "
                             "here); threads: dagq worker --concurrency SLOTS")
    parser.add_argument("--redis-server", default=None, metavar="PATH",
                        help="redis-server binary (default: PATH, apt-get if root)")
    parser.add_argument("--logs", type=Path, default=None, metavar="DIR",
                        help="folder for the workers' logs (default: a temporary one)")
    args = parser.parse_args()
    args.systems = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(args.systems) - set(SYSTEMS))
    if unknown or not args.systems:
        parser.error(f"--only takes a comma-separated subset of {', '.join(SYSTEMS)}")
    if min(args.reps, args.width, args.chain, args.layers, args.layer_width, args.slots) < 1:
        parser.error("counts must be at least 1")
    return args


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "system": platform.platform(terse=True)}


def run_runner(label: str, system: str, python: str, args: argparse.Namespace,
               env: dict[str, str], logs: Path) -> dict[str, Any]:
    """Run one system's runner to completion and return its result document."""
    out = logs / f"{label}.json"
    cmd = [python, str(RUNNERS[system]), "--width", str(args.width), "--chain", str(args.chain),
           "--layers", str(args.layers), "--layer-width", str(args.layer_width),
           "--reps", str(args.reps), "--slots", str(args.slots),
           "--logs", str(logs / label), "--out", str(out)]
    if system == "dramatiq":
        cmd += ["--layout", args.dramatiq_layout]
    if system == "dagq":
        cmd += ["--layout", args.dagq_layout]
    log(f"== {label}: {shlex.join(cmd)}")
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed (exit {proc.returncode}); logs in {logs / label}")
    result: dict[str, Any] = json.loads(out.read_text())
    result["load_average"] = [load_before, os.getloadavg()[0]]
    return result


def main() -> None:
    """Prepare the peers, run every system in turn, print and write the figures."""
    args = parse_args()
    sizes = Sizes(width=args.width, chain=args.chain, layers=args.layers,
                  layer_width=args.layer_width)
    started = datetime.datetime.now().astimezone()
    logs = args.logs or Path(tempfile.mkdtemp(prefix="peer-bench-"))
    logs.mkdir(parents=True, exist_ok=True)
    peers = [s for s in PEERS if s in args.systems]
    plan = ([("dagq_first", "dagq")] if "dagq" in args.systems else []) + \
        [(p, p) for p in peers] + ([("dagq_last", "dagq")] if "dagq" in args.systems else [])

    env = dict(os.environ)
    doc: dict[str, Any] = {"date": started.isoformat(timespec="seconds"),
                           "command": shlex.join(sys.orig_argv), "machine": machine(),
                           "sizes": asdict(sizes), "reps": args.reps, "slots": args.slots,
                           "runs": {}}
    runs: dict[str, dict[str, Any]] = doc["runs"]
    with ExitStack() as stack:
        peer_python = ""
        if peers:
            peer_python = str(args.python or ensure_venv(DEFAULT_VENV))
            doc["peer_versions"] = peer_versions(Path(peer_python))
            redis = stack.enter_context(RedisServer(find_redis_server(args.redis_server)))
            doc["redis_server"] = redis.version
            env[REDIS_URL_ENV] = redis.url
            log(f"redis-server {redis.version} on {redis.url} (no persistence)")
        for label, system in plan:
            python = args.dagq_python if system == "dagq" else peer_python
            runs[label] = run_runner(label, system, python, args, env, logs)
    doc["summary"] = summarise(runs)

    info = doc["machine"]
    print(f"\n{doc['date']}, {info['cores']} cores ({info['cpu']}), Python {info['python']}, "
          f"{args.slots} worker slots per system, median of {args.reps}")
    for label, run in runs.items():
        versions = ", ".join(f"{k} {v}" for k, v in run["versions"].items())
        loads = "–".join(f"{x:.1f}" for x in run["load_average"])
        print(f"  {label}: {versions}; {run['workers']}; load average {loads}")
    if "redis_server" in doc:
        print(f"  Redis server {doc['redis_server']} on loopback, no persistence")
    print()
    print(table(doc["summary"], sizes))
    print("\nEvery repetition:\n")
    print(reps_table(runs))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
