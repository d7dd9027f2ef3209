"""Who may see the dashboard (issue 28): a login with the token on a guarded server (a session
cookie that opens the pages and nothing else), CSRF on every form, Host checks on loopback, and
errors as pages. Over HTTP; the browser's side is in tests/browser/."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from agentrunner.interfaces.server.dashboard.auth import session_value
from tests.runner.conftest import Agent


def _csrf(client: httpx2.Client, url: str) -> str:
    """The CSRF value a page gives a new browser (its cookie; the forms carry the same)."""
    answer = client.get(url + "/login")
    value = client.cookies.get("ar_csrf")
    assert value, answer.headers
    assert f'value="{value}"' in answer.text  # the form carries what the cookie holds
    return value


def test_logging_in_sets_a_session_cookie_that_opens_the_pages_only(
    agent: Agent, server: Any
) -> None:
    agent("ceo", "name: CEO")
    agent("cfo", "name: CFO\nreports_to: ceo")
    srv = server(token="secret-token")
    with httpx2.Client(follow_redirects=False, timeout=30) as client:
        away = client.get(srv.url + "/ui/team?x=1")
        assert away.status_code == 303
        assert away.headers["location"] == "/login?next=%2Fui%2Fteam%3Fx%3D1"
        assert client.get(srv.url + "/ui/static/app.css").status_code == 200  # styled login

        csrf = _csrf(client, srv.url)
        wrong = client.post(
            srv.url + "/login", data={"csrf": csrf, "token": "guess", "next": "/ui/team"}
        )
        assert wrong.status_code == 401
        assert "not this server" in wrong.text
        assert "ar_session" not in wrong.headers.get("set-cookie", "")

        right = client.post(
            srv.url + "/login", data={"csrf": csrf, "token": "secret-token", "next": "/ui/team"}
        )
        assert right.status_code == 303
        assert right.headers["location"] == "/ui/team"
        cookie = right.headers["set-cookie"]
        assert "ar_session=" in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert "secret-token" not in cookie

        team = client.get(srv.url + "/")
        assert team.status_code == 200
        assert "CEO" in team.text
        assert "CFO" in team.text
        # The JSON API is not opened by the cookie: it wants the bearer token still.
        assert client.get(srv.url + "/agents").status_code == 401


def test_a_session_of_another_token_is_not_accepted(agent: Agent, server: Any) -> None:
    agent("ceo", "name: CEO")
    srv = server(token="the-new-token")
    stale = {"ar_session": session_value("the-old-token")}
    with httpx2.Client(cookies=stale, follow_redirects=False, timeout=30) as client:
        assert client.get(srv.url + "/").status_code == 303
    fresh = {"ar_session": session_value("the-new-token")}
    with httpx2.Client(cookies=fresh, follow_redirects=False, timeout=30) as client:
        assert client.get(srv.url + "/").status_code == 200


@pytest.mark.parametrize(
    ("target", "lands"),
    [
        ("/ui/costs?days=3", "/ui/costs?days=3"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("", "/"),
    ],
)
def test_after_logging_in_a_browser_goes_only_to_a_page_of_this_site(
    agent: Agent, server: Any, target: str, lands: str
) -> None:
    agent("ceo", "name: CEO")
    srv = server(token="secret-token")
    with httpx2.Client(follow_redirects=False, timeout=30) as client:
        csrf = _csrf(client, srv.url)
        answer = client.post(
            srv.url + "/login", data={"csrf": csrf, "token": "secret-token", "next": target}
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == lands


def test_a_form_without_its_csrf_field_or_from_another_site_is_refused(
    agent: Agent, server: Any
) -> None:
    agent("ceo", "name: CEO")
    srv = server(token="secret-token")
    with httpx2.Client(follow_redirects=False, timeout=30) as client:
        csrf = _csrf(client, srv.url)
        for data, headers in [
            ({"token": "secret-token"}, {}),  # no field
            ({"token": "secret-token", "csrf": "x" * 43}, {}),  # not the cookie's
            ({"token": "secret-token", "csrf": csrf}, {"origin": "https://evil.example"}),
            ({"token": "secret-token", "csrf": csrf}, {"origin": "null"}),
        ]:
            refused = client.post(srv.url + "/login", data=data, headers=headers)
            assert refused.status_code == 403, (data, headers)
            assert "text/html" in refused.headers["content-type"]
            assert "CSRF" in refused.text
            assert "ar_session" not in refused.headers.get("set-cookie", "")
        same_site = client.post(
            srv.url + "/login",
            data={"token": "secret-token", "csrf": csrf},
            headers={"origin": srv.url},
        )
        assert same_site.status_code == 303


def test_a_form_posted_without_a_session_is_refused_not_redirected(
    agent: Agent, server: Any
) -> None:
    agent("ceo", "name: CEO")
    srv = server(token="secret-token")
    with httpx2.Client(follow_redirects=False, timeout=30) as client:
        csrf = _csrf(client, srv.url)
        answer = client.post(srv.url + "/logout", data={"csrf": csrf})
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthorized"


def test_on_loopback_there_is_no_login_but_forms_still_need_their_csrf_field(
    agent: Agent, server: Any
) -> None:
    agent("ceo", "name: CEO")
    srv = server(token=None)
    with httpx2.Client(follow_redirects=False, timeout=30) as client:
        assert client.get(srv.url + "/").status_code == 200
        assert client.get(srv.url + "/login?next=/ui/team").headers["location"] == "/ui/team"
        assert client.post(srv.url + "/logout", data={}).status_code == 403
        # A name a web page could rebind is refused for the pages as for the API.
        rebound = client.get(srv.url + "/", headers={"host": "evil.example"})
        assert rebound.status_code == 403


def test_errors_on_pages_are_pages_and_the_apis_stay_json(agent: Agent, server: Any) -> None:
    agent("ceo", "name: CEO")
    srv = server(token=None)
    with httpx2.Client(timeout=30) as client:
        page = client.get(srv.url + "/ui/no-such-page")
        assert page.status_code == 404
        assert "text/html" in page.headers["content-type"]
        assert "not_found" in page.text
        api = client.get(srv.url + "/no-such-route")
        assert api.status_code == 404
        assert api.json()["error"]["code"] == "not_found"
        assert client.get(srv.url + "/agents/nobody").json()["error"]["code"] == "agent_not_found"


def _says_what_a_page_may_do(answer: httpx2.Response) -> None:
    policy = answer.headers.get("content-security-policy", "")
    directives = {d.split()[0]: d.split()[1:] for d in policy.split("; ") if d}
    assert directives.get("script-src") == ["'self'"], (answer.url, policy)
    assert directives.get("frame-ancestors") == ["'none'"]
    assert directives.get("object-src") == ["'none'"]
    assert "'unsafe-inline'" not in directives.get("style-src", [])
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "same-origin"  # forms keep their Origin
    assert answer.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("token", ["secret-token", None])
def test_pages_say_what_a_browser_may_do_with_them(
    agent: Agent, server: Any, token: str | None
) -> None:
    """Issue 39: no page said it (a Content-Security-Policy, nosniff, a referrer policy)."""
    agent("ceo", "name: CEO")
    srv = server(token=token)
    with httpx2.Client(follow_redirects=False, timeout=30) as client:
        first = client.get(srv.url + "/")  # the team, or (with a token) sent to log in
        assert first.status_code == (303 if token else 200)
        for answer in (
            first,
            client.get(srv.url + "/login"),  # the form, or (loopback) sent on
            client.get(srv.url + "/ui/static/app.js"),
            client.get(srv.url + "/ui/no-such-page"),
            client.post(srv.url + "/logout", data={}),  # refused: no CSRF field
        ):
            _says_what_a_page_may_do(answer)
        # The JSON API is not a page: never sniffed, nothing more. /docs (Swagger UI) runs an
        # inline script from a CDN's files: no policy of the pages there.
        headers = {"authorization": f"Bearer {token}"} if token else {}
        for path in ("/agents", "/docs", "/openapi.json"):
            answer = client.get(srv.url + path, headers=headers)
            assert answer.status_code == 200, path
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert "content-security-policy" not in answer.headers
        refused = client.get(srv.url + "/agents", headers={"authorization": "Bearer x"})
        assert refused.headers["x-content-type-options"] == "nosniff"


def test_no_template_runs_inline_script() -> None:
    """What the pages' policy (script-src 'self') would refuse: an inline <script>, an on…=
    handler, a javascript: address, a <style> element. Script lives in static/*.js."""
    import re
    from pathlib import Path

    from agentrunner.interfaces.server import dashboard

    templates = sorted((Path(dashboard.__file__).parent / "templates").glob("*.html"))
    assert len(templates) > 15
    for template in templates:
        text = re.sub(r"\{#.*?#\}", "", template.read_text(), flags=re.S)  # not comments
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert re.search(r'\ssrc="/ui/static/[\w.-]+\.js"', tag), (template.name, tag)
        assert not re.search(r"\son[a-z]+\s*=", text), template.name
        assert "javascript:" not in text.lower() and "<style" not in text, template.name
