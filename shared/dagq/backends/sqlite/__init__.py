"""The embedded SQLite backend: one file, WAL, ``BEGIN IMMEDIATE`` transactions.

``db`` owns the connection and schema, ``index`` and ``queue`` the index table and the
queues; ``backend`` assembles them into a ``Backend``.
"""

from dagq.backends.sqlite.backend import (
    SqliteBackend,
)

__all__ = [
    "SqliteBackend",
]
