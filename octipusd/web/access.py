"""Who may use the web listener: the page's token, its session cookie, Host, Origin, CSRF and CSP.

The web listener serves the same application as the Unix socket (one set of routes), wrapped in
:class:`AccessGuard`, an ASGI middleware that decides before any route runs:

0. ``Host``, ``Origin``, ``Cookie``, ``Authorization`` and ``X-CSRF-Token`` may come once each
   (the guard and the application must read the same one): a duplicate is refused, 400.
1. ``Host`` must name the bound address (or one of ``web.allowedHosts``) with its port, or on a
   loopback bind any loopback address or ``localhost`` with any port (an SSH forward of another
   local port): a page of another site that resolves its own name to 127.0.0.1 (DNS rebinding)
   is refused, 421.
2. ``?token=`` on a ``GET`` is exchanged once for a session: a random session id in an
   ``HttpOnly; SameSite=Strict`` cookie named after the port (``__Host-`` and ``Secure`` over
   TLS), then a redirect to the same path without the token, so that it leaves the address bar
   and the history.
3. Every other request needs that cookie, or ``Authorization: Bearer <token>`` (programs); else 401
   (a page that says to open the link ``octipusctl web`` prints). A page navigation that arrives
   without the cookie (a notification link clicked on another site: SameSite=Strict withholds
   it) gets a page that reloads itself once from this origin, so the cookie comes along.
4. A state-changing request (not GET, HEAD or OPTIONS) must not come from another origin: its
   ``Origin`` (when sent) must be the page's own, and with the cookie it must also carry the
   session's ``X-CSRF-Token`` (the page's scripts read it from ``<meta name="csrf-token">``);
   else 403.
5. On the web listener the client recorded as deciding an approval or action is ``web``: the
   guard sets it in the request's state and drops a client-sent ``X-Octipus-Client``.
6. Every response carries a strict Content-Security-Policy (no inline script or style), and
   ``nosniff``, ``no-referrer`` and ``frame-ancestors 'none'``.

Sessions live in memory: a daemon restart (a new token) asks the person to open the new link.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qsl, quote, unquote_plus, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from octipusd.api.common import CLIENT_HEADER, CLIENT_STATE_KEY, CSRF_STATE_KEY, WEB_STATE_KEY
from octipusd.settings_web import is_loopback, is_unspecified

__all__ = ["BOUNCE_PARAM", "COOKIE_PREFIX", "CSP", "CSRF_HEADER", "AccessGuard", "WebAccess", "WebLimits"]

log = logging.getLogger("octipusd.web")

#: The session cookie's name before its port (``octipus_session_8765``): browsers send a cookie to
#: every port of a host, so each daemon's page has its own.
COOKIE_PREFIX: Final = "octipus_session_"
#: The header a state-changing request of the page carries its CSRF token in.
CSRF_HEADER: Final = "x-csrf-token"
#: The client name of every request through the web listener.
WEB_CLIENT: Final = "web"
#: Headers a request may carry only once: the guard and the application must read the same value.
SINGLE_HEADERS: Final = frozenset({"host", "origin", "cookie", "authorization", CSRF_HEADER})
#: Query parameter marking the one reload of a page opened without the cookie (its loop guard).
BOUNCE_PARAM: Final = "octipus_continue"
#: Bytes of a redirect's path and query kept as they are (RFC 3986 pchar plus "/", "?" and "%");
#: any other byte (non-ASCII, backslash, control characters) is percent-encoded.
URL_SAFE: Final = "/?%:@!$&'()*+,;=-._~"
#: The Content-Security-Policy of every response of the web listener.
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
#: Methods that change nothing (no Origin or CSRF check).
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
#: Headers every response of the web listener carries.
SECURITY_HEADERS: Final[tuple[tuple[bytes, bytes], ...]] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


@dataclass(frozen=True)
class WebLimits:
    """Bounds of the page's sessions.

    Attributes:
        max_sessions: Browser sessions kept at once; the least recently used goes first.
        session_idle_s: Seconds a session may stay unused before it must open the link again.
        token_bytes: Random bytes of the page's token and of each session id and CSRF token.
    """

    max_sessions: int = 64
    session_idle_s: float = 12 * 3600.0
    token_bytes: int = 32


@dataclass
class _Session:
    csrf: str
    last_used: float


@dataclass
class WebAccess:
    """The web listener's secret and its sessions.

    Attributes:
        origin: The page's own origin (``http://127.0.0.1:PORT``).
        allowed_hosts: ``Host`` header values accepted (lower case, with the port).
        port: The bound port (it names the session cookie).
        loopback: Bound to a loopback address: any loopback address or ``localhost`` is accepted
            as ``Host`` with any port (a port forward may choose another).
        secure: Served over TLS (the cookie is then ``Secure``).
        limits: Session bounds.
        token: The page's token (a fresh random one per daemon start).
    """

    origin: str
    allowed_hosts: frozenset[str]
    port: int = 0
    loopback: bool = False
    secure: bool = False
    limits: WebLimits = field(default_factory=WebLimits)
    token: str = field(default="", repr=False)
    _sessions: OrderedDict[str, _Session] = field(default_factory=OrderedDict, repr=False)

    def __post_init__(self) -> None:
        if not self.token:
            self.token = secrets.token_urlsafe(self.limits.token_bytes)

    @classmethod
    def for_address(
        cls,
        scheme: str,
        host: str,
        port: int,
        extra_hosts: Iterable[str] = (),
        limits: WebLimits | None = None,
    ) -> WebAccess:
        """The access of a listener bound to ``host:port`` (an IP address) over ``scheme``.

        The page's origin names the bound address, or for an unspecified one (``0.0.0.0``,
        ``::``) the first of ``extra_hosts`` (``web.allowedHosts``).
        """
        shown = f"[{host}]" if ":" in host else host
        names = [*extra_hosts]
        if not is_unspecified(host):
            names.insert(0, shown)
        if is_loopback(host):
            names.append("localhost")
        default_port = (scheme, port) in (("http", 80), ("https", 443))
        hosts = {f"{name.lower()}:{port}" for name in names}
        if default_port:
            hosts |= {name.lower() for name in names}
        first = names[0] if names else shown
        return cls(
            origin=f"{scheme}://{first}" + ("" if default_port else f":{port}"),
            allowed_hosts=frozenset(hosts),
            port=port,
            loopback=is_loopback(host),
            secure=scheme == "https",
            limits=limits or WebLimits(),
        )

    def cookie_name(self, host: str) -> str:
        """The session cookie's name for a request to ``host`` (its checked ``Host`` header): per
        port the browser sees (browsers share cookies across a host's ports; two daemons forwarded
        to two local ports keep two cookies), with the ``__Host-`` prefix over TLS."""
        _, colon, port = host.rpartition(":")
        seen = port if colon and port.isdigit() and not host.endswith("]") else str(self.port)
        return ("__Host-" if self.secure else "") + f"{COOKIE_PREFIX}{seen}"

    def host_allowed(self, host: str) -> bool:
        """Whether a (lower-cased) ``Host`` header value names this page."""
        if host in self.allowed_hosts:
            return True
        found = _HOST_PORT.match(host)
        return self.loopback and found is not None and is_loopback(found["name"])

    @property
    def link(self) -> str:
        """The ready URL that opens the page (it carries the token: give it only to the person)."""
        return f"{self.origin}/?{urlencode({'token': self.token})}"

    def token_matches(self, given: str) -> bool:
        """Whether ``given`` is the page's token (compared in constant time)."""
        return hmac.compare_digest(given.encode(), self.token.encode())

    def open_session(self) -> tuple[str, str]:
        """Start a browser session; returns its id (the cookie) and its CSRF token."""
        sid = secrets.token_urlsafe(self.limits.token_bytes)
        csrf = secrets.token_urlsafe(self.limits.token_bytes)
        self._sessions[sid] = _Session(csrf, time.monotonic())
        while len(self._sessions) > self.limits.max_sessions:
            self._sessions.popitem(last=False)
        return sid, csrf

    def session_csrf(self, sid: str) -> str | None:
        """The CSRF token of a live session (its use refreshed), or None when unknown or idle too long."""
        found = self._sessions.get(sid)
        if found is None:
            return None
        now = time.monotonic()
        if now - found.last_used > self.limits.session_idle_s:
            del self._sessions[sid]
            return None
        found.last_used = now
        self._sessions.move_to_end(sid)
        return found.csrf


