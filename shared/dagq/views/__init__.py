"""The read model: what clients show of workflows, tasks, attempts and waits.

Both the embedded ``WorkflowClient`` and the HTTP API serve their answers from here, so
the CLI reads the same over the embedded store and over ``--api``."""
