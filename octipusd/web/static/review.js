// Octipus review pages: what only they need, on top of app.js (octipus.api, octipus.status,
// octipus.onActivity, the data-live parts, the data-api buttons and the browser notifications):
// comments on diff lines. No inline script.
"use strict";

(function () {
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
      window.octipus.status(form, "");
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
        window.octipus.status(form, "Write a comment first.", true);
        return;
      }
      const where = target.file + ":" + target.line + (target.side === "old" ? " (removed line)" : "");
      const text =
        "Review comment on " + where + " in branch " + diff.dataset.branch + " (worktree " + diff.dataset.worktree + "):\n" +
        "> " + target.text + "\n" + comment;
      try {
        const answer = await window.octipus.api("POST", "/v1/sessions/" + encodeURIComponent(diff.dataset.sessionId) + "/steer", { text });
        window.octipus.status(form, "Sent to run " + answer.run_id.slice(0, 12) + (answer.delivery === "stdin" ? " (delivered now)" : " (queued)"));
        form.elements.namedItem("comment").value = "";
      } catch (error) {
        window.octipus.status(form, error.message, true);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    diffComments();
  });
})();
