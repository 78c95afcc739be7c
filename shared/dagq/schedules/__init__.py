"""Cron schedules: ``store`` keeps them as records, ``ticker`` fires the due ones."""
