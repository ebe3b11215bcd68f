// Octipus page: the little JavaScript it needs. No inline script anywhere (the CSP forbids it).
// One set of helpers every page uses (review.js adds only what the review pages need):
//
// - octipus.api(method, path, body): the JSON API with the session's CSRF token;
// - octipus.status(form, text, bad): the one status line of a form (its .form-status);
// - live parts: an element with data-live="/fragments/..." is re-fetched when the activity feed
//   (GET /v1/activity, server-sent events; ONE EventSource per tab, opened only on a page with a
//   live part or an octipus.onActivity listener) says its run (data-live-run) or session
//   (data-live-session) changed; frames arriving close together cause one fetch per part
//   (COALESCE_MS). With data-live-append="SEQ" the fragment's entries after SEQ are appended instead
//   (the run transcript), following the X-Last-Seq / X-More headers. An element with
//   data-live-status says whether the feed is connected (body[data-activity-state] too);
// - posting: forms with data-api="METHOD PATH" send their named fields as JSON; buttons with
//   data-api="METHOD PATH" send data-body (JSON) plus the fields of their form named in data-fields,
//   after data-confirm's question if any;
// - browser notifications: once allowed (the header's button, shown while the browser has not asked),
//   every page follows the activity and notifies each approval a run asks for, naming its tool and
//   subject; a click opens its approval page;
// - a 401 from the daemon (restarted, or this page's session ended) shows one banner and stops the
//   activity stream's retries.
// - approval forms (form.approval) send a decision (a click on a data-decision button; Enter
//   decides nothing), "remember", questionnaire answers, and a recovery review's run now
//   (data-run-now on its button).
"use strict";

/** The CSRF token of this web session (empty on the Unix socket). */
function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.getAttribute("content") || "" : "";
}

/** Call the JSON API; state-changing calls carry the CSRF token. Throws an Error with the API's message. */
async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { "X-CSRF-Token": csrfToken() } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) sessionEnded();
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (_) {
    data = { message: text };
  }
  if (!response.ok) {
    const detail = data && (data.message || (data.detail && JSON.stringify(data.detail)));
    throw new Error(detail || response.statusText || "HTTP " + response.status);
  }
  return data;
}

// ----------------------------------------------------------------------------- live parts

const liveState = new WeakMap(); // element -> {busy, again, last}

/** Re-fetch one live part (one fetch at a time per element; a call during a fetch runs once after). */
async function refresh(el) {
  const state = liveState.get(el) || { busy: false, again: false, last: null };
  liveState.set(el, state);
  if (state.busy) {
    state.again = true;
    return;
  }
  state.busy = true;
  try {
    do {
      state.again = false;
      if (el.dataset.liveAppend !== undefined) {
        await appendAfter(el);
      } else {
        const response = await fetch(el.dataset.live, { credentials: "same-origin" });
        if (response.status === 401) sessionEnded();
        if (!response.ok) break;
        const html = await response.text();
        if (html !== state.last && busyTyping(el)) {
          holdUntilLeft(el); // replacing it now would drop what the person is typing
        } else if (html !== state.last) {
          state.last = html;
          el.innerHTML = html;
        }
      }
    } while (state.again);
  } catch (error) {
    console.warn("octipus: could not refresh", el.dataset.live, error);
  } finally {
    state.busy = false;
  }
}

/** Whether the person is typing in el (the focus is in one of its text fields). */
function busyTyping(el) {
  const active = document.activeElement;
  return Boolean(active && el.contains(active) && active.matches("textarea, input[type=text], input:not([type])"));
}

/** Refresh el once the person's focus leaves it. */
function holdUntilLeft(el) {
  if (el.dataset.liveHeld) return;
  el.dataset.liveHeld = "1";
  el.addEventListener(
    "focusout",
    () => {
      delete el.dataset.liveHeld;
      window.setTimeout(() => refreshSoon(el), COALESCE_MS);
    },
    { once: true },
  );
}

