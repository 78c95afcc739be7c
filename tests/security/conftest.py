"""The security tests use the end-to-end fixtures (the CLI on a fresh store)."""

from tests.e2e.conftest import dagq

__all__ = ["dagq"]
