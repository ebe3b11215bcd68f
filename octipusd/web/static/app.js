// Octipus page: the little JavaScript it needs. No inline script anywhere (the CSP forbids it).
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
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const message = data && (data.message || JSON.stringify(data.detail)) || response.statusText;
    throw new Error(message);
  }
  return data;
}

window.octipus = { api, csrfToken };
