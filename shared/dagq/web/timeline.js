// -- the timeline (Gantt) of one workflow: one bar per attempt ------------------------------
// A run bar goes from an attempt's start to its end (now while it runs), coloured by its
// result; the time an attempt waited in its queue (dispatched, not yet started) is drawn
// hatched before it. Attempts come from the task rows' attempt history; a task whose
// attempts left no record is drawn from its own dispatch and finish times. A mapped task
// is one row, unfolded into its instances like the table.
const RESULT_COLOUR = { succeeded: "completed", failed: "failed", timed_out: "failed",
  cancelled: "cancelled", released: "skipped", stopped: "cancelled", running: "started" };
const TICKS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
  43200, 86400, 172800, 604800];

function ago(s) {  // seconds as 1m30s, 2h05m
  if (s < 60) return `${Math.round(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s % 3600 / 60)).padStart(2, "0")}m`;
}

function spansOf(t, now) {  // [{kind: "queued"|"run", from, to, key, attempt, result}]
  const out = [];
  if (t.map) {
    if (t.dispatched_at) out.push({ kind: "run", from: t.dispatched_at, to: t.finished_at ?? now,
      key: shown(t), attempt: 0, result: `map ${t.status}` });
    return out;
  }
  const runs = (t.attempts || []).filter((a) => a.started_at);
  for (const a of runs) {
    const to = a.ended_at ?? (a.result === "running" ? now : a.started_at + (a.duration_s || 0));
    out.push({ kind: "run", from: a.started_at, to, key: RESULT_COLOUR[a.result] || "started",
      attempt: a.attempt, result: a.result });
  }
  const since = t.dispatched_at;
  if (!since || !t.attempt || shown(t) === "waiting") return out;
  const current = runs.filter((a) => a.attempt === t.attempt).map((a) => a.started_at);
  const started = current.length ? Math.min(...current) : null;
  if (started !== null) {
    if (started > since) out.push({ kind: "queued", from: since, to: started, key: "queued",
      attempt: t.attempt, result: "queued" });
  } else if (shown(t) === "queued") {
    out.push({ kind: "queued", from: since, to: now, key: "queued", attempt: t.attempt,
      result: "queued" });
  } else if (!runs.length || runs.every((a) => a.attempt < t.attempt)) {  // no record of it
    const going = t.status === "running";
    out.push({ kind: "run", from: since, to: t.finished_at ?? (going ? now : since),
      key: going ? "started" : t.status, attempt: t.attempt, result: going ? "running" : t.status });
  }
  return out;
}

function timelineRows(tasks, unfolded) {  // [{t, label, cls}] with unfolded maps' instances
  return tasks.flatMap((t) => {
    if (!t.map) return [{ t, label: t.name, cls: "" }];
    const open = unfolded.get(t.name);
    const items = t.map.items === null ? "?" : t.map.items;
    const head = { t, label: `${open ? "▾" : "▸"} ${t.name} ×${items}`, cls: "map" };
    return open ? [head, ...open.rows.map((r) => ({ t: r, label: r.name, cls: "instance" }))] : [head];
  });
}

function drawTimeline(box, tasks, unfolded, on) {  // on: {open(name), toggle(name)}
  const now = Date.now() / 1000;
  const rows = timelineRows(tasks, unfolded).map((r) => ({ ...r, spans: spansOf(r.t, now) }));
  const all = rows.flatMap((r) => r.spans);
  if (!all.length) {
    box.replaceChildren(el("p", { class: "muted" }, "no task has been dispatched yet"));
    return;
  }
  const t0 = Math.min(...all.map((s) => s.from));
  const t1 = Math.max(t0 + 1, ...all.map((s) => s.to));
  const span = t1 - t0;
  const step = TICKS.find((s) => span / s <= 8) || 86400 * 30;
  const pct = (t) => `${((t - t0) / span * 100).toFixed(3)}%`;
  const axis = el("div", { class: "tl-row tl-axis" }, el("div", { class: "tl-label" },
    `from ${when(t0)}`), el("div", { class: "tl-track" }, ...Array.from(
    { length: Math.floor(span / step) + 1 }, (_, k) => el("span", { class: "tick",
      style: `left: ${pct(t0 + k * step)}` }, k ? `+${ago(k * step)}` : "0"))));
  const bar = (s) => {
    const b = el("div", { class: `bar ${s.kind}`, "data-result": s.result, "data-attempt": s.attempt,
      title: `${s.attempt ? `attempt ${s.attempt} ` : ""}${s.result}: ${ago(s.to - s.from)} `
        + `(${when(s.from)} → ${when(s.to)})`,
      style: `left: ${pct(s.from)}; width: max(2px, ${((s.to - s.from) / span * 100).toFixed(3)}%)` });
    b.style.setProperty("--c", PALETTE[s.key] || "#9e9e9e");
    return b;
  };
  const line = (r) => el("div", { class: `tl-row ${r.cls}`, "data-task": r.t.name },
    el("div", { class: "tl-label", title: r.t.name, onclick: () => {
      if (r.cls === "map") on.toggle(r.t.name);
      on.open(r.t.name);
    } }, r.label), el("div", { class: "tl-track" }, ...r.spans.map(bar)));
  box.replaceChildren(axis, ...rows.map(line));
}
