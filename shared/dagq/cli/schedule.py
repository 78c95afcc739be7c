"""``dagq schedule ...`` (cron schedules stored in the store) and ``dagq scheduler``
(the embedded ticker loop that fires them)."""

from __future__ import annotations

import json
import signal
import threading
from datetime import UTC, datetime
from typing import Any

import click

from dagq.cli.common import emit_json, handle_errors, piped, settings_from, store_option
from dagq.cli.params import cli_params, split_params
from dagq.cli.render import print_lines
from dagq.compose.loader import load_file
from dagq.core.model import WorkflowDef
from dagq.core.params import parse_cli_value
from dagq.core.schedule.policy import CATCHUP_POLICIES, OVERLAP_POLICIES, ScheduleSpec
from dagq.ports import Backend
from dagq.schedules import actions
from dagq.schedules.store import Schedule, ScheduleStore, detail, summary, utc_text
from dagq.schedules.ticker import Ticker, TickReport
from dagq.wiring import backend_from_settings


def _store(ctx: click.Context, store: str | None) -> ScheduleStore:
    return ScheduleStore(backend_from_settings(settings_from(ctx, store)))


def _now() -> datetime:
    return datetime.now(UTC)


def _emit(value: Any) -> None:
    emit_json(value)


@click.group()
def schedule() -> None:
    """Cron schedules: start a workflow whenever a cron expression fires."""


@schedule.command()
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@click.option("--factory", default=None, metavar="MODULE:FUNCTION",
              help="Build the workflow at each fire time by calling this Python function "
                   "with the run's params (instead of FILE).")
@click.option("--cron", "cron", required=True, metavar="EXPR",
              help="6-field (seconds first) or 5-field cron expression, or a macro (@daily).")
@click.option("--timezone", "timezone", default="UTC", show_default=True,
              help="IANA time zone whose wall clock the expression reads.")
@click.option("--overlap", type=click.Choice(OVERLAP_POLICIES), default="skip",
              show_default=True, help="What to do when the previous run is still active.")
@click.option("--catchup", type=click.Choice(CATCHUP_POLICIES), default="none",
              show_default=True, help="What to do with fire times missed while not running.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Parameter for every run, typed like `dagq submit --param`; "
                   "{schedule.time} and {schedule.date} in a value become the fire time.")
@click.option("--catchup-window", "window", type=click.FloatRange(min=0), default=None,
              metavar="S", help="Fire times at most S seconds late count as on time "
                                "(default: the ticker's, 60 s).")
@click.option("--history", type=click.IntRange(min=1, max=1000), default=50,
              show_default=True, help="Runs and missed fire times kept in the record.")
@store_option
@click.pass_context
@handle_errors
def add(ctx: click.Context, name: str, file: str | None, factory: str | None, cron: str,
        timezone: str, overlap: str, catchup: str, params: tuple[str, ...],
        window: float | None, history: int, store: str | None) -> None:
    """Add schedule NAME running the workflow in FILE (or built by --factory) whenever
    --cron fires."""
    if (file is None) == (factory is None):
        raise click.UsageError("give the workflow as FILE or as --factory MODULE:FUNCTION "
                               "(one of them)")
    now = _now()
    record = {"name": name, "cron": cron, "timezone": timezone, "overlap": overlap,
              "catchup": catchup, "created_at": now.isoformat(),
              "catchup_window_s": window, "history": history, "factory": factory}
    if file is not None:
        defn = load_file(file)
        spec = ScheduleSpec.from_record({**record, "params": cli_params(defn, params)})
    else:
        values = dict(split_params(params))  # the factory's keyword arguments
        spec = ScheduleSpec.from_record({**record, "params": {
            k: parse_cli_value(WorkflowDef("", ()), k, v) for k, v in values.items()}})
        defn = Schedule(spec=spec, definition=WorkflowDef("", ())).run_definition(now)
    sched = _store(ctx, store).add(spec, defn)
    click.echo(name)
    click.echo(f"added schedule {name!r} ({defn.name}); next run at "
               f"{utc_text(sched.next_fires(now, 1)[0])}", err=True)


@schedule.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@store_option
@click.pass_context
@handle_errors
def list_(ctx: click.Context, as_json: bool, store: str | None) -> None:
    """List schedules with their last run (and its status) and next run."""
    st = _store(ctx, store)
    now = _now()
    rows = [summary(st, s, now) for s in st.list()]
    if as_json:
        _emit(rows)
        return
    _table(["name", "cron", "tz", "paused", "last run", "status", "next run"], [
        [r["name"], r["cron"], r["timezone"], "yes" if r["paused"] else "no",
         (r["last_run"] or {}).get("fire_time", "-"),
         (r["last_run"] or {}).get("status") or "-", r["next_run"] or "-"] for r in rows])


