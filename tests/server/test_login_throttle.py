"""Guessing the token (issue 39): 300 wrong tokens were answered in 0.7 s. Wrong tokens, on the
API and in the login form alike, are now slowed and then refused per client (429 with
``Retry-After``) while the right token still works from any other client; a client is the
address it connects from, a forwarded one only from a proxy named as trusted. The policy itself
is tested on a clock of the test's own; over HTTP, with a small policy, nothing is timed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentrunner.interfaces.server.throttle import LoginThrottle, Refused, ThrottlePolicy, client_of
from tests.runner.conftest import Agent
from tests.server.conftest import ServerThread

TOKEN = "the-right-token"
RIGHT = {"authorization": f"Bearer {TOKEN}"}
WRONG = {"authorization": "Bearer a-guess"}
FAST = ThrottlePolicy(free=2, limit=4, delay_s=0.001, max_delay_s=0.002)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:  # the wait recorded, not waited
        self.slept.append(seconds)


def throttle(policy: ThrottlePolicy | None = None) -> tuple[LoginThrottle, Clock]:
    clock = Clock()
    return LoginThrottle(TOKEN, policy, clock=clock, sleep=clock.sleep), clock


async def test_wrong_tokens_at_once_then_slower_then_refused_till_the_window_ends() -> None:
    guard, clock = throttle()  # the policy serve runs with
    policy = guard.policy
    for _ in range(policy.limit):
        assert not await guard.check("203.0.113.5", "guess")
        clock.now += 1
    assert clock.slept[: policy.limit - policy.free] == [0.25, 0.5, 1.0, 2.0] + [4.0] * (
        policy.limit - policy.free - 4
    )
    assert len(clock.slept) == policy.limit - policy.free  # the first `free` waited nothing
    with pytest.raises(Refused) as refused:
        await guard.check("203.0.113.5", TOKEN)  # the right token too: not even compared
    assert refused.value.retry_after == policy.window_s - policy.limit
    clock.now += 300
    with pytest.raises(Refused) as later:
        await guard.check("203.0.113.5", "guess")
    assert later.value.retry_after == policy.window_s - policy.limit - 300
    assert await guard.check("203.0.113.6", TOKEN)  # another client: as if nothing happened
    clock.now += policy.window_s  # the window ended: forgotten, answered at once again
    slept = len(clock.slept)
    assert await guard.check("203.0.113.5", TOKEN)
    assert not await guard.check("203.0.113.5", "guess") and len(clock.slept) == slept
    assert len(guard) == 1


@pytest.mark.parametrize("limit", [3, 7])
async def test_the_refusal_comes_after_the_limit_whatever_it_is(limit: int) -> None:
    guard, _ = throttle(ThrottlePolicy(free=1, limit=limit))
    answers = []
    for _ in range(limit + 2):
        try:
            answers.append(await guard.check("198.51.100.7", "guess"))
        except Refused:
            answers.append(None)
    assert answers == [False] * limit + [None, None]


async def test_an_ipv6_client_is_its_64_block_and_a_mapped_ipv4_its_address() -> None:
    assert (
        client_of("2001:db8:1:2:aaaa::1")
        == client_of("2001:db8:1:2:bbbb::9")
        == ("2001:db8:1:2::/64")
    )
    assert client_of("2001:db8:1:3::1") != client_of("2001:db8:1:2::1")
    assert client_of("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_of(None) == "unknown"
    guard, _ = throttle(ThrottlePolicy(free=0, limit=2))
    for host in ("2001:db8:1:2::1", "2001:db8:1:2::2"):  # one host, two of its addresses
        assert not await guard.check(host, "guess")
    with pytest.raises(Refused):
        await guard.check("2001:db8:1:2::3", TOKEN)
    assert await guard.check("2001:db8:1:3::1", TOKEN)


async def test_the_table_is_bounded_and_forgets_the_oldest_first() -> None:
    guard, clock = throttle(ThrottlePolicy(free=0, limit=1, max_clients=50))
    for n in range(1000):
        assert not await guard.check(f"10.0.{n // 256}.{n % 256}", "guess")
        clock.now += 0.01
    assert len(guard) == 50
    assert await guard.check("10.0.0.0", TOKEN)  # the first: forgotten for a newer one
    with pytest.raises(Refused):
        await guard.check("10.0.3.231", TOKEN)  # the last: remembered
    clock.now += guard.policy.window_s
    assert not await guard.check("192.0.2.1", "guess")
    assert len(guard) == 1  # every window ended: only the newest failure is kept


# -- over HTTP -------------------------------------------------------------------------------


@contextlib.contextmanager
def serving(project: Path, policy: ThrottlePolicy, **config: Any) -> Iterator[str]:
    """The app under ``agentrunner serve``'s uvicorn configuration (``config``: its options)."""
    from agentrunner.interfaces.server import create_app
    from agentrunner.interfaces.server.protocol import uvicorn_config

    app = create_app(project, token=TOKEN, login_policy=policy)
    running = ServerThread(app, uvicorn_config(app, log_level="critical", **config))
    try:
        yield running.url
    finally:
        running.stop()


def client(source: str = "127.0.0.1") -> httpx2.Client:
    """A client whose connections come from ``source`` (any 127.x.y.z reaches the server)."""
    return httpx2.Client(
        transport=httpx2.HTTPTransport(local_address=source), timeout=30, follow_redirects=False
    )


