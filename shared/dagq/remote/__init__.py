"""The dagq HTTP API from Python and the CLI: ``Client`` (see ``dagq.remote.client``)."""

from dagq.remote.client import Client

__all__ = ["Client"]
