"""Pure schedule logic: cron expressions and the catch-up/overlap decision of one tick."""
