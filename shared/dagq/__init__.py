"""dagq: a workflow (DAG) engine for Azure with an embedded SQLite default."""

__version__ = "0.1.0"