/** Append the entries after data-live-append, page by page; keeps the view at the bottom if it was. */
async function appendAfter(el) {
  for (;;) {
    const after = el.dataset.liveAppend || "0";
    const response = await fetch(`${el.dataset.live}?after=${encodeURIComponent(after)}`, {
      credentials: "same-origin",
    });
    if (response.status === 401) sessionEnded();
    if (!response.ok) return;
    const html = await response.text();
    const last = response.headers.get("X-Last-Seq");
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    if (html.trim()) el.insertAdjacentHTML("beforeend", html);
    if (last) el.dataset.liveAppend = last;
    if (atBottom && html.trim()) window.scrollTo(0, document.body.scrollHeight);
    if (response.headers.get("X-More") !== "1") return;
  }
}

function concerns(el, frame) {
  if (frame.resync) return true;
  if (el.dataset.livePipeline) return false; // it follows its pipeline's own stream (followPipelines)
  const run = el.dataset.liveRun;
  const session = el.dataset.liveSession;
  if (!run && !session) return true;
  return (run && run === frame.run_id) || (session && session === frame.session_id);
}

const listeners = [];

/** Call fn(frame) for every activity frame (the inbox's notifications); opens the feed if needed. */
function onActivity(fn) {
  listeners.push(fn);
  startActivity();
}

/** How long frames are gathered before the live parts they concern are re-fetched (milliseconds):
 * a busy run sends many batches; each part is fetched once per window, not once per batch. */
const COALESCE_MS = 300;
const due = new Set();
let dueTimer = null;

/** Re-fetch el soon, once for every frame that arrives meanwhile. */
function refreshSoon(el) {
  due.add(el);
  if (dueTimer !== null) return;
  dueTimer = window.setTimeout(() => {
    dueTimer = null;
    const now = Array.from(due);
    due.clear();
    now.forEach(refresh);
  }, COALESCE_MS);
}

function refreshAll() {
  document.querySelectorAll("[data-live]").forEach(refresh);
}

function liveStatus(state, text) {
  document.body.dataset.activityState = state;
  document.querySelectorAll("[data-live-status]").forEach((el) => (el.textContent = text));
}

// ----------------------------------------------------------------------------- the session ends

/** What the page says when the daemon no longer knows its web session (a restart, a new token). */
const SESSION_ENDED =
  "octipusd restarted or this page's session ended: run `octipusctl web` and open the new link.";
let ended = false;

/** Show the "session ended" banner once and stop following the activity (retrying cannot help). */
function sessionEnded() {
  if (ended) return;
  ended = true;
  closePipelines();
  if (activity) activity.close();
  activity = null;
  window.clearTimeout(retryTimer);
  liveStatus("ended", SESSION_ENDED);
  const banner = document.createElement("p");
  banner.className = "session-ended";
  banner.setAttribute("role", "alert");
  banner.textContent = SESSION_ENDED;
  document.body.prepend(banner);
}

// ----------------------------------------------------------------------------- the activity stream

/** Waits before reopening the activity stream after it failed (milliseconds): doubled after each
 * failure from the first to the most, back to the first once it opens. */
const RETRY_FIRST_MS = 1000;
const RETRY_MOST_MS = 30000;
let retryMs = RETRY_FIRST_MS;
let retryTimer = null;
let activity = null;

/** The stream failed: ask the daemon once whether this page's session is still valid (a 401 ends
 * it: the banner, no more retries); otherwise (the daemon is away, or answers) retry with backoff. */
async function activityFailed() {
  if (activity) activity.close();
  activity = null;
  liveStatus("reconnecting", "Reconnecting to the daemon…");
  try {
    const response = await fetch("/v1/health", { credentials: "same-origin" });
    if (response.status === 401) {
      sessionEnded();
      return;
    }
  } catch (_) {
    // the daemon is not answering (yet): retry below
  }
  if (ended) return;
  retryTimer = window.setTimeout(startActivity, retryMs);
  retryMs = Math.min(retryMs * 2, RETRY_MOST_MS);
}

