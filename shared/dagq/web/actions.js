"use strict";
// -- steering a workflow from its page: cancel, retry, suspend, resume ---------------------
// The first of the page's scripts (dagq.web.SCRIPTS): status.js, last, starts the page.
// Each button calls the HTTP API next to this page (POST, with the key the page was opened
// with), shows what the API answered, and is disabled where it does not apply.
let actionNote = null;  // {text, error, id}: the last action's answer, kept across refreshes
let acting = false;  // a request is in flight: every action button waits for it

async function post(path) {
  const resp = await fetch(api(path), { method: "POST" });
  return answer(resp, "json");
}

function noteOf(id) {
  if (!actionNote || actionNote.id !== id) return el("span", { id: "action-result" });
  return el("span", { id: "action-result", role: "status",
    class: actionNote.error ? "error" : "ok" }, actionNote.text);
}

async function act(id, path, done, after) {  // one POST; its answer (or error) noted
  if (acting) return;
  acting = true;
  for (const b of document.querySelectorAll("button.action")) b.disabled = true;
  try {
    const body = await post(`workflows/${encodeURIComponent(id)}/${path}`);
    actionNote = { id, error: false, text: done(body) };
  } catch (err) {
    actionNote = { id, error: true, text: err.message };
  } finally {
    acting = false;
  }
  await after();
}

function actionButton(name, label, enabled, why, onclick) {
  return el("button", { class: "action", "data-action": name, type: "button",
    disabled: enabled && !acting ? null : "", title: enabled ? null : why, onclick }, label);
}

function actionsBar(id, summary, after) {  // the workflow's buttons, from its summary
  const ended = TERMINAL.has(summary.status);
  const c = summary.counts || {};
  const retryable = summary.status !== "completed" && (c.failed || c.upstream_failed || c.cancelled);
  const enc = encodeURIComponent;
  return el("div", { id: "actions", class: "actions" },
    actionButton("cancel", "cancel…", !ended, `the workflow has ended (${summary.status})`, () => {
      const reason = prompt("Cancel this workflow? Tasks not started are cancelled, running "
        + "ones are stopped.\nReason (optional):", "");
      if (reason === null) return;
      const q = reason.trim() ? `?reason=${enc(reason.trim())}` : "";
      act(id, `cancel${q}`, (b) => `cancel requested: the workflow is ${b.status}`
        + (reason.trim() ? ` (reason: ${reason.trim()})` : ""), after);
    }),
    actionButton("retry", "retry failed", retryable,
      summary.status === "completed" ? "the workflow completed: nothing failed"
        : "no failed, upstream-failed or cancelled task", () =>
        act(id, "retry", (b) => `retried: failed tasks run again, the workflow is ${b.status}`, after)),
    actionButton("suspend", "suspend", !ended && !summary.suspended,
      ended ? `the workflow has ended (${summary.status})` : "already suspended", () =>
        act(id, "suspend", () => "suspended: no task starts until resumed; running ones finish", after)),
    actionButton("resume", "resume", !ended && !!summary.suspended,
      ended ? `the workflow has ended (${summary.status})` : "the workflow is not suspended", () =>
        act(id, "resume", () => "resumed: tasks that waited are sent", after)),
    noteOf(id));
}

function taskRetryButton(id, t, after) {  // in the task panel: T and what follows it again
  const running = t.status === "running";
  const q = encodeURIComponent(JSON.stringify([t.name]));
  return el("div", { class: "actions" }, actionButton("retry-task", "retry this task and its downstream",
    !running, "the task is running: wait for it or cancel the workflow", () => {
      if (!confirm(`Run ${t.name} and every task after it again?`)) return;
      act(id, `retry?tasks=${q}`, (b) => `retried ${t.name} and its downstream: the workflow is ${b.status}`, after);
    }), noteOf(id));
}

function flags(summary) {  // suspended and the cancel reason, for the header
  return [summary.suspended ? el("span", { id: "suspended", class: "flag" }, "suspended") : "",
    summary.cancel_reason ? el("div", { id: "cancel-reason" }, "cancel reason: ",
      el("q", {}, summary.cancel_reason)) : ""];
}

function banner(hints) {  // what keeps the workflow from ending (the hints dagq wait prints)
  return el("div", { id: "banner", hidden: hints.length ? null : "" },
    ...hints.map((h) => el("div", { class: "banner", "data-key": h.key }, "⚠ ", h.text)));
}
