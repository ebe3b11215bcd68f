// Octipus review pages: the inbox's live list and browser notifications, the decision buttons
// (through the JSON API, with octipus.api from app.js) and comments on diff lines. No inline script.
"use strict";

(function () {
  /** Kinds of activity that mean a person is needed (a browser notification is shown). */
  const NEEDS_PERSON = ["approval_requested", "review_required"];

  function say(form, text, bad) {
    const out = form && form.querySelector(".result");
    if (out) {
      out.textContent = text;
      out.classList.toggle("bad", Boolean(bad));
    }
  }

  // ------------------------------------------------------------------ decision buttons
  // <button data-post="/v1/..." data-body='{...}' data-fields="note reason" data-confirm="...">
  async function post(button) {
    const form = button.closest("form");
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
      say(form, "Nothing was done.");
      return;
    }
    const body = button.dataset.body ? JSON.parse(button.dataset.body) : {};
    for (const name of (button.dataset.fields || "").split(/\s+/).filter(Boolean)) {
      const input = form && form.elements.namedItem(name);
      const value = input ? input.value.trim() : "";
      if (value) body[name] = value;
      else if (name === "note") body[name] = "";
    }
    button.disabled = true;
    try {
      const answer = await window.octipus.api("POST", button.dataset.post, body);
      say(form, "Done: " + summary(answer));
      button.dataset.done = "true";
    } catch (error) {
      say(form, error.message, true);
    } finally {
      button.disabled = false;
    }
  }

  function summary(answer) {
    if (!answer || typeof answer !== "object") return "ok";
    for (const key of ["detail", "outcome", "status"]) {
      if (typeof answer[key] === "string" && answer[key]) return answer[key];
    }
    if (answer.action && answer.action.recovery_state) return answer.action.recovery_state;
    return "ok";
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-post]");
    if (button) {
      event.preventDefault();
      post(button);
    }
  });
  document.addEventListener("submit", (event) => {
    if (event.target.classList.contains("api-form")) event.preventDefault();
  });

  // ------------------------------------------------------------------ inbox: live list + notifications
  function notificationButton() {
    const button = document.querySelector("[data-enable-notifications]");
    if (!button) return;
    if (!("Notification" in window)) {
      button.disabled = true;
      button.textContent = "Notifications unsupported";
      return;
    }
    const show = () => {
      button.textContent = Notification.permission === "granted" ? "Notifications on" : "Enable notifications";
      button.disabled = Notification.permission !== "default";
    };
    show();
    button.addEventListener("click", async () => {
      await Notification.requestPermission();
      show();
    });
  }

  function notify(frame) {
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    const kinds = frame.kinds || [];
    if (!kinds.some((k) => NEEDS_PERSON.includes(k))) return;
    const url = window.location.origin + "/inbox"; // no token: the page's cookie session opens it
    const what = kinds.includes("approval_requested") ? "an approval" : "a review";
    const note = new Notification("Octipus: a run needs " + what, {
      body: "Run " + String(frame.run_id || "").slice(0, 12) + " is waiting for you.",
      tag: "octipus-" + frame.run_id + "-" + frame.last_seq,
      data: { url },
    });
    note.addEventListener("click", () => {
      window.focus();
      window.location.href = url;
    });
    window.octipusNotifications = (window.octipusNotifications || 0) + 1;
  }

  function liveInbox() {
    const box = document.getElementById("inbox");
    if (!box || !window.EventSource) return;
    const status = document.getElementById("live-status");
    let pending = false;
    let again = false; // something new arrived while a fetch was under way: fetch once more after it
    const refresh = () => {
      if (pending) {
        again = true;
        return;
      }
      pending = true;
      again = false;
      fetch(box.dataset.fragment, { credentials: "same-origin" })
        .then((response) => (response.ok ? response.text() : Promise.reject(new Error(response.statusText))))
        .then((html) => {
          box.innerHTML = html; // our own server-rendered, escaped fragment
          box.dataset.refreshed = String(Number(box.dataset.refreshed || 0) + 1);
        })
        .catch((error) => {
          if (status) status.textContent = "Could not refresh: " + error.message;
        })
        .finally(() => {
          pending = false;
          if (again) refresh();
        });
    };
    const source = new EventSource(box.dataset.activity);
    const onFrame = (event) => {
      let frame = {};
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        frame = {};
      }
      notify(frame);
      refresh();
    };
    source.addEventListener("message", onFrame);
    source.addEventListener("activity", onFrame);
    source.addEventListener("resync", refresh);
    source.addEventListener("open", () => {
      if (status) status.textContent = "Live: following the daemon's activity.";
      box.dataset.live = "true";
      refresh(); // anything missed while (re)connecting
    });
    source.addEventListener("error", () => {
      if (status) status.textContent = "Reconnecting to the daemon…";
    });
  }

  // ------------------------------------------------------------------ diff: comment on a line
  function diffComments() {
    const diff = document.querySelector(".diff[data-session-id]");
    const form = document.getElementById("diff-comment");
    if (!diff || !form || !diff.dataset.sessionId) return;
    let target = null;
    diff.addEventListener("click", (event) => {
      const row = event.target.closest("tr.dl");
      if (!row || row.classList.contains("note")) return;
      const file = row.closest(".diff-file").dataset.file;
      const code = row.querySelector(".code");
      const mark = code.querySelector(".mark");
      const text = code.textContent.slice(mark ? mark.textContent.length : 0); // the line, without its +/-
      target = { file, line: row.dataset.line, side: row.dataset.side, text };
      diff.querySelectorAll("tr.selected").forEach((r) => r.classList.remove("selected"));
      row.classList.add("selected");
      form.querySelector(".where").textContent = file + ":" + target.line;
      say(form, "");
      form.hidden = false;
      row.closest(".diff-file").after(form);
      form.elements.namedItem("comment").focus();
    });
    form.querySelector("[data-cancel]").addEventListener("click", () => {
      form.hidden = true;
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const comment = form.elements.namedItem("comment").value.trim();
      if (!target || !comment) {
        say(form, "Write a comment first.", true);
        return;
      }
      const where = target.file + ":" + target.line + (target.side === "old" ? " (removed line)" : "");
      const text =
        "Review comment on " + where + " in branch " + diff.dataset.branch + " (worktree " + diff.dataset.worktree + "):\n" +
        "> " + target.text + "\n" + comment;
      try {
        const answer = await window.octipus.api("POST", "/v1/sessions/" + encodeURIComponent(diff.dataset.sessionId) + "/steer", { text });
        say(form, "Sent to run " + answer.run_id.slice(0, 12) + (answer.delivery === "stdin" ? " (delivered now)" : " (queued)"));
        form.elements.namedItem("comment").value = "";
      } catch (error) {
        say(form, error.message, true);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    notificationButton();
    liveInbox();
    diffComments();
  });
})();
