"""Tests of the ``dagq`` command line."""