/** Open the page's one activity stream (once; again after a failure). */
function startActivity() {
  if (activity || ended || !window.EventSource) return activity;
  activity = new EventSource("/v1/activity");
  activity.onopen = () => {
    retryMs = RETRY_FIRST_MS;
    liveStatus("open", "Live: following the daemon's activity.");
    refreshAll(); // (re)connected: catch up on whatever happened meanwhile
  };
  activity.onerror = activityFailed;
  activity.onmessage = (message) => {
    let frame;
    try {
      frame = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    document.querySelectorAll("[data-live]").forEach((el) => {
      if (concerns(el, frame)) refreshSoon(el);
    });
    listeners.forEach((fn) => fn(frame));
  };
  return activity;
}

// ----------------------------------------------------------------------------- forms and buttons

/** Show text in the form's status line (.form-status); bad marks a failure. */
function setStatus(form, text, bad) {
  const status = form && form.querySelector(".form-status");
  if (!status) return false;
  status.textContent = text;
  status.classList.toggle("bad", Boolean(bad));
  return true;
}

function splitApi(value) {
  const space = value.indexOf(" ");
  return [value.slice(0, space), value.slice(space + 1)];
}

/** The named fields of a form as a JSON object (empty optional fields left out). */
function fieldsOf(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    const value = el.value.trim();
    if (value) body[el.name] = value;
  }
  return body;
}

/** A few words on what the API answered ("Done: ..."). */
function summary(answer) {
  if (!answer || typeof answer !== "object") return "ok";
  for (const key of ["detail", "outcome", "status"]) {
    if (typeof answer[key] === "string" && answer[key]) return answer[key];
  }
  if (answer.action && answer.action.recovery_state) return answer.action.recovery_state;
  return "ok";
}

async function submitApiForm(form) {
  const [method, path] = splitApi(form.dataset.api);
  const buttons = Array.from(form.querySelectorAll("button"));
  if (form.dataset.sending) return; // a second click while the first is sent sends nothing
  form.dataset.sending = "1";
  buttons.forEach((b) => (b.disabled = true));
  setStatus(form, "sending…");
  try {
    await api(method, path, fieldsOf(form));
    form.reset();
    setStatus(form, "sent");
    refreshAll();
  } catch (error) {
    setStatus(form, error.message, true);
  } finally {
    delete form.dataset.sending;
    buttons.forEach((b) => (b.disabled = false));
  }
}

/** The body of a data-api button: data-body, plus its form's fields named in data-fields. */
function buttonBody(button) {
  const body = button.dataset.body ? JSON.parse(button.dataset.body) : {};
  for (const name of (button.dataset.fields || "").split(/\s+/).filter(Boolean)) {
    const input = button.form && button.form.elements.namedItem(name);
    const value = input ? input.value.trim() : "";
    if (value) body[name] = value;
    else if (name === "note") body[name] = ""; // the API asks for a note, even an empty one
  }
  return body;
}

async function clickApiButton(button) {
  const form = button.form;
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
    setStatus(form, "Nothing was done.");
    return;
  }
  const [method, path] = splitApi(button.dataset.api);
  button.disabled = true;
  try {
    const answer = await api(method, path, buttonBody(button));
    setStatus(form, "Done: " + summary(answer));
    button.dataset.done = "true";
    refreshAll();
  } catch (error) {
    if (!setStatus(form, error.message, true)) window.alert(error.message);
  } finally {
    button.disabled = false;
  }
}

