"""The secrets the runtime holds, one list, and cutting them out of text in every spelling.

``held`` says what is a secret; ``Secrets`` cuts them. The list has one owner (the model
registry's ``secrets``, built from the environment once) and is cut wherever text leaves the
runtime's hands: the HTTP client's errors, every tool's result (a ``full`` agent may read the
environment or a file that holds a key), what a model says (its streamed deltas, its message,
its tool calls' arguments), a run's error, and what telemetry captures. So a secret reaches no
model, row, event, terminal or trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from agentrunner.errors import AgentRunnerError

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "SecretStream", "Secrets", "held", "spellings"]

REDACTED = "[redacted]"
# A shorter value is no credential (a local server's placeholder key, `ollama`, `EMPTY`, or a
# header's `prod`), and cutting it would cut every word that happens to spell it.
MIN_SECRET_CHARS = 8
# The server's bearer token: the runtime's own secret, wherever it runs.
RUNTIME_TOKENS = ("AGENTRUNNER_API_TOKEN",)
# URLs the runtime connects with, whose password (userinfo or `password=` query) is a secret;
# besides these, every OTEL_EXPORTER_OTLP_*ENDPOINT.
_URL_VARIABLES = ("AGENTRUNNER_DATABASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_OTLP = "OTEL_EXPORTER_OTLP_"


def held(env: Mapping[str, str], variables: Iterable[str]) -> Secrets:
    """Every secret the runtime holds, as ``env`` gives them:

    - the value of each of ``variables`` (the providers' ``api_key_env``, ``[security]
      secret_env``) and of ``AGENTRUNNER_API_TOKEN``;
    - each value of the OTLP exporters' headers (``OTEL_EXPORTER_OTLP_HEADERS`` and the
      per-signal ``…_TRACES_HEADERS``, ``…_METRICS_HEADERS``, ``…_LOGS_HEADERS``), and the
      credential after an auth scheme (``Bearer …``) on its own;
    - the password of each URL the runtime connects with (``AGENTRUNNER_DATABASE_URL``, the
      OTLP endpoints, the proxies in either case), in its userinfo or a ``password=`` query.

    A value shorter than ``MIN_SECRET_CHARS`` is left out."""
    values = [env.get(name, "") for name in (*variables, *RUNTIME_TOKENS)]
    for name, value in env.items():
        upper = name.upper()
        if upper.startswith(_OTLP) and upper.endswith("HEADERS"):
            values += _header_values(value)
        elif upper in _URL_VARIABLES or (upper.startswith(_OTLP) and upper.endswith("ENDPOINT")):
            values += _url_passwords(value)
    return Secrets(value.strip() for value in values)


def _header_values(headers: str) -> Iterator[str]:
    """``key=value,…`` as OpenTelemetry writes headers, values URL-encoded."""
    for pair in headers.split(","):
        _, _, raw = pair.partition("=")
        value = unquote(raw.strip())
        yield from (raw, value)
        credential = value.partition(" ")[2]
        if credential.strip():  # `Bearer xyz`: xyz is the secret, wherever it turns up alone
            yield credential


def _url_passwords(url: str) -> Iterator[str]:
    try:
        parts = urlsplit(url.strip())
        password = parts.password
    except ValueError:  # not a URL: nothing the runtime could connect with
        return
    if password:
        yield from (password, unquote(password))
    for pair in parts.query.split("&"):  # libpq's `?password=…`
        key, _, raw = pair.partition("=")
        if unquote(key).lower() == "password" and raw:
            yield from (raw, unquote(raw))


def spellings(secret: str | None) -> tuple[str, ...]:
    """``secret`` as text spells it: as written, escaped as in the ``repr`` of a str or of bytes
    (how h11 shows a header value), in JSON, URL-quoted; longest first."""
    if not secret:
        return ()
    forms = {
        secret,
        repr(secret)[1:-1],
        repr(secret.encode("utf-8", "backslashreplace"))[2:-1],
        json.dumps(secret)[1:-1],
        quote(secret, safe=""),
    }
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


class Secrets:
    """Some secrets, each in every spelling (a value under ``MIN_SECRET_CHARS`` left out);
    ``scrub`` replaces them with ``[redacted]``."""

    __slots__ = ("_by_start", "_longest", "_shortest", "_starts", "forms")

    def __init__(self, secrets: Iterable[str]) -> None:
        self._set({f for s in secrets if len(s) >= MIN_SECRET_CHARS for f in spellings(s)})

    def _set(self, forms: set[str]) -> None:
        self.forms = tuple(sorted(forms, key=len, reverse=True))
        self._longest = len(self.forms[0]) if forms else 0
        self._shortest = len(self.forms[-1]) if forms else 0
        by_start: dict[str, list[str]] = {}
        for form in self.forms:
            by_start.setdefault(form[0], []).append(form)
        self._by_start = {start: tuple(forms) for start, forms in by_start.items()}
        self._starts = _beginnings(self.forms)

    def __or__(self, other: Secrets) -> Secrets:
        joined = Secrets(())
        joined._set({*self.forms, *other.forms})
        return joined

    def __bool__(self) -> bool:
        return bool(self.forms)

    def scrub(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text

    def scrub_value(self, value: Any) -> Any:
        """``value`` (JSON-like: a tool call's arguments) with every string in it scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {key: self.scrub_value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.scrub_value(item) for item in value]
        return value

    def scrub_error(self, error: AgentRunnerError) -> None:
        """``error``'s message, hint and text scrubbed, in place."""
        error.message = self.scrub(error.message)
        error.args = (error.message,)
        if error.hint:
            error.hint = self.scrub(error.hint)

    def stream(self) -> SecretStream:
        """A cutter for text that arrives in pieces (a model's deltas)."""
        return SecretStream(self)

    def _could_begin(self, tail: str) -> bool:
        """Whether ``tail`` (shorter than the longest form) is the beginning of a form."""
        return any(form.startswith(tail) for form in self._by_start[tail[0]])


# How many characters of a form the search for where one may begin compares (all forms have
# more): enough that ordinary text seldom looks like a beginning, checked whole only then.
_BEGINNING = 4


def _beginnings(forms: Iterable[str]) -> re.Pattern[str]:
    """Where text may begin a form: at its first ``_BEGINNING`` characters, or at a shorter
    beginning of one that ends the text. Found in C, not character by character (this runs for
    each delta a model streams), with a branch per first character, which the regex engine
    scans for: ``s(?:k-p|k-a|k-\\Z|k\\Z|\\Z)|t(?:ok-|…)``."""
    after: dict[str, set[str]] = {}
    for form in forms:
        after.setdefault(form[0], set()).add(form[1:_BEGINNING])
    if not after:
        return re.compile(r"(?!)")  # nothing to find
    branches = []
    for first, rests in sorted(after.items()):
        ends = {rest[:size] for rest in rests for size in range(len(rest))}
        alternatives = [
            *map(re.escape, sorted(rests)),
            *(f"{re.escape(end)}\\Z" for end in sorted(ends, key=len, reverse=True)),
        ]
        branches.append(f"{re.escape(first)}(?:{'|'.join(alternatives)})")
    return re.compile("|".join(branches))


class SecretStream:
    """Text that arrives in pieces, passed on with its secrets cut: a piece that ends with what
    could be the beginning of a secret holds that much back until the next piece (or ``rest``)
    says, so what is passed on adds up to the whole text scrubbed, and no piece shows a secret,
    whole or split."""

    __slots__ = ("_find", "_secrets", "_shortest", "_window", "held")

    def __init__(self, secrets: Secrets) -> None:
        self._secrets = secrets
        self._find = secrets._starts.search
        self._shortest = secrets._shortest
        self._window = secrets._longest - 1  # how far back a secret cut short may begin
        self.held = ""

    def feed(self, piece: str) -> str:
        """What of the text so far can be passed on now."""
        text = self.held + piece if self.held else piece
        if len(text) >= self._shortest:  # a whole secret fits: cut it
            text = self._secrets.scrub(text)
        size = len(text)
        start = self._find(text, size - self._window if size > self._window else 0)
        while start is not None:  # the first place from which the rest could begin a secret
            at = start.start()
            if self._secrets._could_begin(text[at:]):
                self.held = text[at:]
                return text[:at]
            start = self._find(text, at + 1)
        self.held = ""
        return text

    def rest(self) -> str:
        """What was held back, once the text has ended (it began no secret), and reset."""
        held, self.held = self.held, ""
        return held
