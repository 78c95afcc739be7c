"""dagq: a workflow (DAG) engine for Azure with an embedded SQLite default."""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagq.remote.client import Client

__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> Any:
    """``dagq.Client`` is imported on first use (it needs httpx, the engine does not)."""
    if name == "Client":
        from dagq.remote.client import Client

        return Client
    raise AttributeError(f"module 'dagq' has no attribute {name!r}")