def _table(headers: list[str], rows: list[list[str]]) -> None:
    """Plain aligned columns: never wrapped or cut, whatever the terminal width; when
    stdout is not a terminal, tab-separated rows without the header."""
    if piped():
        print_lines(rows)
        return
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@schedule.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@store_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, name: str, as_json: bool, store: str | None) -> None:
    """Show a schedule: spec, next 5 fire times, recent runs and missed fire times."""
    st = _store(ctx, store)
    info = detail(st, st.get(name), _now())
    if as_json:
        _emit(info)
        return
    info_text = {**info, "paused": "yes" if info["paused"] else "no"}
    for key in ("name", "workflow", "cron", "timezone", "overlap", "catchup", "paused",
                "created_at", "next_run"):
        click.echo(f"{key + ':':<12}{info_text[key] or '-'}")
    click.echo(f"{'params:':<12}{json.dumps(info['params'])}")
    click.echo("next fire times:")
    for t in info["next_fire_times"]:
        click.echo(f"  {t}")
    click.echo("recent runs:" + ("" if info["runs"] else " none"))
    for r in info["runs"][-10:]:
        click.echo(f"  {r['fire_time']}  {r['run_id']}  {r['status'] or 'unknown'}")
    click.echo("missed:" + ("" if info["missed"] else " none")
               + (f" ({info['missed_not_listed']} older not kept)"
                  if info["missed_not_listed"] else ""))
    for m in info["missed"][-10:]:
        click.echo(f"  {m['fire_time']}  {m['reason']}"
                   + (f"  {m['detail']}" if m.get("detail") else ""))


def _change(verb: str, help_text: str) -> click.Command:
    @schedule.command(name=verb, help=help_text)
    @click.argument("name")
    @store_option
    @click.pass_context
    @handle_errors
    def command(ctx: click.Context, name: str, store: str | None) -> None:
        st = _store(ctx, store)
        getattr(st, verb)(name)
        click.echo(f"schedule {name!r}: {verb}d", err=True)

    return command


_change("pause", "Stop schedule NAME from firing (stored: survives restarts and redeploys).")
_change("remove", "Delete schedule NAME (its past runs stay).")


@schedule.command()
@click.argument("name")
@store_option
@click.pass_context
@handle_errors
def resume(ctx: click.Context, name: str, store: str | None) -> None:
    """Let schedule NAME fire again from now; fire times passed while it was paused are
    recorded as missed (reason paused); `dagq schedule backfill` runs them if wanted."""
    sched = _store(ctx, store).resume(name, _now())
    paused = sum(1 for m in sched.missed if m.reason == "paused")
    click.echo(f"schedule {name!r}: resumed ({paused} fire time(s) recorded as missed "
               "while paused)", err=True)


@schedule.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@store_option
@click.pass_context
@handle_errors
def trigger(ctx: click.Context, name: str, as_json: bool, store: str | None) -> None:
    """Start a run of schedule NAME now (even while paused); print its id."""
    started = actions.trigger(_backend(ctx, store), name, _now())
    click.echo(json.dumps(started.to_json()) if as_json else started.run_id)


@schedule.command()
@click.argument("name")
@click.option("--from", "start", required=True, metavar="TIME",
              help="First instant of the range (ISO 8601; no zone means UTC).")
@click.option("--to", "end", required=True, metavar="TIME", help="Last instant of the range.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON array.")
@store_option
@click.pass_context
@handle_errors
def backfill(ctx: click.Context, name: str, start: str, end: str, as_json: bool,
             store: str | None) -> None:
    """Start a run for every fire time of NAME from --from to --to (at most 1000).

    Run ids are those the ticker would use, so repeating a backfill, or overlapping runs
    that already happened, starts nothing twice.
    """
    runs = actions.backfill(_backend(ctx, store), name, _instant(start, "--from"),
                            _instant(end, "--to"), _now())
    if as_json:
        _emit([r.to_json() for r in runs])
        return
    for r in runs:
        click.echo(r.run_id)
    new = sum(r.created for r in runs)
    click.echo(f"backfill of {name!r}: {len(runs)} fire time(s), {new} new run(s), "
               f"{len(runs) - new} already existed", err=True)


@schedule.command()
@click.argument("name")
@click.option("--file", "file", type=click.Path(dir_okay=False), default=None,
              help="Replace the workflow definition.")
@click.option("--cron", default=None, metavar="EXPR", help="New cron expression.")
@click.option("--timezone", default=None, help="New time zone.")
@click.option("--overlap", type=click.Choice(OVERLAP_POLICIES), default=None)
@click.option("--catchup", type=click.Choice(CATCHUP_POLICIES), default=None)
@click.option("--catchup-window", "window", type=click.FloatRange(min=0), default=None,
              metavar="S", help="New catch-up window in seconds.")
