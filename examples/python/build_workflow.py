"""Build the example pipeline in Python; print it as YAML or submit it.

Run from the repository root (so that ``examples.python.steps`` is importable, for the
builder and for the workers):

    python -m examples.python.build_workflow > examples/python/pipeline.yaml
    dagq run examples/python/pipeline.yaml
    dagq output WORKFLOW_ID report

or submit it directly to the store named by ``DAGQ_STORE`` (a ``dagq coordinator`` and a
``dagq worker default`` must be running to execute it):

    python -m examples.python.build_workflow --submit
"""

from __future__ import annotations

import argparse

from dagq.compose import Chain, Group, WithDelay, Workflow, task
from examples.python.steps import load_data, pick_best, report, train


def build() -> Workflow:
    """load_data -> (train mean | train linear) -> pick_best -> report (1 s later)."""
    return Workflow(
        "python-example",
        Chain(
            task(load_data, rows=200, seed=7),
            Group(
                task(train, name="train-mean", model="mean"),
                task(train, name="train-linear", model="linear", num_retries=1),
            ),
            task(pick_best),
            WithDelay(task(report, title="python example"), delay_s=1),
        ),
        description="Functions passing outputs through a chain with a parallel group",
    )


def main() -> None:
    """Print the YAML, or submit with --submit and print the workflow id."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submit", action="store_true", help="submit to DAGQ_STORE")
    workflow = build()
    if parser.parse_args().submit:
        from dagq.client import WorkflowClient
        from dagq.config import Settings
        from dagq.wiring import backend_from_settings

        print(workflow.submit(WorkflowClient(backend_from_settings(Settings.from_env()))))
    else:
        print(workflow.to_yaml(), end="")


if __name__ == "__main__":
    main()
