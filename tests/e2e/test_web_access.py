"""The web listener's access rules on a real daemon (issue 16, item 1): the link from
``octipusctl web``, its token traded for an HttpOnly SameSite=Strict cookie, Host (DNS rebinding),
Origin and CSRF on state-changing requests, the Content-Security-Policy, the bearer token for
programs, and the listener's settings (off, a non-loopback address, TLS)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from octipusd.testing.harness import DaemonHarness

UNUSED_MODEL = "http://127.0.0.1:9"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonHarness]:
    with DaemonHarness(tmp_path / "d", UNUSED_MODEL) as started:
        yield started


def _split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    token = parse_qs(parts.query)["token"][0]
    return f"{parts.scheme}://{parts.netloc}", token


def _browser(url: str) -> httpx.Client:
    """A client that opened the link (it holds the session cookie), and the page's CSRF token."""
    client = httpx.Client(timeout=30)
    first = client.get(url, follow_redirects=False)
    assert first.status_code == 303, first.text
    return client


def _csrf(client: httpx.Client, origin: str) -> str:
    page = client.get(f"{origin}/", headers={"Accept": "text/html"})
    assert page.status_code == 200
    marker = '<meta name="csrf-token" content="'
    start = page.text.index(marker) + len(marker)
    return page.text[start : page.text.index('"', start)]


def _cookie_name(origin: str) -> str:
    return f"octipus_session_{urlsplit(origin).port}"


def _raw(origin: str, head: str) -> tuple[int, dict[str, str]]:
    """Send a request's head as written (a target httpx would normalise, a header twice); its status
    and headers (the last of each name)."""
    parts = urlsplit(origin)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(head.encode("utf-8") + b"Connection: close\r\n\r\n")
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    lines = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}


