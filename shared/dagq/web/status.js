"use strict";
// dagq status page: a workflows list and one workflow's DAG or timeline, tasks, task panel
// and the buttons that steer it (actions.js; the timeline is timeline.js, both inlined before
// this file). Every request goes to the HTTP API next to this page, with the key the page
// was opened with; nothing is loaded from elsewhere.
const PALETTE = /*PALETTE*/ {};
const DARK = new Set(["completed", "started", "running", "waiting", "failed",
  "upstream_failed", "cancelled"]);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const STATUSES = ["pending", "running", "completed", "failed", "cancelled"];
const REFRESH_MS = 2000;
const MAP_PAGE = 50;  // instances of a mapped task listed per page when it is unfolded
const key = new URLSearchParams(location.search).get("code");  // the function key, if any
let timer = null;
let generation = 0;  // bumped by every route change; a refresh of an older view draws nothing
let selected = null;  // task name shown in the panel
let panelAfter = null;  // what redraws the workflow after an action from the task panel

function api(path) {
  const url = new URL(path, location.href);
  if (key) url.searchParams.set("code", key);
  return url;
}

async function get(path, kind = "json") {
  return answer(await fetch(api(path)), kind);
}

async function answer(resp, kind) {  // the body of an answer, or its error message thrown
  if (!resp.ok) {
    let message = `${resp.status} ${resp.statusText}`;
    try { message = (await resp.json()).error || message; } catch (e) { /* not JSON */ }
    const err = new Error(message);
    err.status = resp.status;
    throw err;
  }
  return kind === "json" ? resp.json() : resp.text();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

function badge(status) {
  const b = el("span", { class: "badge" + (DARK.has(status) ? "" : " light"),
    "data-status": status }, status);
  b.style.background = PALETTE[status] || "#e0e0e0";
  return b;
}

function shown(task) {  // queued and waiting are told from running
  return task.status === "running" && ["queued", "waiting"].includes(task.phase)
    ? task.phase : task.status;
}

function when(t) { return t ? new Date(t * 1000).toLocaleString() : ""; }

function took(start, end) {  // end null: still going
  if (!start) return "";
  const s = (end ?? Date.now() / 1000) - start;
  if (s < 10) return `${Math.max(s, 0).toFixed(1)}s`;
  if (s < 3600) return s < 60 ? `${Math.floor(s)}s` : `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s % 3600 / 60)).padStart(2, "0")}m`;
}

function notStarted(t) { return ["queued", "waiting"].includes(shown(t)); }

function duration(t) {  // a queued or waiting attempt has not started: no run time
  const s = shown(t);
  if (s === "queued") {
    const since = t.due_at || t.dispatched_at;
    return since ? `queued for ${took(since, null)}` : "queued";
  }
  if (s === "waiting") return t.due_at ? `due in ${took(Date.now() / 1000, t.due_at)}` : "waiting";
  return took(t.dispatched_at, t.finished_at);
}

function detail(t) {  // the same detail as the CLI: the error summary first
  return String(t.error_line || t.reason || t.error || t.note || "").split("\n")[0];
}

function counts(c) {
  return el("span", {}, ...Object.entries(c || {}).filter(([, n]) => n)
    .map(([s, n]) => el("span", { class: "count" }, badge(s), ` ${n} `)));
}

function legend() {
  return el("div", { class: "legend muted" }, "colours: ", ...["pending", "held", "waiting",
    "queued", "started", "completed", "failed", "upstream_failed", "skipped", "cancelled"]
    .map((s) => el("span", {}, badge(s))));
}

function schedule(fn) {
  clearTimeout(timer);
  timer = setTimeout(fn, REFRESH_MS);
}

// -- the workflows list ------------------------------------------------------------------
async function listView(gen) {
  const main = document.getElementById("main");
  const filters = JSON.parse(sessionStorage.getItem("dagq-filters") || "{}");
  const status = el("select", { id: "f-status" }, el("option", { value: "" }, "any status"),
    ...STATUSES.map((s) => el("option", { value: s }, s)));
  status.value = filters.status || "";
  const name = el("input", { id: "f-name", placeholder: "name contains", value: filters.name || "" });
  const table = el("table", { id: "workflows" });
  const apply = () => {
    sessionStorage.setItem("dagq-filters", JSON.stringify({ status: status.value, name: name.value }));
    refresh();
  };
  status.addEventListener("change", apply);
  name.addEventListener("input", apply);
  main.replaceChildren(el("div", { class: "filters" }, status, name), table);
  document.getElementById("where").textContent = "workflows";
  async function refresh() {
    const q = status.value ? `&status=${encodeURIComponent(status.value)}` : "";
    const data = await get(`workflows?limit=1000${q}`);
    if (gen !== generation) return;
    const needle = name.value.toLowerCase();
    const rows = data.workflows.filter((w) => !needle || w.name.toLowerCase().includes(needle))
      .sort((a, b) => b.created_at - a.created_at);
    table.replaceChildren(el("tr", {}, ...["id", "name", "status", "started", "duration", "tasks"]
      .map((h) => el("th", {}, h))), ...rows.map((w) => el("tr", { class: "row", "data-id": w.id,
      onclick: () => { location.hash = `#/wf/${encodeURIComponent(w.id)}`; } },
      el("td", {}, el("a", { href: `#/wf/${encodeURIComponent(w.id)}` }, w.id)), el("td", {}, w.name),
      el("td", {}, badge(w.status)), el("td", {}, when(w.created_at)),
      el("td", {}, took(w.created_at, TERMINAL.has(w.status) ? w.updated_at : null)),
      el("td", {}, counts(w.counts)))));
    document.getElementById("refresh").textContent = `${rows.length} workflow(s), ${new Date().toLocaleTimeString()}`;
    document.body.dataset.ready = "list";
    document.body.dataset.route = location.hash;
    schedule(refresh);
  }
  await refresh();
}

// -- one workflow ------------------------------------------------------------------------
async function workflowView(id, gen) {
  const main = document.getElementById("main");
  const head = el("div", { id: "head" });
  const hints = el("div", { id: "hints" });
  const graph = el("div", { class: "graph", id: "graph" });
  const timeline = el("div", { class: "timeline", id: "timeline" });
  const filter = el("input", { id: "t-filter", placeholder: "filter tasks by name or status" });
  const table = el("table", { id: "tasks" });
  let view = sessionStorage.getItem("dagq-view") === "timeline" ? "timeline" : "graph";
  const tab = (name) => el("button", { class: "tab", "data-view": name, type: "button",
    onclick: () => { view = name; sessionStorage.setItem("dagq-view", name); showView(); } }, name);
  const tabs = el("div", { class: "tabs" }, tab("graph"), tab("timeline"));
  main.replaceChildren(hints, head, tabs, graph, timeline, el("div", { class: "filters" }, filter), table);
  document.getElementById("where").replaceChildren(el("a", { href: "#/" }, "workflows"), " / ", id);
  let tasks = [];
  let members = null;  // names of a clicked group box
  const unfolded = new Map();  // mapped task -> {offset, rows, total} of its listed instances
  const cells = (t, name) => [el("td", {}, name), el("td", {}, badge(shown(t))),
    el("td", {}, t.queue), el("td", {}, t.attempt),
    el("td", {}, notStarted(t) ? "" : when(t.dispatched_at)), el("td", {}, duration(t))];
  const taskRow = (t, cls = "row") => el("tr", { class: cls, "data-task": t.name,
    onclick: () => openTask(id, t.name) }, ...cells(t, t.name),
    el("td", { class: "detail" }, detail(t)));
  const mapRows = (t) => {  // a mapped task: one folded row, then its instances if unfolded
    const open = unfolded.get(t.name);
    const items = t.map.items === null ? "?" : t.map.items;
    const head = el("tr", { class: "row map", "data-task": t.name, "data-map": items,
      "aria-expanded": open ? "true" : "false",
      onclick: () => { toggle(t.name); openTask(id, t.name); } },
      ...cells(t, `${open ? "▾" : "▸"} ${t.name} ×${items}`),
      el("td", { class: "detail" }, counts(t.map.counts)));
    if (!open) return [head];
    const last = Math.min(open.offset + open.rows.length, open.total);
    const pager = el("tr", { class: "pager", "data-map": t.name }, el("td", { colspan: 7 },
      `instances ${open.total ? open.offset + 1 : 0}–${last} of ${open.total} `,
      open.offset > 0 ? el("button", { class: "prev", onclick: () => page(t.name, open.offset - MAP_PAGE) }, "previous") : "",
      last < open.total ? el("button", { class: "next", onclick: () => page(t.name, open.offset + MAP_PAGE) }, "next") : ""));
    return [head, ...open.rows.map((r) => taskRow(r, "row instance")), pager];
  };
  const showView = () => {
    graph.hidden = view !== "graph";
    timeline.hidden = view !== "timeline";
    for (const b of tabs.children) b.classList.toggle("active", b.dataset.view === view);
    if (view === "timeline") drawTimeline(timeline, tasks, unfolded, { toggle, open: (n) => openTask(id, n) });
  };
  const drawTable = () => {
    const needle = filter.value.toLowerCase();
    const rows = tasks.filter((t) => (!members || members.has(t.name))
      && (!needle || t.name.toLowerCase().includes(needle) || shown(t).includes(needle)));
    table.replaceChildren(el("tr", {}, ...["task", "status", "queue", "attempt", "started",
      "duration", "detail"].map((h) => el("th", {}, h))),
      ...rows.flatMap((t) => t.map ? mapRows(t) : [taskRow(t)]));
    document.body.dataset.unfolded = [...unfolded.keys()].join(" ");
    if (view === "timeline") showView();
  };
  async function fetchPage(name, offset) {  // one page of a mapped task's instances
    const prefix = encodeURIComponent(`${name}[`);
    const data = await get(`workflows/${encodeURIComponent(id)}/tasks?prefix=${prefix}&offset=${offset}&limit=${MAP_PAGE}`);
    return { offset, rows: data.tasks, total: data.total };
  }
  async function page(name, offset) {
    unfolded.set(name, await fetchPage(name, Math.max(0, offset)));
    drawTable();
  }
  async function toggle(name) {
    if (unfolded.has(name)) { unfolded.delete(name); drawTable(); } else await page(name, 0);
  }
  filter.addEventListener("input", () => { members = null; drawTable(); });
  async function refresh() {
    const [summary, svg, list, why] = await Promise.all([get(`workflows/${encodeURIComponent(id)}`),
      get(`workflows/${encodeURIComponent(id)}/graph?format=svg`, "text"),
      get(`workflows/${encodeURIComponent(id)}/tasks`),
      get(`workflows/${encodeURIComponent(id)}/explain`).catch(() => ({ hints: [] }))]);
    if (gen !== generation) return;
    tasks = list.tasks;
    for (const [name, open] of unfolded) unfolded.set(name, await fetchPage(name, open.offset));
    if (gen !== generation) return;
    const parent = summary.parent_id ? el("div", {}, "child of ",
      el("a", { href: `#/wf/${encodeURIComponent(summary.parent_id)}` }, summary.parent_id),
      ` (task ${summary.parent_task})`) : "";
    const [suspended, reason] = flags(summary);
    hints.replaceChildren(banner(TERMINAL.has(summary.status) ? [] : why.hints || []));
    head.replaceChildren(el("h2", {}, `${summary.name} `, badge(summary.status), " ", suspended),
      el("div", { class: "muted" }, id), parent, reason, actionsBar(id, summary, refresh),
      counts(list.counts || summary.counts), legend());
    graph.innerHTML = svg;  // our own server's SVG (every name in it is XML-escaped)
    for (const g of graph.querySelectorAll("g.node[data-task]")) {
      g.addEventListener("click", () => {
        if (g.dataset.map && !unfolded.has(g.dataset.task)) toggle(g.dataset.task);
        openTask(id, g.dataset.task);
      });
      if (g.dataset.task === selected) g.classList.add("selected");
    }
    for (const g of graph.querySelectorAll("g.group")) {
      g.addEventListener("click", () => {
        members = new Set(g.dataset.members.split(" "));
        filter.value = "";
        drawTable();
      });
    }
    drawTable();
    showView();
    if (selected) await openTask(id, selected, true);
    if (gen !== generation) return;
    document.getElementById("refresh").textContent = TERMINAL.has(summary.status)
      ? "finished" : `refreshing every ${REFRESH_MS / 1000}s, ${new Date().toLocaleTimeString()}`;
    if (!document.body.dataset.renderMs) document.body.dataset.renderMs = String(Math.round(performance.now()));
    document.body.dataset.ready = "workflow";
    document.body.dataset.route = location.hash;
    document.body.dataset.status = summary.status;
    if (!TERMINAL.has(summary.status)) schedule(refresh);
  }
  panelAfter = refresh;
  await refresh();
}

// -- the task panel ----------------------------------------------------------------------
async function openTask(id, name, quiet = false) {
  selected = name;
  const panel = document.getElementById("panel");
  const base = `workflows/${encodeURIComponent(id)}/tasks/${encodeURIComponent(name)}`;
  let t, output = null;
  try {
    t = await get(base);  // the task, its attempts and why it is where it is
    if (t.has_output) output = (await get(`${base}/output`)).output;
  } catch (err) {
    if (!quiet) panel.replaceChildren(el("p", { class: "error" }, err.message));
    return;
  }
  const why = t.explanation;
  const close = el("button", { class: "close", title: "close", onclick: () => {
    selected = null; panel.hidden = true; } }, "×");
  const logs = el("pre", { id: "logs" }, "select an attempt");
  const attempts = el("div", { id: "attempts" }, "attempts: ", ...Array.from(
    { length: t.attempt }, (_, k) => el("button", { onclick: () => showLogs(base, k + 1, logs) }, k + 1)));
  panel.replaceChildren(close, el("h3", { id: "panel-task" }, name, " ", badge(shown(t))),
    el("div", {}, `queue ${t.queue}, attempt ${t.attempt}`),
    taskRetryButton(id, t, () => (panelAfter ? panelAfter() : openTask(id, name, true))),
    el("div", { id: "panel-times" }, notStarted(t) ? duration(t)
      : `started ${when(t.dispatched_at) || "-"}, took ${duration(t) || "-"}`),
    t.child ? el("div", {}, "child workflow ", el("a", { href: `#/wf/${encodeURIComponent(t.child)}` }, t.child)) : "",
    el("h4", {}, "why"), el("ul", { id: "reasons" }, ...why.reasons.map((r) => el("li", {}, r))),
    t.error ? el("div", {}, el("h4", {}, "error"), el("p", { id: "error-line", class: "error" },
      t.error_line || ""), el("pre", { class: "error" }, t.error)) : "",
    el("h4", {}, "output"), el("pre", { id: "output" }, output === null ? "none"
      : JSON.stringify(output, null, 2).slice(0, 20000)),
    el("h4", {}, "logs"), attempts, logs);
  panel.hidden = false;
  if (t.attempt) await showLogs(base, t.attempt, logs);
  for (const g of document.querySelectorAll("#graph g.node")) {
    g.classList.toggle("selected", g.dataset.task === name);
  }
}

async function showLogs(base, attempt, into) {
  try {
    const body = await get(`${base}/logs?attempt=${attempt}`, "text");
    let text = body;
    try { const v = JSON.parse(body); text = v.text ?? v.data ?? v.log ?? body; } catch (e) { /* plain */ }
    into.textContent = text || "(empty)";
  } catch (err) {
    into.textContent = err.status === 404 ? `no logs stored for attempt ${attempt}` : err.message;
  }
}

// -- routing -----------------------------------------------------------------------------
async function route() {
  clearTimeout(timer);
  const gen = ++generation;
  const m = location.hash.match(/^#\/wf\/([^/]+)(?:\/task\/(.+))?$/);
  document.getElementById("panel").hidden = true;
  selected = m && m[2] ? decodeURIComponent(m[2]) : null;  // #/wf/ID/task/NAME opens a task
  delete document.body.dataset.renderMs;
  delete document.body.dataset.ready;
  delete document.body.dataset.route;
  panelAfter = null;
  try {
    await (m ? workflowView(decodeURIComponent(m[1]), gen) : listView(gen));
  } catch (err) {
    if (gen !== generation) return;
    document.getElementById("main").replaceChildren(el("p", { class: "error" }, err.message));
    document.body.dataset.ready = "error";
  }
}

window.addEventListener("hashchange", route);
route();
