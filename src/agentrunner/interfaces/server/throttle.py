"""Guessing the token, per client: wrong tokens are answered at once at first (typos), then more
and more slowly, then refused until the client's window ends (429 with ``Retry-After``).

* **One count for the token.** A wrong ``Authorization: Bearer`` on the API and a wrong token
  in the dashboard's login form guess the same secret, so both go through ``LoginThrottle.check``
  and count together. A request without a bearer token guesses nothing and is not counted.
* **A client is its peer address**, an IPv6 one its /64 (the block one host is usually given).
  Behind a reverse proxy every client is the proxy's address unless ``serve --trusted-proxy``
  names it (then uvicorn takes the client from the proxy's ``X-Forwarded-For``); a header a
  client sends itself is never believed.
* **Refused means not looked at.** A refused client's token is not compared, right or wrong: an
  answer that differed would tell a guesser it had found it. Other clients are not affected.
* **Nothing lasts.** A client's failures are forgotten ``window_s`` after its first, so a real
  user who shares an address with a guesser waits at most that long; the table holds at most
  ``max_clients`` (the oldest forgotten first). The slowing is a sleep of the request's own task,
  never of the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["LoginThrottle", "Refused", "ThrottlePolicy", "client_of"]


@dataclass(frozen=True)
class ThrottlePolicy:
    free: int = 5  # wrong tokens answered at once
    limit: int = 20  # wrong tokens after which the client is refused until its window ends
    window_s: float = 900.0  # a client's failures are forgotten this long after its first
    delay_s: float = 0.25  # the wait before answering the first wrong token past ``free``…
    max_delay_s: float = 4.0  # …doubling with each one after it, up to this
    max_clients: int = 10_000  # clients remembered at once (the oldest forgotten first)


class Refused(Exception):
    """Too many wrong tokens from ``client``: it may try again in ``retry_after`` seconds."""

    def __init__(self, client: str, retry_after: int) -> None:
        super().__init__(f"too many wrong tokens from {client}")
        self.client = client
        self.retry_after = retry_after


@dataclass
class _Failures:
    since: float  # the first one, which starts the window
    count: int = 0


class LoginThrottle:
    """The token and the wrong guesses at it, per client."""

    def __init__(
        self,
        token: str,
        policy: ThrottlePolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._token = token.encode()
        self.policy = policy or ThrottlePolicy()
        self._clock = clock
        self._sleep = sleep
        # In the order their windows began (a record's start never changes): the expired and
        # the oldest are at the front.
        self._clients: OrderedDict[str, _Failures] = OrderedDict()

    def __len__(self) -> int:
        """Clients remembered now."""
        return len(self._clients)

    async def check(self, peer: str | None, given: str) -> bool:
        """Whether ``given`` is the token, sent from address ``peer``. A wrong one is counted
        against its client (``client_of``) and answered after its delay; ``Refused``, nothing
        compared, once that client is past the limit."""
        if self._clients:  # else nobody has failed lately: nothing to look up
            self._refuse_if_over(client_of(peer))
        if hmac.compare_digest(given.encode(), self._token):
            return True
        delay = self._failed(client_of(peer))
        if delay > 0:
            await self._sleep(delay)
        return False

    def _refuse_if_over(self, client: str) -> None:
        now = self._clock()
        self._forget_before(now)
        failures = self._clients.get(client)
        if failures is not None and failures.count >= self.policy.limit:
            left = failures.since + self.policy.window_s - now
            raise Refused(client, max(1, math.ceil(left)))

    def _failed(self, client: str) -> float:
        """Count a wrong token; the delay before answering it."""
        now = self._clock()
        self._forget_before(now)
        failures = self._clients.get(client)
        if failures is None:
            while len(self._clients) >= self.policy.max_clients:
                self._clients.popitem(last=False)
            failures = self._clients[client] = _Failures(since=now)
        failures.count += 1
        past = failures.count - self.policy.free
        if past <= 0:
            return 0.0
        return min(self.policy.delay_s * 2.0 ** min(past - 1, 32), self.policy.max_delay_s)

    def _forget_before(self, now: float) -> None:
        window = self.policy.window_s
        while self._clients:
            first = next(iter(self._clients.values()))
            if first.since + window > now:
                return
            self._clients.popitem(last=False)


def client_of(host: str | None) -> str:
    """The client a peer address counts as: the address, an IPv6 one's /64."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