/** The questionnaire's answers (question text -> label, own text, or a list), or throws naming the question. */
function answersOf(form) {
  const answers = {};
  form.querySelectorAll("fieldset.question").forEach((fieldset, index) => {
    const question = fieldset.dataset.question;
    const other = fieldset.querySelector(".other-text").value.trim();
    const chosen = Array.from(fieldset.querySelectorAll("input:checked")).map((input) => input.value);
    if (fieldset.dataset.multi === "1") {
      if (other) chosen.push(other);
      if (!chosen.length) throw new Error(`question ${index + 1} needs an answer: choose an option or write one`);
      answers[question] = chosen;
    } else {
      const answer = other || chosen[0];
      if (!answer) throw new Error(`question ${index + 1} needs an answer: choose an option or write one`);
      answers[question] = answer;
    }
  });
  return answers;
}

async function submitApproval(form, decision, runNow) {
  const body = { decision };
  if (runNow) body.run_now = true; // a recovery review: the reviewed call runs at once
  const reason = form.elements.reason ? form.elements.reason.value.trim() : "";
  if (reason) body.reason = reason;
  try {
    if (form.dataset.kind === "questionnaire") {
      if (decision === "approve") body.answers = answersOf(form);
    } else if (form.elements.remember && form.elements.remember.checked) {
      body.remember = { scope: form.elements.scope.value, match: form.elements.match.value };
    }
  } catch (error) {
    setStatus(form, error.message, true);
    return;
  }
  form.querySelectorAll("button").forEach((b) => (b.disabled = true));
  setStatus(form, "sending…");
  try {
    const answered = await api("POST", `/v1/approvals/${encodeURIComponent(form.dataset.approval)}`, body);
    let text = `${answered.status} by ${answered.decided_by}`;
    if (answered.recheck && !answered.recheck.allowed) text += ` (but the call was denied: ${answered.recheck.reason})`;
    setStatus(form, text);
    form.classList.add("answered");
    if (!form.closest("[data-live]")) window.location.reload();
    else refreshAll();
  } catch (error) {
    setStatus(form, error.message, true);
    form.querySelectorAll("button").forEach((b) => (b.disabled = false));
  }
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.matches("form.approval")) {
    // A decision is a click on its button (type="button"), never a submit: Enter in the Note field
    // (implicit submission, no submitter) decides nothing.
    event.preventDefault();
    setStatus(form, "Nothing was sent: press one of the buttons to decide.", true);
  } else if (form.matches("form[data-api]")) {
    event.preventDefault();
    submitApiForm(form);
  } else if (form.matches("form.api-form")) {
    event.preventDefault(); // a box of data-api buttons: Enter in one of its fields sends nothing
  }
});

document.addEventListener("click", (event) => {
  const decision = event.target.closest("form.approval button[data-decision]");
  if (decision) {
    submitApproval(decision.form, decision.value === "deny" ? "deny" : "approve", decision.dataset.runNow === "1");
    return;
  }
  const button = event.target.closest("button[data-api]");
  if (button) {
    event.preventDefault();
    clickApiButton(button);
  }
});

// ----------------------------------------------------------------------------- browser notifications

/** Kinds of activity that mean a person is needed (a browser notification is shown). */
const NEEDS_PERSON = ["approval_requested", "review_required"];
const notified = new Set(); // approval ids this page already notified

function notificationsOn() {
  return "Notification" in window && Notification.permission === "granted";
}

/** The header's "Enable notifications" button: shown only while the browser has not been asked. */
function notificationButton() {
  const button = document.querySelector("[data-enable-notifications]");
  if (!button || !("Notification" in window)) return;
  button.hidden = Notification.permission !== "default";
  button.addEventListener("click", async () => {
    await Notification.requestPermission();
    button.hidden = Notification.permission !== "default";
    if (notificationsOn()) onActivity(notify);
  });
}

/** Control characters (C0 but newline and tab, DEL, C1, lone surrogates) shown as escapes, a CRLF
 * as a newline: the rule of octipusd/inert.py, for text an agent or a vendor wrote. */
function inert(text) {
  return String(text)
    .replace(/\r\n/g, "\n")
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\ud800-\udfff]/gu, (c) => {
      const code = c.charCodeAt(0);
      return code >= 0xd800 ? `\\u${code.toString(16)}` : `\\x${code.toString(16).padStart(2, "0")}`;
    });
}