#: A ``Host`` header value: a name or an address (IPv6 in brackets), then an optional port.
_HOST_PORT: Final = re.compile(r"^(?P<name>\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::[0-9]{1,5})?$")


def _headers(scope: Scope) -> tuple[dict[str, str], str | None]:
    """The request's headers by lower-case name, and the name of a :data:`SINGLE_HEADERS` one sent twice."""
    found: dict[str, str] = {}
    twice: str | None = None
    for key, value in scope.get("headers", ()):
        name = key.decode("latin-1").lower()
        if name in found and name in SINGLE_HEADERS:
            twice = twice or name
        found.setdefault(name, value.decode("latin-1"))
    return found, twice


def _cookie(headers: dict[str, str], name: str) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:  # a malformed Cookie header is no session: refused below
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _same_url(scope: Scope, drop: str) -> str:
    """The request's own path and query without the ``drop`` parameter, as a safe ``Location``: from
    the raw bytes, leading slashes and backslashes made one "/" (never ``//other.site``), anything
    but URL characters percent-encoded, the query left percent-encoded as it came."""
    raw = scope.get("raw_path") or scope.get("path", "/").encode()
    path = "/" + quote(raw.lstrip(b"/\\"), safe=URL_SAFE)
    kept = [
        part
        for part in scope.get("query_string", b"").split(b"&")
        if part and unquote_plus(part.partition(b"=")[0].decode("latin-1")) != drop
    ]
    return path + ("?" + quote(b"&".join(kept), safe=URL_SAFE) if kept else "")