def test_the_link_trades_its_token_for_a_strict_httponly_cookie_and_pages_carry_a_strict_csp(
    daemon: DaemonHarness,
) -> None:
    url = daemon.web_url()
    origin, token = _split(url)
    assert urlsplit(url).hostname == "127.0.0.1" and len(token) >= 40
    client = httpx.Client(timeout=30)
    first = client.get(url, follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/"  # the token leaves the address bar and the history
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert cookie.startswith(f"{_cookie_name(origin)}=")  # browsers share cookies across ports
    assert token not in cookie
    page = client.get(f"{origin}/")
    assert page.status_code == 200 and "<h1>" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    health = client.get(f"{origin}/v1/health").json()
    assert health["web"] == {"origin": origin, "tls": False}
    # the link is told only on the Unix socket, never by the web listener
    refused = client.get(f"{origin}/v1/web")
    assert refused.status_code == 403 and "Unix socket" in refused.json()["message"]
    assert daemon.client().request("GET", "/web")["url"] == url


def test_requests_without_the_token_or_with_a_stale_one_are_refused(daemon: DaemonHarness) -> None:
    origin, token = _split(daemon.web_url())
    bare = httpx.get(f"{origin}/v1/sessions", timeout=30)
    assert bare.status_code == 401 and bare.json()["code"] == "unauthorized"
    assert "octipusctl web" in bare.json()["message"]
    page = httpx.get(f"{origin}/inbox?x=1", headers={"Accept": "text/html"}, timeout=30)
    # no cookie at all (another site's link): one reload from this origin, which then says what to do
    assert page.status_code == 401 and "octipusctl web" not in page.text
    assert 'content="0;url=/inbox?x=1&amp;octipus_continue=1"' in page.text
    again = httpx.get(f"{origin}/inbox?x=1&octipus_continue=1", headers={"Accept": "text/html"}, timeout=30)
    assert again.status_code == 401 and "octipusctl web" in again.text and "refresh" not in again.text
    stale = httpx.get(f"{origin}/?token=not-{token}", timeout=30, follow_redirects=False)
    assert stale.status_code == 401 and "set-cookie" not in stale.headers
    forged = httpx.get(f"{origin}/v1/sessions", cookies={_cookie_name(origin): "forged"}, timeout=30)
    assert forged.status_code == 401
    page = httpx.get(
        f"{origin}/", cookies={_cookie_name(origin): "forged"}, headers={"Accept": "text/html"}, timeout=30
    )
    assert page.status_code == 401 and "octipusctl web" in page.text  # a stale session: no reload
    bearer = httpx.get(f"{origin}/v1/sessions", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert bearer.status_code == 200 and bearer.json() == []


def test_a_foreign_host_header_is_refused_even_with_the_token(daemon: DaemonHarness) -> None:
    origin, token = _split(daemon.web_url())
    for host in ("evil.example:80", f"attacker.test:{urlsplit(origin).port}", ""):
        refused = httpx.get(
            f"{origin}/v1/sessions", headers={"Host": host, "Authorization": f"Bearer {token}"}, timeout=30
        )
        assert refused.status_code == 421, host
        assert refused.json()["code"] == "forbidden_host"
    refused = httpx.get(f"{origin}/?token={token}", headers={"Host": "rebound.example"}, timeout=30)
    assert refused.status_code == 421 and "set-cookie" not in refused.headers
    local = httpx.get(
        f"{origin}/v1/sessions",
        headers={"Host": f"localhost:{urlsplit(origin).port}", "Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert local.status_code == 200


def test_a_port_forward_to_another_local_port_is_accepted_on_loopback(daemon: DaemonHarness) -> None:
    """``ssh -N -L 8765:127.0.0.1:PORT`` sends ``Host: 127.0.0.1:8765``; the page works through it."""
    url = daemon.web_url()
    origin, token = _split(url)
    forwarded = "127.0.0.1:8765"
    client = httpx.Client(timeout=30, headers={"Host": forwarded})
    first = client.get(url, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    # named for the port the browser sees: two daemons forwarded to two local ports keep two cookies
    assert first.headers["set-cookie"].startswith("octipus_session_8765=")
    csrf = _csrf(client, origin)
    body = {"workspace": str(daemon.workspace), "adapter": "claude-code", "title": "forwarded"}
    made = client.post(
        f"{origin}/v1/sessions", json=body, headers={"Origin": f"http://{forwarded}", "X-CSRF-Token": csrf}
    )
    assert made.status_code == 201, made.text
    bearer = {"Authorization": f"Bearer {token}"}
    for host in ("localhost:9000", "[::1]:8765", "127.0.0.2:1"):
        assert (
            httpx.get(f"{origin}/v1/sessions", headers={**bearer, "Host": host}, timeout=30).status_code
            == 200
        )
    for host in ("localhost.evil.example:8765", "evil.example:8765"):
        refused = httpx.get(f"{origin}/v1/sessions", headers={**bearer, "Host": host}, timeout=30)
        assert refused.status_code == 421, host


def test_the_exchange_redirects_only_to_a_path_of_its_own(daemon: DaemonHarness) -> None:
    origin, token = _split(daemon.web_url())
    host = urlsplit(origin).netloc
    cases = {
        f"//evil.example/x?token={token}": "/evil.example/x",
        f"/\\evil.example/x?token={token}": "/evil.example/x",
        f"///\\/evil.example?a=b%20c&token={token}&d=%E2%82%AC": "/evil.example?a=b%20c&d=%E2%82%AC",
        f"/caf%E2%82%AC?token={token}": "/caf%E2%82%AC",
        f"/a%0D%0Aset-cookie:x=1?token={token}": "/a%0D%0Aset-cookie:x=1",
    }
    for target, location in cases.items():
        status, headers = _raw(origin, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n")
        assert (status, headers.get("location")) == (303, location), (target, headers)
        assert headers["set-cookie"].startswith(_cookie_name(origin))


def test_only_a_get_trades_the_token(daemon: DaemonHarness) -> None:
    origin, token = _split(daemon.web_url())
    head = httpx.head(f"{origin}/?token={token}", timeout=30)
    assert head.status_code == 401 and "set-cookie" not in head.headers
    post = httpx.post(f"{origin}/v1/sessions?token={token}", json={}, headers={"Origin": origin}, timeout=30)
    assert post.status_code == 401 and "set-cookie" not in post.headers


def test_a_checked_header_sent_twice_is_refused(daemon: DaemonHarness) -> None:
    url = daemon.web_url()
    origin, token = _split(url)
    host = urlsplit(origin).netloc
    client = _browser(url)
    sid = client.cookies[_cookie_name(origin)]
    twice = {
        "host": f"Host: {host}\r\nHost: evil.example\r\n",
        "authorization": f"Host: {host}\r\nAuthorization: Bearer {token}\r\nAuthorization: Bearer x\r\n",
        "cookie": f"Host: {host}\r\nCookie: {_cookie_name(origin)}={sid}\r\nCookie: a=b\r\n",
        "origin": f"Host: {host}\r\nAuthorization: Bearer {token}\r\nOrigin: {origin}\r\nOrigin: http://evil\r\n",
    }
    for name, head in twice.items():
        status, _ = _raw(origin, f"GET /v1/sessions HTTP/1.1\r\n{head}")
        assert status == 400, name
    status, _ = _raw(
        origin, f"GET /v1/sessions HTTP/1.1\r\nHost: {host}\r\nCookie: {_cookie_name(origin)}={sid}\r\n"
    )
    assert status == 200


def test_state_changes_need_the_pages_own_origin_and_its_csrf_token(daemon: DaemonHarness) -> None:
    url = daemon.web_url()
    origin, token = _split(url)
    client = _browser(url)
    csrf = _csrf(client, origin)
    assert len(csrf) >= 40
    body = {"workspace": str(daemon.workspace), "adapter": "claude-code", "title": "from the page"}
    cross = client.post(
        f"{origin}/v1/sessions", json=body, headers={"Origin": "http://evil.example", "X-CSRF-Token": csrf}
    )
    assert cross.status_code == 403 and "evil.example" in cross.json()["message"]
    no_origin = client.post(f"{origin}/v1/sessions", json=body, headers={"X-CSRF-Token": csrf})
    assert no_origin.status_code == 403
    no_csrf = client.post(f"{origin}/v1/sessions", json=body, headers={"Origin": origin})
    assert no_csrf.status_code == 403 and "x-csrf-token" in no_csrf.json()["message"]
    wrong = client.post(
        f"{origin}/v1/sessions", json=body, headers={"Origin": origin, "X-CSRF-Token": "x" * 43}
    )
    assert wrong.status_code == 403
    assert daemon.client().request("GET", "/sessions") == []  # nothing was created by a refusal
    made = client.post(f"{origin}/v1/sessions", json=body, headers={"Origin": origin, "X-CSRF-Token": csrf})
    assert made.status_code == 201, made.text
    assert [s["title"] for s in daemon.client().request("GET", "/sessions")] == ["from the page"]
    # a program with the bearer token has no ambient credential to forge, but a foreign Origin is refused
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.post(f"{origin}/v1/sessions", json=body, headers=bearer, timeout=30).status_code == 201
    foreign = httpx.post(
        f"{origin}/v1/sessions", json=body, headers={**bearer, "Origin": "http://evil.example"}, timeout=30
    )
    assert foreign.status_code == 403


def test_a_daemon_with_the_page_off_says_so_and_octipusctl_web_fails(tmp_path: Path) -> None:
    with DaemonHarness(tmp_path / "d", UNUSED_MODEL, extra_env={"OCTIPUS_WEB__ENABLED": "false"}) as daemon:
        assert daemon.client().request("GET", "/health")["web"] is None
        with pytest.raises(RuntimeError, match=r"web\.enabled"):
            daemon.web_url()


def test_a_non_loopback_address_without_allow_remote_stops_the_start(tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "d", UNUSED_MODEL, extra_env={"OCTIPUS_WEB__HOST": "0.0.0.0"})
    with pytest.raises(RuntimeError) as failed:
        daemon.start(timeout=30)
    assert "web.allowRemote" in str(failed.value) and "SSH" in str(failed.value)


def test_a_web_port_in_use_stops_the_start_and_leaves_no_unix_socket(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        daemon = DaemonHarness(tmp_path / "d", UNUSED_MODEL, extra_env={"OCTIPUS_WEB__PORT": str(port)})
        with pytest.raises(RuntimeError) as failed:
            daemon.start(timeout=30)
    assert "web.port" in str(failed.value)
    assert not daemon.socket.exists()


def test_allow_remote_serves_https_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    env = {
        "OCTIPUS_WEB__HOST": "0.0.0.0",
        "OCTIPUS_WEB__ALLOWREMOTE": "true",
        "OCTIPUS_WEB__ALLOWEDHOSTS": '["127.0.0.1"]',
        "OCTIPUS_WEB__TLSCERTFILE": str(cert),
        "OCTIPUS_WEB__TLSKEYFILE": str(key),
    }
    with DaemonHarness(tmp_path / "d", UNUSED_MODEL, extra_env=env) as daemon:
        url = daemon.web_url()
        assert url.startswith("https://127.0.0.1:")
        client = httpx.Client(verify=ssl.create_default_context(cafile=str(cert)), timeout=30)
        first = client.get(url, follow_redirects=False)
        assert first.status_code == 303 and "Secure" in first.headers["set-cookie"]
        assert first.headers["set-cookie"].startswith(f"__Host-octipus_session_{urlsplit(url).port}=")
        assert client.get(url.split("/?")[0] + "/v1/sessions").status_code == 200
        with pytest.raises(httpx.HTTPError):
            httpx.get(url.replace("https://", "http://"), timeout=10)


def test_octipusctl_web_prints_only_the_link_on_stdout(daemon: DaemonHarness) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "octipusctl"), "--socket", str(daemon.socket), "web"],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == daemon.web_url()
    assert "ssh -N -L" in done.stderr
    health = subprocess.run(
        [str(Path(sys.executable).parent / "octipusctl"), "--socket", str(daemon.socket), "health"],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    token = _split(daemon.web_url())[1]
    assert "web page: http://127.0.0.1:" in health.stdout and token not in health.stdout + health.stderr


def test_an_open_activity_feed_ends_when_the_daemon_stops(tmp_path: Path) -> None:
    """The page's feed never ends by itself; a stopping daemon ends it, so the web server's
    shutdown does not wait out its grace and cancel it."""
    daemon = DaemonHarness(tmp_path / "d", UNUSED_MODEL).start()
    origin, token = _split(daemon.web_url())
    frames: list[bytes] = []
    with httpx.stream(
        "GET", f"{origin}/v1/activity", headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as feed:
        chunks = feed.iter_bytes()
        frames.append(next(chunks))  # the opening comment: the feed is live
        assert daemon.stop() == 0
        frames.extend(chunks)  # ends: the daemon closed it, no read timeout
    assert frames[0].startswith(b": activity")
    assert "graceful shutdown exceeded" not in daemon.log()
