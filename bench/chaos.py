"""Chaos run: workflows under kill -9 of coordinators and workers, a store outage and two
coordinators at once, compared with a crash-free run of the same workflows.

    .venv/bin/python bench/chaos.py --store sqlite --workflows 30 --kills 120
    .venv/bin/python bench/chaos.py --store azurite --workflows 12 --kills 60

Each workflow is the crash tests' mix (fan-out, fan-in, conditions, a retried task; see
tests/e2e/workloads.py). The crash-free run gives the expected final state of every
task; the chaos run then keeps two coordinators and two workers running, and at random
intervals kills one of them with SIGKILL and starts a new one at once. Half-way through
the store goes away for a few seconds: on SQLite an exclusive lock is held (every writer
waits), on Azurite the emulator is stopped and started again on the same ports. The
last line is the summary: workflows, terminal, mismatches (a workflow or task status that
differs from the crash-free run), duplicate executions (an attempt that ran more than
once: a worker killed while its task ran makes the task run again), kills.
"""

from __future__ import annotations

import argparse
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.harness import TERMINAL, Dagq, Proc, executions  # noqa: E402
from tests.e2e.workloads import define_mix  # noqa: E402
from tests.e2e_azure.conftest import AZURE_ENV  # noqa: E402
from tests.fixtures.azurite import ACCOUNT, RestartableAzurite  # noqa: E402

OUTAGE_S = 5.0


def _cluster(d: Dagq) -> list[Proc]:
    return [d.coordinator(), d.coordinator(), d.worker(concurrency=4),
            d.worker(concurrency=4)]


def _final(d: Dagq, ids: list[str], deadline_s: float) -> dict[str, Any]:
    rows = d.wait_all_terminal(ids, deadline_s)
    return {wf: (rows[wf]["status"], {n: t["status"] for n, t in d.tasks(wf).items()})
            for wf in ids}


def _submit(d: Dagq, n: int, log: Path) -> list[str]:
    path = define_mix(d, log)
    return [d.submit(path, "--id", f"chaos-{i:03d}") for i in range(n)]


def _store(kind: str, root: Path, emulator: RestartableAzurite | None) -> Dagq:
    root.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        return Dagq(root)
    assert emulator is not None
    return Dagq(root, base_env={
        **AZURE_ENV, "DAGQ_STORE": f"azure://{ACCOUNT}/c{uuid.uuid4().hex[:10]}",
        "DAGQ_STORAGE_CONNECTION_STRING": emulator.connection_string})


def _outage(d: Dagq, kind: str, emulator: RestartableAzurite | None) -> None:
    if kind == "azurite":
        assert emulator is not None
        emulator.stop()
        time.sleep(OUTAGE_S)
        emulator.start()
        return
    db = sqlite3.connect(d.store.removeprefix("sqlite:"), timeout=30)
    db.execute("BEGIN EXCLUSIVE")
    time.sleep(OUTAGE_S)
    db.rollback()
    db.close()


def crash_free(kind: str, n: int, tmp: Path, emulator: RestartableAzurite | None,
               deadline_s: float) -> dict[str, Any]:
    """Final statuses of ``n`` workflows run without faults."""
    d = _store(kind, tmp / "clean", emulator)
    try:
        ids = _submit(d, n, tmp / "clean-runs.log")
        _cluster(d)
        return _final(d, ids, deadline_s)
    finally:
        d.close()


def chaos(kind: str, n: int, kills: int, tmp: Path, emulator: RestartableAzurite | None,
          seed: int, deadline_s: float) -> tuple[dict[str, Any], int, int]:
    """Final statuses under chaos, duplicate executions and kills done."""
    rng = random.Random(seed)
    d = _store(kind, tmp / "chaos", emulator)
    log = tmp / "chaos-runs.log"
    try:
        ids = _submit(d, n, log)
        procs = _cluster(d)
        done = 0
        outage = threading.Thread(target=_outage, args=(d, kind, emulator), daemon=True)
        while done < kills:
            time.sleep(rng.uniform(0.2, 0.6))
            if done == kills // 2 and not outage.is_alive() and outage.ident is None:
                outage.start()
            i = rng.randrange(len(procs))
            victim = procs[i]
            victim.kill()
            done += 1
            procs[i] = (d.coordinator() if victim.name == "coordinator" else
                        d.worker(concurrency=4))
            if done % 25 == 0 and not outage.is_alive() and _all_terminal(d, ids):
                # everything ended early: more workflows keep the kills meaningful
                ids += d.ok("submit", *[str(define_mix(d, log))] * 4).split()
        outage.join()
        print(f"{done} kills done; waiting for {len(ids)} workflows", file=sys.stderr,
              flush=True)
        finals = _final(d, ids, deadline_s)
        runs = Counter(executions(log))
        return finals, sum(c - 1 for c in runs.values()), done
    finally:
        d.close()


def _all_terminal(d: Dagq, ids: list[str]) -> bool:
    try:
        return all(d.status(wf)["status"] in TERMINAL for wf in ids[-3:])
    except AssertionError:  # the store is still coming back
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=["sqlite", "azurite"], default="sqlite")
    parser.add_argument("--workflows", type=int, default=30)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=600.0,
                        help="Seconds to wait for every workflow to end.")
    args = parser.parse_args()
    # a SIGTERM (e.g. from timeout) unwinds like Ctrl-C, so every process started is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="dagq-chaos-") as name:
        tmp = Path(name)
        emulator = None
        if args.store == "azurite":
            (tmp / "azurite" / "data").mkdir(parents=True)
            emulator = RestartableAzurite(tmp / "azurite")
            emulator.start()
        try:
            started = time.monotonic()
            expected = crash_free(args.store, args.workflows, tmp, emulator, args.deadline)
            print(f"crash-free run done after {time.monotonic() - started:.0f}s",
                  file=sys.stderr, flush=True)
            got, dups, kills = chaos(args.store, args.workflows, args.kills, tmp, emulator,
                                     args.seed, args.deadline)
        finally:
            if emulator is not None:
                emulator.stop()
    reference = next(iter(expected.values()))
    mismatches = sum(1 for wf in got if got[wf] != expected.get(wf, reference))
    terminal = sum(1 for status, _ in got.values() if status in TERMINAL)
    print(f"store={args.store} seed={args.seed} elapsed={time.monotonic() - started:.0f}s")
    print(f"workflows={len(got)} terminal={terminal} mismatches={mismatches} "
          f"duplicate_executions={dups} kills={kills} outages=1 coordinators=2")


if __name__ == "__main__":
    main()
