"""FunctionProcessor runs real subprocesses of the worker's Python."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dagq.protocol.messages import TaskMessage
from dagq.worker.builtin import default_processors
from dagq.worker.function_processor import FunctionProcessor
from dagq.worker.processors import NoopProcessor, Outcome, ShellProcessor, TaskContext

REPO = Path(__file__).resolve().parents[2]
MOD = "tests.compose.sample_tasks"
Run = Callable[..., tuple[Outcome, TaskContext]]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """Run one function task: kwargs plus optional upstream inputs, timeout, stop event."""
    counter = iter(range(1000))

    def go(kwargs: dict[str, Any], *, inputs: dict[str, Any] | None = None,
           timeout_s: float | None = None, stop: threading.Event | None = None,
           on_start: Callable[[int], None] | None = None) -> tuple[Outcome, TaskContext]:
        workdir = tmp_path / f"attempt{next(counter)}"
        workdir.mkdir()
        inputs_file = workdir / "inputs.json"
        inputs_file.write_text(json.dumps(inputs or {}))
        output_file = workdir / "output.json"
        msg = TaskMessage("wf-1", "t", 2, "wf-1/t/2", kwargs=kwargs, timeout_s=timeout_s)
        env = dict(os.environ)
        env.update({"DAGQ_WORKFLOW_ID": "wf-1", "DAGQ_TASK": "t", "DAGQ_ATTEMPT": "2",
                    "DAGQ_OUTPUT_FILE": str(output_file), "DAGQ_INPUTS_FILE": str(inputs_file),
                    "DAGQ_PARAMS": "{}"})
        ctx = TaskContext(message=msg, env=env, workdir=workdir, output_file=output_file,
                          inputs_file=inputs_file, log_path=workdir / "log.txt",
                          stop=stop or threading.Event(), kill_timeout=2.0, on_start=on_start)
        return FunctionProcessor().run(ctx), ctx

    return go


def output(ctx: TaskContext) -> Any:
    return json.loads(ctx.output_file.read_text()) if ctx.output_file.exists() else None


def call(fn: str, cwd: Path | None = REPO, **args: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"call": f"{MOD}:{fn}" if ":" not in fn else fn, "args": args}
    if cwd is not None:
        kwargs["cwd"] = str(cwd)
    return kwargs


def test_return_value_becomes_the_output(run: Run) -> None:
    outcome, ctx = run(call("add", a=2, b=3))
    assert outcome == Outcome(True)
    assert output(ctx) == 5


def test_none_publishes_no_output_and_coroutines_are_awaited(run: Run) -> None:
    outcome, ctx = run(call("nothing"))
    assert outcome.success and not ctx.output_file.exists()
    outcome, ctx = run(call("async_add", a=4, b=5))
    assert outcome.success and output(ctx) == 9


def test_inputs_parameter_and_task_helpers_see_upstream_outputs(run: Run) -> None:
    outcome, ctx = run(call("scale", factor=10), inputs={"b": [1], "a": [2, 3]})
    assert outcome.success, outcome.error
    assert output(ctx) == {"a": [20, 30], "b": [10]}
    outcome, ctx = run(call("fetch", source="a"), inputs={"a": {"x": 1}})
    assert output(ctx) == {"from": "a", "value": {"x": 1}}


def test_the_function_sees_the_script_contract_env_and_cwd(run: Run, tmp_path: Path) -> None:
    kwargs = call("whoami", cwd=None) | {"env": {"GREETING": "hi"}}
    outcome, ctx = run(kwargs)
    assert outcome.success, outcome.error
    assert output(ctx) == {"DAGQ_WORKFLOW_ID": "wf-1", "DAGQ_TASK": "t", "DAGQ_ATTEMPT": "2",
                           "GREETING": "hi", "cwd": os.getcwd()}
    outcome, ctx = run(call("whoami", cwd=tmp_path))
    assert output(ctx)["cwd"] == str(tmp_path)


def test_modules_in_kwargs_cwd_are_importable(run: Run, tmp_path: Path) -> None:
    (tmp_path / "local_steps.py").write_text("def hello(who):\n    return f'hello {who}'\n")
    outcome, ctx = run({"call": "local_steps:hello", "args": {"who": "x"},
                        "cwd": str(tmp_path)})
    assert outcome.success, outcome.error
    assert output(ctx) == "hello x"


def test_an_exception_fails_with_type_message_and_traceback(run: Run) -> None:
    outcome, _ = run(call("boom", message="the data is bad"))
    assert not outcome.success and not outcome.stopped
    assert outcome.error is not None
    assert outcome.error.startswith("ValueError: the data is bad\n")
    assert "Traceback (most recent call last)" in outcome.error
    assert 'in boom\n    raise ValueError(message)' in outcome.error


@pytest.mark.parametrize(("target", "expected"), [
    ("no_such_pkg.steps:train",
     "cannot import 'no_such_pkg.steps:train': ModuleNotFoundError: No module named "
     "'no_such_pkg'"),
    (f"{MOD}:missing", f"cannot import '{MOD}:missing': '{MOD}' has no attribute 'missing'"),
    (f"{MOD}:Shouter.nope", f"cannot import '{MOD}:Shouter.nope': 'Shouter' has no attribute "
                            "'nope'"),
])
def test_an_unimportable_callable_fails_clearly(run: Run, target: str, expected: str) -> None:
    outcome, _ = run({"call": target, "cwd": str(REPO)})
    assert not outcome.success
    assert outcome.error is not None and outcome.error.splitlines()[0] == expected


def test_a_module_failing_at_import_names_its_error(run: Run, tmp_path: Path) -> None:
    (tmp_path / "broken_steps.py").write_text("raise RuntimeError('no config file')\n")
    outcome, _ = run({"call": "broken_steps:go", "cwd": str(tmp_path)})
    assert outcome.error is not None and outcome.error.startswith(
        "cannot import 'broken_steps:go': RuntimeError: no config file")


def test_wrong_arguments_and_bad_outputs_fail_clearly(run: Run) -> None:
    outcome, _ = run(call("add", b=1))
    assert outcome.error == (f"cannot call {MOD}:add with arguments ['b']: missing a required "
                             "argument: 'a'")
    outcome, ctx = run(call("unserialisable"))
    assert outcome.error is not None
    assert outcome.error.startswith(f"the return value of {MOD}:unserialisable is not "
                                    "JSON-serialisable")
    assert not ctx.output_file.exists()


def test_malformed_kwargs_fail_without_starting_a_process(run: Run) -> None:
    started: list[int] = []
    for kwargs, expected in [
        ({"call": "no colon"}, "kwargs.call must look like 'package.module:function'"),
        ({"call": "a:b", "args": [1]}, "kwargs.args must be a mapping"),
        ({"call": "a:b", "cwd": "/no/such/dir"}, "is not a directory on this worker"),
    ]:
        outcome, _ = run(kwargs, on_start=started.append)
        assert outcome.error is not None and expected in outcome.error
    assert started == []


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_for(path: Path) -> int:
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return int(path.read_text())


def test_stop_kills_the_function_process(run: Run, tmp_path: Path) -> None:
    stop = threading.Event()
    pid_file = tmp_path / "pid"
    result: list[Outcome] = []
    t = threading.Thread(target=lambda: result.append(
        run(call("sleeper", pid_file=str(pid_file), seconds=300), stop=stop)[0]))
    t.start()
    pid = wait_for(pid_file)
    stop.set()
    t.join(timeout=60)
    assert result and result[0].stopped and not result[0].success
    assert pid_gone(pid)


def test_timeout_kills_the_function_process(run: Run, tmp_path: Path) -> None:
    pids: list[int] = []
    outcome, _ = run(call("sleeper", pid_file=str(tmp_path / "pid"), seconds=300),
                     timeout_s=1.0, on_start=pids.append)
    assert outcome.error is not None and outcome.error.startswith("function ")
    assert "timed out after 1s" in outcome.error
    assert len(pids) == 1 and pid_gone(pids[0])


def test_default_processors_route_call_tasks_to_the_function_processor() -> None:
    procs = default_processors()
    msg = TaskMessage("w", "t", 1, "w/t/1", kwargs={"call": "a:b"})
    chosen = next(p for p in procs if p.handles(msg))
    assert isinstance(chosen, FunctionProcessor)
    shell = TaskMessage("w", "t", 1, "w/t/1", kwargs={"cmd": "true"})
    assert isinstance(next(p for p in procs if p.handles(shell)), ShellProcessor)
    assert isinstance(procs[-1], NoopProcessor)
