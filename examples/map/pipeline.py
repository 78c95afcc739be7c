"""Build the map example in Python; print it as YAML or submit it.

``task(fit).map(over="inputs.scan.shards")`` runs ``fit`` once per shard ``scan``
returns, passing the shard as ``fit``'s ``item`` argument. Run from the repository root
(so that ``examples.map.steps`` is importable, for the builder and for the workers):

    python -m examples.map.pipeline > examples/map/python.yaml
    dagq run examples/map/python.yaml
    dagq output WORKFLOW_ID reduce

or submit it directly to the store named by ``DAGQ_STORE`` (a ``dagq coordinator`` and a
``dagq worker default`` must be running to execute it):

    python -m examples.map.pipeline --submit
"""

from __future__ import annotations

import argparse

from dagq.compose import Chain, Workflow, task
from examples.map.steps import fit, reduce, scan


def build() -> Workflow:
    """scan -> fit[0..n-1] (one per shard, four at a time) -> reduce."""
    return Workflow(
        "map-shards-python",
        Chain(
            task(scan, shards=6),
            task(fit).map(over="inputs.scan.shards", max_parallelism=4),
            task(reduce, condition="all(inputs.fit.loss < 1)"),
        ),
        description="One fit per shard the scan found, combined by reduce",
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