/** Show one notification: what waits (tool and subject), opening its approval page on a click.
 * Its title and body may quote the agent (a command): they are made inert first. */
function showNotification(title, text, path, tag) {
  const url = window.location.origin + path; // no token: the page's cookie session opens it
  const [heading, body] = [inert(title), inert(text)];
  const note = new Notification(heading, { body, tag, data: { url } });
  note.addEventListener("click", () => {
    window.focus();
    window.location.href = url;
  });
  window.octipusNotifications = (window.octipusNotifications || 0) + 1;
  window.octipusLastNotification = { title: heading, body, url };
}

/** A frame says a run needs a person: notify each of its pending approvals once (or the inbox). */
async function notify(frame) {
  const kinds = frame.kinds || [];
  if (!notificationsOn() || !frame.run_id || !kinds.some((k) => NEEDS_PERSON.includes(k))) return;
  let pending = [];
  try {
    const query = `status=pending&run_id=${encodeURIComponent(frame.run_id)}`;
    pending = (await api("GET", `/v1/approvals?${query}`)) || [];
  } catch (error) {
    console.warn("octipus: could not read the run's approvals", error);
    return;
  }
  const fresh = pending.filter((a) => !notified.has(a.id));
  if (!pending.length && kinds.includes("review_required")) {
    const tag = `octipus-${frame.run_id}-${frame.last_seq}`;
    showNotification("Octipus: a run needs you", `Run ${frame.run_id.slice(0, 12)} is waiting.`, "/inbox", tag);
  }
  for (const a of fresh) {
    notified.add(a.id);
    const what = a.kind === "questionnaire" ? "Questions from the agent" : a.tool_id;
    const body = a.subject ? `${what}: ${a.subject}` : what;
    showNotification("Octipus: approval needed", body, `/approvals/${encodeURIComponent(a.id)}`, `octipus-${a.id}`);
  }
}

// ----------------------------------------------------------------------------- pipelines

const pipelineStreams = new Map(); // pipeline id -> its EventSource

/** A pipeline's live parts (data-live-pipeline="ID") follow its own history stream
 * (GET /v1/pipelines/ID/stream): each event re-fetches them (coalesced); the browser reconnects with
 * Last-Event-ID by itself, and every (re)connection re-fetches them once to catch up. */
function followPipelines() {
  if (!window.EventSource || ended) return;
  document.querySelectorAll("[data-live-pipeline]").forEach((el) => {
    const id = el.dataset.livePipeline;
    if (pipelineStreams.has(id)) return;
    const parts = () => document.querySelectorAll("[data-live-pipeline]");
    const mine = () => Array.from(parts()).filter((part) => part.dataset.livePipeline === id);
    const source = new EventSource(`/v1/pipelines/${encodeURIComponent(id)}/stream`);
    pipelineStreams.set(id, source);
    source.onopen = () => {
      liveStatus("open", "Live: following the pipeline.");
      mine().forEach(refreshSoon);
    };
    source.onmessage = () => mine().forEach(refreshSoon);
    source.onerror = () => liveStatus("reconnecting", "Reconnecting to the daemon…");
  });
}

function closePipelines() {
  pipelineStreams.forEach((source) => source.close());
  pipelineStreams.clear();
}

window.addEventListener("pagehide", () => {
  if (activity) activity.close();
  activity = null;
  window.clearTimeout(retryTimer);
  closePipelines();
});
window.addEventListener("pageshow", (event) => {
  if (!event.persisted || ended) return; // restored from the back/forward cache: follow again
  if (listeners.length || document.querySelector("[data-live]")) startActivity();
  followPipelines();
});

window.octipus = { api, csrfToken, onActivity, refresh: refreshAll, status: setStatus };

notificationButton();
if (notificationsOn()) onActivity(notify); // every page notifies, once the person allowed it
if (document.querySelector("[data-live]")) startActivity();
followPipelines();