def _wants_html(headers: dict[str, str]) -> bool:
    return "text/html" in headers.get("accept", "")


class AccessGuard:
    """ASGI middleware enforcing :class:`WebAccess` on every request of the web listener.

    Args:
        app: The application (the same one the Unix socket serves).
        access: The listener's token and sessions.
    """

    def __init__(self, app: ASGIApp, access: WebAccess) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        send = self._with_security_headers(send)
        headers, twice = _headers(scope)
        if twice is not None:
            await _refuse(send, 400, "invalid_request", f"the {twice} header came twice; send it once")
            return
        host = headers.get("host", "").lower()
        if not self.access.host_allowed(host):
            await _refuse(
                send, 421, "forbidden_host",
                f"the Host header {host or '(none)'!r} is not this page's address; open {self.access.origin}",
            )  # fmt: skip
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and scope["method"] == "GET":
            await self._exchange(scope, send, query, host)
            return
        csrf = self._authenticate(headers)
        if csrf is None:
            await self._unauthenticated(scope, send, headers, bounced=BOUNCE_PARAM in query)
            return
        if BOUNCE_PARAM in query and scope["method"] == "GET":  # the reload came with the cookie
            await _redirect(send, _same_url(scope, drop=BOUNCE_PARAM))
            return
        problem = self._cross_site(scope["method"], headers, csrf, host)
        if problem is not None:
            await _refuse(send, 403, "forbidden", problem)
            return
        state = scope.setdefault("state", {})
        state[WEB_STATE_KEY] = True
        state[CSRF_STATE_KEY] = csrf
        state[CLIENT_STATE_KEY] = WEB_CLIENT
        scope["headers"] = [
            (k, v) for k, v in scope.get("headers", ()) if k.lower() != CLIENT_HEADER.encode()
        ]
        await self.app(scope, receive, send)

    async def _unauthenticated(
        self, scope: Scope, send: Send, headers: dict[str, str], bounced: bool
    ) -> None:
        """Refuse a request without a credential (401); a page navigation that came without any
        session cookie (SameSite=Strict withholds it when another site links here) first gets one
        reload from this origin, marked with :data:`BOUNCE_PARAM` so that it happens once."""
        navigation = scope["method"] == "GET" and _wants_html(headers)
        no_cookie = (
            _cookie(headers, self.access.cookie_name(headers.get("host", ""))) is None
            and "authorization" not in headers
        )
        if navigation and no_cookie and not bounced:
            target = _same_url(scope, drop=BOUNCE_PARAM)
            target += ("&" if "?" in target else "?") + f"{BOUNCE_PARAM}=1"
            await _respond(send, 401, _bounce_page(target), b"text/html; charset=utf-8")
            return
        await _unauthorized(send, html=_wants_html(headers))

    def _authenticate(self, headers: dict[str, str]) -> str | None:
        """The request's CSRF token ("" for a bearer token), or None when it has no valid credential."""
        auth = headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        if scheme.lower() == "bearer" and given and self.access.token_matches(given.strip()):
            return ""
        sid = _cookie(headers, self.access.cookie_name(headers.get("host", "")))
        return self.access.session_csrf(sid) if sid else None

    def _cross_site(self, method: str, headers: dict[str, str], csrf: str, host: str) -> str | None:
        """Why a request is refused as cross-site, or None (``host``: its checked Host header)."""
        if method in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        own = f"{'https' if self.access.secure else 'http'}://{host}"
        if origin is not None and origin.lower() != own:
            return f"a {method} from origin {origin!r} is refused: only the page itself ({own}) may change things"
        if csrf == "":  # bearer token: no ambient credential, nothing to forge
            return None
        if origin is None:
            return (
                f"a {method} without an Origin header is refused on the page's session; send it from the page"
            )
        given = headers.get(CSRF_HEADER, "")
        if not given or not hmac.compare_digest(given.encode(), csrf.encode()):
            return f"a {method} without this session's {CSRF_HEADER} header is refused; reload the page"
        return None

    async def _exchange(self, scope: Scope, send: Send, query: dict[str, str], host: str) -> None:
        """Trade a valid ``?token=`` for a session cookie and redirect to the same path without it."""
        if not self.access.token_matches(query["token"]):
            await _unauthorized(send, html=True, stale=True)
            return
        sid, _csrf = self.access.open_session()
        attributes = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if self.access.secure else "")
        cookie = f"{self.access.cookie_name(host)}={sid}{attributes}"
        await _redirect(send, _same_url(scope, drop="token"), cookie)

    @staticmethod
    def _with_security_headers(send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
            await send(message)

        return wrapped


_UNAUTHORIZED_HTML: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Octipus: open the page's link</title></head>
<body><h1>Octipus</h1><p>{what} Run <code>octipusctl web</code> on the machine where octipusd runs
and open the link it prints (<code>octipusctl web --open</code> opens it for you).</p></body></html>
"""


_BOUNCE_HTML: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="0;url={target}"><title>Octipus</title></head>
<body><h1>Octipus</h1><p><a href="{target}">Continue to the page</a></p></body></html>
"""


def _bounce_page(target: str) -> bytes:
    """The page that reloads ``target`` (a same-origin path) once, from this origin."""
    return _BOUNCE_HTML.format(target=escape(target)).encode()


async def _redirect(send: Send, location: str, cookie: str | None = None) -> None:
    """A 303 to ``location`` (a path built by :func:`_same_url`), setting ``cookie`` when given."""
    headers = [(b"location", location.encode("ascii")), (b"cache-control", b"no-store")]
    if cookie is not None:
        headers.append((b"set-cookie", cookie.encode("ascii")))
    headers.append((b"content-length", b"0"))
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _unauthorized(send: Send, html: bool, stale: bool = False) -> None:
    what = (
        "This link's token is not the page's current one (octipusd makes a new one at each start)."
        if stale
        else "This page needs the link with its token."
    )
    if html:
        body = _UNAUTHORIZED_HTML.format(what=what).encode()
        await _respond(send, 401, body, b"text/html; charset=utf-8")
        return
    await _refuse(
        send,
        401,
        "unauthorized",
        f"{what} Run octipusctl web for the link, or send Authorization: Bearer <token>",
    )


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"code": code, "message": message}).encode()
    await _respond(send, status, body, b"application/json")


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="octipus"'))
    message: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": headers}
    await send(message)
    await send({"type": "http.response.body", "body": body})