@pytest.mark.parametrize("limit", [3, 6])
def test_wrong_bearer_tokens_are_refused_per_client_with_retry_after(
    agent: Agent, project: Path, limit: int
) -> None:
    agent("helper")
    policy = ThrottlePolicy(free=1, limit=limit, delay_s=0.001, max_delay_s=0.002)
    with serving(project, policy) as url, client() as guesser, client("127.0.0.2") as other:
        answers = [guesser.get(f"{url}/agents", headers=WRONG).status_code for _ in range(9)]
        assert answers == [401] * limit + [429] * (9 - limit)
        refused = guesser.get(f"{url}/agents", headers=RIGHT)  # from there, even the right one
        assert refused.status_code == 429
        assert 0 < int(refused.headers["retry-after"]) <= policy.window_s
        error = refused.json()["error"]
        assert error["code"] == "unauthorized"
        assert error["message"] == "too many wrong tokens from 127.0.0.1"
        assert "Try again in" in error["hint"]
        assert guesser.get(f"{url}/agents").status_code == 401  # no token: not a guess
        assert guesser.get(f"{url}/health").status_code == 200
        # another client: the right token works, and its own wrong ones are its own count
        assert other.get(f"{url}/agents", headers=RIGHT).status_code == 200
        assert other.get(f"{url}/agents", headers=WRONG).status_code == 401
        assert other.get(f"{url}/agents", headers=RIGHT).status_code == 200


def test_the_login_form_counts_with_the_api_and_says_when_to_try_again(
    agent: Agent, project: Path
) -> None:
    agent("helper")
    with serving(project, FAST) as url, client() as guesser, client("127.0.0.2") as person:
        for _ in range(2):
            assert guesser.get(f"{url}/agents", headers=WRONG).status_code == 401
        guesser.get(f"{url}/login")
        csrf = guesser.cookies["ar_csrf"]
        for _ in range(2):
            wrong = guesser.post(f"{url}/login", data={"csrf": csrf, "token": "a-guess"})
            assert wrong.status_code == 401 and "not this server" in wrong.text
        refused = guesser.post(f"{url}/login", data={"csrf": csrf, "token": TOKEN})
        assert refused.status_code == 429 and "ar_session" not in refused.cookies
        assert 0 < int(refused.headers["retry-after"]) <= FAST.window_s
        assert "Too many wrong tokens from this address: try again in 15 min" in refused.text
        assert guesser.get(f"{url}/agents", headers=RIGHT).status_code == 429

        person.get(f"{url}/login")
        fields = {"csrf": person.cookies["ar_csrf"], "token": TOKEN, "next": "/ui/team"}
        logged_in = person.post(f"{url}/login", data=fields)
        assert logged_in.status_code == 303 and "ar_session" in logged_in.cookies
        assert person.get(f"{url}/ui/team").status_code == 200


def test_the_bearer_scheme_is_case_insensitive(agent: Agent, project: Path) -> None:
    """RFC 7235: ``bearer`` and ``BEARER`` are the scheme too; only the token is compared."""
    agent("helper")
    policy = ThrottlePolicy(free=10, limit=20)
    with serving(project, policy) as url, client() as caller:
        for accepted in (
            f"Bearer {TOKEN}",
            f"bearer {TOKEN}",
            f"BEARER {TOKEN}",
            f"Bearer  {TOKEN}",
        ):
            assert caller.get(f"{url}/agents", headers={"authorization": accepted}).status_code == (
                200
            ), accepted
        for refused in (
            f"Basic {TOKEN}",
            f"Bearer{TOKEN}",
            TOKEN,
            f"bearer {TOKEN.upper()}",
            f"Bearer {TOKEN}x",
        ):
            answer = caller.get(f"{url}/agents", headers={"authorization": refused})
            assert answer.status_code == 401, refused


def test_x_forwarded_for_names_the_client_only_from_a_trusted_proxy(
    agent: Agent, project: Path
) -> None:
    agent("helper")
    spoofed = [{**WRONG, "x-forwarded-for": f"198.51.100.{n}"} for n in range(8)]
    with serving(project, FAST) as url, client() as guesser:  # serve's default: no proxy
        answers = [guesser.get(f"{url}/agents", headers=h).status_code for h in spoofed]
        assert answers == [401] * FAST.limit + [429] * (8 - FAST.limit)

    with serving(project, FAST, trusted_proxies=["127.0.0.1"]) as url, client() as proxy:
        # behind a proxy: each client of the proxy has its own count, the proxy none
        far = {"x-forwarded-for": "203.0.113.5"}
        answers = [
            proxy.get(f"{url}/agents", headers={**WRONG, **far}).status_code for _ in range(6)
        ]
        assert answers == [401] * FAST.limit + [429] * (6 - FAST.limit)
        refused = proxy.get(f"{url}/agents", headers={**RIGHT, **far})
        assert refused.json()["error"]["message"] == "too many wrong tokens from 203.0.113.5"
        near = {"x-forwarded-for": "203.0.113.6"}
        assert proxy.get(f"{url}/agents", headers={**RIGHT, **near}).status_code == 200
        assert proxy.get(f"{url}/agents", headers=RIGHT).status_code == 200  # the proxy itself
        # a client that names another before the proxy's own entry is the one the proxy saw
        chain = {"x-forwarded-for": "198.51.100.1, 203.0.113.5"}
        assert proxy.get(f"{url}/agents", headers={**RIGHT, **chain}).status_code == 429
