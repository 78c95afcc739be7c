"""Per-task GPUs on four fake GPUs (a fake ``nvidia-smi`` on PATH): ``kwargs.gpus: 2`` runs
two tasks at once on disjoint devices while a third waits; a GPU health failure keeps the
worker from taking work and shows in ``dagq doctor`` and ``--ready``. Device listing and
the worker's refusals are checked directly."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest

from dagq.errors import ConfigError, TaskError
from dagq.worker.gpu import detect_gpus, parse_list, take, worker_pool
from tests.e2e.harness import eventually
from tests.worker.stack import Stack

UUIDS = [f"GPU-0000000{i}-1111-2222-3333-444444444444" for i in range(4)]
SMI_LIST = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {u})\n" for i, u in enumerate(UUIDS))
FAKE_SMI = """#!/bin/sh
# A fake nvidia-smi: four GPUs; "lost" in $FAKE_SMI_STATE makes every query fail.
if [ -n "$FAKE_SMI_STATE" ] && grep -q lost "$FAKE_SMI_STATE" 2>/dev/null; then
  echo "Unable to determine the device handle for GPU 0000:00:05.0: GPU is lost." >&2
  exit 15
fi
case "$1" in
  -L) printf '%s' {listing} ;;
  *) echo "{first}, 00000000:00:05.0" ;;
esac
"""


def fake_smi(root: Path) -> tuple[dict[str, str], Path]:
    """A PATH with the fake ``nvidia-smi`` first, and its state file."""
    bin_dir, state = root / "bin", root / "smi-state"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(FAKE_SMI.format(listing=shlex.quote(SMI_LIST), first=UUIDS[0]))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    state.write_text("ok")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SMI_STATE": str(state)}
    return env, state


def test_nvidia_smi_listing_gives_uuids_and_mig_instances_instead_of_their_gpu() -> None:
    text = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-bbbb)\n"
            "  MIG 3g.20gb     Device  1: (UUID: MIG-cccc)\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-dddd)\n")
    assert parse_list(text) == ["MIG-bbbb", "MIG-cccc", "GPU-dddd"]
    assert parse_list("") == []


def test_empty_cuda_visible_devices_means_no_gpus() -> None:
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "GPU-a, MIG-b"}) == ["GPU-a", "MIG-b"]
    assert worker_pool(0, [], 4) is None


def test_more_slots_than_gpus_is_refused_with_the_arithmetic() -> None:
    with pytest.raises(ConfigError) as err:
        worker_pool(2, ["0", "1", "2", "3"], 3)
    assert "--concurrency 3 with --gpus-per-task 2 needs 6 GPU(s) but this worker has 4" in str(
        err.value)
    assert "use --concurrency 2 or fewer" in str(err.value)


def test_a_task_asking_for_more_gpus_than_the_worker_has_fails_clearly() -> None:
    pool = worker_pool(0, ["0", "1"], 4)
    with pytest.raises(TaskError, match="asks for 3 GPU"):
        take(pool, {"gpus": 3}, 0)
    with pytest.raises(TaskError, match="has none"):
        take(None, {"gpus": 1}, 0)
    assert take(pool, {"gpus": 0}, 0) == []  # explicitly none: CUDA_VISIBLE_DEVICES=""
    assert take(pool, {}, 0) is None  # nobody said: left alone


@pytest.mark.slow
def test_tasks_asking_for_two_of_four_gpus_run_two_at_a_time_on_disjoint_devices(
        sqlite_stack: Stack) -> None:
    stack = sqlite_stack
    env, _ = fake_smi(stack.root)
    probe = stack.root / "probe"
    (probe / "running").mkdir(parents=True)
    run, seen = probe / "running", probe / "seen"
    seen.mkdir()
    cmd = (f"date +%s.%N > {seen}/$DAGQ_TASK.start; "
           f'echo "$CUDA_VISIBLE_DEVICES" > {run}/$DAGQ_TASK; '
           f'{{ echo "$CUDA_VISIBLE_DEVICES"; ls {run}; }} > {seen}/$DAGQ_TASK; '
           f"sleep 3; date +%s.%N > {seen}/$DAGQ_TASK.end; rm {run}/$DAGQ_TASK")
    stack.coordinator()
    w = stack.worker("gpu", "--concurrency", "3", env=env)
    wf = stack.submit("gpus", [{"name": f"t{i}", "kwargs": {"cmd": cmd, "gpus": 2}}
                               for i in range(3)], default_queue="gpu")
    assert stack.wait_terminal(wf) == "completed"
    records = {p.name: p.read_text().split("\n") for p in seen.iterdir() if not p.suffix}
    devices = {t: set(r[0].split(",")) for t, r in records.items()}
    peers = {t: [p for p in r[1:] if p and p != t] for t, r in records.items()}
    assert all(len(d) == 2 and d <= set(UUIDS) for d in devices.values()), devices
    assert max(len(p) for p in peers.values()) <= 1, f"more than two at once: {peers}"
    for t, ps in peers.items():
        for p in ps:
            assert not devices[t] & devices[p], f"{t} and {p} shared a GPU: {devices}"
    # Times, not listings, decide the order: a task's GPUs are free only after it ends.
    spans = sorted((float((seen / f"{t}.start").read_text()),
                    float((seen / f"{t}.end").read_text()), t) for t in records)
    (_, e0, t0), (s1, e1, t1), (s2, _, t2) = spans
    assert s1 < e0, f"{t0} and {t1} did not run at once: {spans}"
    assert s2 >= min(e0, e1), f"{t2} started before {t0} or {t1} gave its GPUs back: {spans}"
    assert w.stop() == 0


@pytest.mark.slow
def test_an_unhealthy_gpu_stops_the_worker_taking_work_and_shows_in_doctor(
        sqlite_stack: Stack) -> None:
    stack = sqlite_stack
    env, state = fake_smi(stack.root)
    stack.coordinator()
    w = stack.worker("gpu", env={**env, "DAGQ_GPU_HEALTH_INTERVAL": "0.5"})
    stack.wait_heartbeat(w)
    state.write_text("lost")  # a GPU falls off the bus
    beat = eventually(lambda: (b := stack.heartbeat(w)) and b.get("health") and b,
                      "the heartbeat to report the GPU problem", 30)
    assert "GPU is lost" in str(beat["health"])
    wf = stack.submit("wait", [{"name": "t", "kwargs": {"cmd": "true", "gpus": 1}}],
                      default_queue="gpu")
    doctor = stack.run("doctor")
    assert doctor.returncode == 1 and "unhealthy" in doctor.stdout, doctor.stdout
    assert stack.run("worker", "gpu", "--ready").returncode == 1
    assert stack.run("worker", "gpu", "--check").returncode == 0  # alive: not restarted
    assert stack.tasks(wf)["t"]["status"] != "completed"

    state.write_text("ok")
    assert stack.wait_terminal(wf, deadline_s=60) == "completed"
    eventually(lambda: (b := stack.heartbeat(w)) and b.get("health") is None,
               "the heartbeat to report healthy GPUs again", 30)
    assert w.stop() == 0
