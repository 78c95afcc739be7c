"""Build workflows in Python: tasks composed with ``Chain``, ``Group`` and ``WithDelay``.

    from dagq.compose import Chain, Group, WithDelay, Workflow, task
    from mypkg.steps import evaluate, featurize, train

    wf = Workflow(
        "train-models",
        Chain(
            task(featurize, rows=1000),
            Group(task(train, model="gnn", queue="gpu"), task(train, model="rf")),
            WithDelay(task(evaluate), delay_s=30),
        ),
        default_queue="cpu",
    )
    defn = wf.build()          # a WorkflowDef, the same model YAML files load into
    print(wf.to_yaml())        # and back: load_definition(wf.to_yaml()) == defn

A ``Chain`` runs its steps one after another (each step's first tasks wait for every
last task of the step before); a ``Group`` runs its steps side by side; ``WithDelay``
adds a delay in seconds to a step's first tasks. They nest to any depth. See docs/tasks.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from dagq.compose.callables import (
    CALL_RE,
    bind_problem,
    import_path,
    json_args,
)
from dagq.compose.steps import Chain, Group, Step, Task, WithDelay, as_steps, compile_steps
from dagq.core.model import DEFAULT_QUEUE, DepPolicy, ResultPolicy, SubWorkflow, WorkflowDef
from dagq.core.parse import dump_yaml
from dagq.core.validate import validate
from dagq.errors import DefinitionError, Problem

__all__ = ["Chain", "Group", "Step", "Task", "WithDelay", "Workflow", "task"]


class _Submission(Protocol):
    @property
    def id(self) -> str: ...


class Submitter(Protocol):
    """What ``Workflow.submit`` needs of a client, such as ``WorkflowClient`` (authoring
    does not depend on the client, which depends on the runtime)."""

    def submit(self, defn: WorkflowDef, *, workflow_id: str | None = None,
               max_fan_in: int | None = None,
               params: Mapping[str, Any] | None = None) -> _Submission:
        """Store ``defn`` as a new workflow; the answer names its id."""
        ...


def task(
    name_or_callable: str | Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    cmd: str | None = None,
    call: str | None = None,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    num_retries: int = 0,
    retry_backoff_s: float = 0.0,
    retry_backoff_max_s: float = 600.0,
    timeout_s: float | None = None,
    delay_s: float = 0.0,
    condition: str | None = None,
    dep_policy: DepPolicy = "all",
    env: Mapping[str, str | int | float] | None = None,
    cwd: str | None = None,
    depends_on: Iterable[str] = (),
    workflow: SubWorkflow | Workflow | WorkflowDef | None = None,
    params: Mapping[str, Any] | None = None,
    kind: str | None = None,
    **kwargs: Any,
) -> Task:
    """A task: a shell command (``cmd=``), a Python function, or a ``call=`` path.

    ``task(train, epochs=5)`` runs ``train(epochs=5)`` on a worker: the import path is
    recorded as ``kwargs.call`` and the keyword arguments as ``kwargs.args`` (JSON). Use
    ``args={...}`` for arguments whose names clash with this function's keywords.
    For shell tasks the extra keyword arguments become extra ``kwargs`` keys (for
    example ``bg_dirsync_to``, ``x_...`` keys of your own, or the keys of a custom
    processor's kind). ``task("join", kind="noop")`` is a join that runs nothing.

    ``task("eu", workflow=etl.as_step(region="eu"))`` runs a child workflow made by a
    ``workflow_factory``; ``workflow=`` also takes a ``Workflow`` or ``WorkflowDef`` (run
    inline with ``params=``).
    """
    if workflow is not None:
        return _sub_task(name_or_callable, name, workflow, params, cmd, call, args, kwargs,
                         deps=tuple(depends_on), options={
                             "queue": queue, "num_retries": num_retries,
                             "retry_backoff_s": retry_backoff_s,
                             "retry_backoff_max_s": retry_backoff_max_s, "timeout_s": timeout_s,
                             "delay_s": delay_s, "condition": condition,
                             "dep_policy": dep_policy})
    options: dict[str, Any] = {
        "queue": queue, "num_retries": num_retries, "retry_backoff_s": retry_backoff_s,
        "retry_backoff_max_s": retry_backoff_max_s, "timeout_s": timeout_s,
        "delay_s": delay_s, "condition": condition, "dep_policy": dep_policy,
    }
    if kind is not None:
        options["kind"] = kind
    if isinstance(name_or_callable, str):
        if name is not None:
            raise DefinitionError([Problem(f"task({name_or_callable!r}, name={name!r}) gives "
                                           "the name twice; give it once")])
        name = name_or_callable
    where = f"task {name!r}" if name else "task()"
    if name is not None and not isinstance(name, str):
        raise DefinitionError([Problem(f"{where}: name must be a string, got {name!r}")])
    deps = tuple(depends_on)
    if callable(name_or_callable) and not isinstance(name_or_callable, str):
        fn = name_or_callable
        if cmd is not None or call is not None:
            raise DefinitionError([Problem(f"{where}: give either a function or cmd=/call=, "
                                           "not both", task=name)])
        path = import_path(fn, name)
        fn_args = _merge_args(args, kwargs, where, name)
        problem = bind_problem(fn, fn_args)
        if problem is not None:
            raise DefinitionError([Problem(f"cannot call {path} with arguments "
                                           f"{sorted(fn_args)}: {problem}", task=name)])
        body: dict[str, Any] = {"call": path}
        if fn_args:
            body["args"] = fn_args
        base = getattr(fn, "__name__", "task")
    elif name_or_callable is not None and not isinstance(name_or_callable, str):
        raise TypeError(f"task() takes a name or a function first, got {name_or_callable!r}")
    else:
        body, base = _plain_body(cmd, call, args, kwargs, where, name)
    if env is not None:
        body["env"] = dict(env)
    if cwd is not None:
        body["cwd"] = cwd
    return Task(name=name, kwargs=body, base=base, options=options, depends_on=deps)


def _sub_task(first: object, name: str | None, workflow: object,
              params: Mapping[str, Any] | None, cmd: str | None, call: str | None,
              args: Mapping[str, Any] | None, extra: Mapping[str, Any], *,
              deps: tuple[str, ...], options: dict[str, Any]) -> Task:
    """A task running a child workflow (see ``task(workflow=...)``)."""
    if isinstance(first, str):
        name = first
    elif first is not None:
        raise DefinitionError([Problem("a task with workflow= runs the child workflow; do not "
                                       "also give it a function", task=name)])
    if cmd is not None or call is not None or args is not None or extra:
        raise DefinitionError([Problem("a task with workflow= runs the child workflow; remove "
                                       "cmd=, call=, args= and other keyword arguments "
                                       "(pass child parameters with params=)", task=name)])
    if isinstance(workflow, SubWorkflow):
        sub = workflow if params is None else replace(
            workflow, params={**dict(workflow.params), **dict(params)})
        base = (sub.factory or "child").rpartition(":")[2] or "child"
    elif isinstance(workflow, Workflow | WorkflowDef):
        child = workflow.build() if isinstance(workflow, Workflow) else workflow
        sub = SubWorkflow(definition=child, params=dict(params or {}))
        base = child.name
    else:
        raise DefinitionError([Problem(f"workflow= takes a factory's as_step(...), a Workflow or "
                                       f"a WorkflowDef, got {type(workflow).__name__}",
                                       task=name)])
    return Task(name=name, kwargs={}, base=base, options=options, depends_on=deps,
                workflow=sub)


def _merge_args(args: Mapping[str, Any] | None, kwargs: Mapping[str, Any], where: str,
                name: str | None) -> dict[str, Any]:
    merged = dict(args or {})
    clash = sorted(set(merged) & set(kwargs))
    if clash:
        raise DefinitionError([Problem(f"{where}: argument(s) {clash} given both in args= and "
                                       "as keywords; give each once", task=name)])
    merged.update(kwargs)
    return json_args(merged, where, name)


def _plain_body(cmd: str | None, call: str | None, args: Mapping[str, Any] | None,
                extra: Mapping[str, Any], where: str,
                name: str | None) -> tuple[dict[str, Any], str]:
    if cmd is not None and call is not None:
        raise DefinitionError([Problem(f"{where}: give cmd= or call=, not both", task=name)])
    body: dict[str, Any] = dict(json_args(extra, where, name))
    base = "task"
    if cmd is not None:
        if args is not None:
            raise DefinitionError([Problem(f"{where}: args= is for function tasks; a shell "
                                           "task gets its inputs through cmd and env",
                                           task=name)])
        body["cmd"] = cmd
    if call is not None:
        if not isinstance(call, str) or not CALL_RE.fullmatch(call):
            raise DefinitionError([Problem(f"{where}: call= must look like "
                                           f"'package.module:function', got {call!r}",
                                           task=name)])
        body["call"] = call
        base = call.rpartition(":")[2].rpartition(".")[2]
        if args:
            body["args"] = json_args(args, where, name)
    elif args is not None and cmd is None:
        raise DefinitionError([Problem(f"{where}: args= needs a function or call=",
                                       task=name)])
    return body, base


class Workflow:
    """A whole workflow: a name, top-level steps (run side by side, like the tasks of a
    YAML file without ``depends_on``) and the workflow fields of the YAML format."""

    def __init__(
        self,
        name: str,
        *steps: Step | Callable[..., Any],
        default_queue: str = DEFAULT_QUEUE,
        default_task_timeout_s: float | None = None,
        max_parallelism: int | None = None,
        result_policy: ResultPolicy = "all_sinks_succeed",
        params: Mapping[str, Any] | None = None,
        description: str | None = None,
        parameters: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise DefinitionError([Problem(
                f"Workflow() takes the workflow's name first, got {type(name).__name__}; "
                "write Workflow(\"my-workflow\", ...steps)")])
        self.name = name
        self.steps = as_steps(steps, "Workflow")
        self.default_queue = default_queue
        self.default_task_timeout_s = default_task_timeout_s
        self.max_parallelism = max_parallelism
        self.result_policy: ResultPolicy = result_policy
        self.params = dict(params or {})
        self.description = description
        self.parameters = {k: dict(v) for k, v in (parameters or {}).items()}
        """Declared parameters (``{name: {type, default, required, description}}``)."""

    def build(self) -> WorkflowDef:
        """Compile to a validated ``WorkflowDef``; ``DefinitionError`` lists every problem."""
        defn = WorkflowDef(
            name=self.name, tasks=tuple(compile_steps(self.steps)),
            default_queue=self.default_queue,
            default_task_timeout_s=self.default_task_timeout_s,
            max_parallelism=self.max_parallelism, result_policy=self.result_policy,
            params=self.params, description=self.description, parameters=self.parameters,
        )
        problems = validate(defn)
        if problems:
            raise DefinitionError(problems, source=f"Workflow({self.name!r})")
        return defn

    to_definition = build

    def to_yaml(self) -> str:
        """The definition as YAML; ``load_definition`` reads it back equal."""
        return dump_yaml(self.build())

    def submit(self, client: Submitter, *, workflow_id: str | None = None,
               max_fan_in: int | None = None, params: Mapping[str, Any] | None = None) -> str:
        """Submit through ``client`` (a ``WorkflowClient``) with run ``params``; returns
        the workflow id."""
        return client.submit(self.build(), workflow_id=workflow_id, max_fan_in=max_fan_in,
                             params=params).id
