"""Project-wide pytest plugins."""

pytest_plugins = ["tests.fixtures.azurite"]
