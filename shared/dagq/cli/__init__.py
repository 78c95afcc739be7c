"""Command-line interface (`dagq`)."""
