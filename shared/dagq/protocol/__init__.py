"""The wire protocol between submitters, coordinators and workers (queue messages and ids)."""
