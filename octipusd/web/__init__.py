"""The web page of octipusd: server-rendered HTML (Jinja2) over the API's own services, a little
JavaScript (``static/app.js``) and the browser's ``EventSource`` for live updates.

The pages are routes of the API application itself (:func:`octipusd.api.app.create_app`), so the
web listener and the Unix socket serve one set of routes and models; the web listener adds the
access checks of :mod:`octipusd.web.access` (token, cookie session, Host, Origin, CSRF, CSP).
"""