@click.option("--history", type=click.IntRange(min=1, max=1000), default=None)
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Set a parameter (repeatable; the others are kept).")
@click.option("--clear-params", is_flag=True, help="Drop every parameter first.")
@store_option
@click.pass_context
@handle_errors
def update(ctx: click.Context, name: str, file: str | None, cron: str | None,
           timezone: str | None, overlap: str | None, catchup: str | None,
           window: float | None, history: int | None, params: tuple[str, ...],
           clear_params: bool, store: str | None) -> None:
    """Change schedule NAME in place, keeping its history and last fire time."""
    st = _store(ctx, store)
    current = st.get(name)
    defn = load_file(file) if file else None
    record = current.spec.to_record()
    changes = {"cron": cron, "timezone": timezone, "overlap": overlap, "catchup": catchup,
               "catchup_window_s": window, "history": history}
    record.update({k: v for k, v in changes.items() if v is not None})
    values = {} if clear_params else dict(current.spec.params)
    values.update(cli_params(defn or current.definition, params))
    record["params"] = values
    sched = st.change_spec(name, ScheduleSpec.from_record(record), defn)
    click.echo(f"schedule {name!r}: updated; next run at "
               f"{utc_text(sched.next_fires(_now(), 1)[0])}", err=True)


def _backend(ctx: click.Context, store: str | None) -> Backend:
    return backend_from_settings(settings_from(ctx, store))


def _instant(text: str, flag: str) -> datetime:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an ISO 8601 time such as "
                                 "2026-03-01T00:00:00Z", param_hint=flag) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


@schedule.command(name="next")
@click.argument("name")
@click.option("-n", "count", type=click.IntRange(min=1, max=1000), default=5,
              show_default=True, help="How many fire times.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of UTC times.")
@store_option
@click.pass_context
@handle_errors
def next_(ctx: click.Context, name: str, count: int, as_json: bool, store: str | None) -> None:
    """Preview the next fire times of NAME (UTC, with the schedule's local time)."""
    sched = _store(ctx, store).get(name)
    times = sched.next_fires(_now(), count)
    if as_json:
        _emit([utc_text(t) for t in times])
        return
    zone = sched.spec.zone
    for t in times:
        click.echo(f"{utc_text(t)}  {t.astimezone(zone).strftime('%Y-%m-%d %H:%M:%S %Z')}")


@click.command()
@click.option("--interval", type=click.FloatRange(min=0.05), default=5.0, show_default=True,
              help="Longest sleep between ticks, in seconds.")
@click.option("--once", is_flag=True, help="Tick once and exit (1 if a schedule failed).")
@store_option
@click.pass_context
@handle_errors
def scheduler(ctx: click.Context, interval: float, once: bool, store: str | None) -> None:
    """Fire due schedules and poll file triggers until SIGTERM or Ctrl-C (the embedded
    runtime's timer)."""
    backend = backend_from_settings(settings_from(ctx, store))
    ticker = Ticker(backend, tolerance_s=max(60.0, 2 * interval))
    from dagq.cli.trigger import print_fired
    from dagq.triggers.watcher import Watcher

    watcher = Watcher(backend)  # `files` triggers (docs/triggers.md)
    stop = threading.Event()
    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    ticks = submitted = missed = cancelled = errors = 0
    while True:
        report = ticker.tick()
        _print_events(report)
        print_fired(watcher.poll())
        ticks += 1
        submitted += len(report.fired)
        missed += len(report.missed)
        cancelled += len(report.cancelled)
        errors += len(report.errors)
        if once or stop.is_set():
            break
        wait = interval
        if report.next_fire is not None:
            wait = min(interval, (report.next_fire - _now()).total_seconds() + 0.01)
        stop.wait(max(wait, 0.01))
    click.echo(f"scheduler stopped: {ticks} tick(s), {submitted} run(s) submitted, "
               f"{missed} missed, {cancelled} cancelled, {errors} error(s)", err=True)
    if once and errors:
        raise SystemExit(1)


def _print_events(report: TickReport) -> None:
    for f in report.fired:
        click.echo(f"submitted {f.run_id} (schedule {f.schedule}, fire time "
                   f"{utc_text(f.fire_time)}{'' if f.created else ', already existed'})")
    for name, m in report.missed:
        click.echo(f"missed {utc_text(m.fire_time)} of schedule {name}: {m.reason}"
                   + (f" ({m.detail})" if m.detail else ""))
    for run in report.cancelled:
        click.echo(f"cancelled {run} (overlap cancel_previous)")
    for e in report.errors:
        click.echo(f"error: {e}", err=True)


COMMANDS = (schedule, scheduler)
"""The commands this module adds to ``dagq``."""
