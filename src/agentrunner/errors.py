"""The closed error taxonomy every user-visible failure of agentrunner belongs to.

One naming style: lower ``snake_case`` strings, stable forever (they appear in JSON, the database
and exit messages). Seed 001's run-error table is used as is; seed 004's upper-case codes are
mapped onto the same style (``MISSING_MANDATORY_PLACEHOLDER`` → ``missing_mandatory_placeholder``,
``PYTHON_RUNNER_ERROR`` → ``runner_io``) and each carries the seed-001 *category* it belongs to,
so a caller that only knows seed 001's table can still branch on it.

Exception tree::

    AgentRunnerError            code + message + hint (+ file/line when a file is at fault)
     └── AgentFileErrors        several problems found in agent files at once (``.problems``)

Errors are classified by type and status, never by parsing message text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "AgentFileErrors",
    "AgentRunnerError",
    "CodeInfo",
    "ErrorCode",
    "code_info",
    "error_line",
    "in_words",
]


class ErrorCode(StrEnum):
    """Every error code agentrunner can report. Closed: nothing else ever reaches a user."""

    # Seed 001: run errors.
    CANCELLED = "cancelled"
    TOOL_DENIED = "tool_denied"
    TOOL_FAILED = "tool_failed"
    INTERNAL = "internal"
    PROVIDER_AUTH = "provider_auth"
    PROVIDER_RATE_LIMIT = "provider_rate_limit"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    CONTENT_FILTER = "content_filter"
    VALIDATION = "validation"
    TURN_LIMIT = "turn_limit"
    RUN_TIMEOUT = "run_timeout"
    # Seed 004: templating, registries, execution.
    MISSING_MANDATORY_PLACEHOLDER = "missing_mandatory_placeholder"
    INVALID_PLACEHOLDER_PATH = "invalid_placeholder_path"
    AGENT_NOT_FOUND = "agent_not_found"
    MODEL_NOT_FOUND = "model_not_found"
    EXECUTION_FAILED = "execution_failed"
    INVALID_SPECIFICATION = "invalid_specification"
    RUNNER_IO = "runner_io"
    # Budgets (DESIGN decision 5).
    BUDGET_EXCEEDED = "budget_exceeded"
    PRICE_UNKNOWN = "price_unknown"
    # Interfaces: what a person or a client asked for is not there, or cannot be had.
    THREAD_NOT_FOUND = "thread_not_found"
    NOT_FOUND = "not_found"
    ADDRESS_IN_USE = "address_in_use"
    UNAUTHORIZED = "unauthorized"
    QUEUE_FULL = "queue_full"
    # Workers: a run is settled once; a run whose worker went away is failed, not re-run.
    RUN_SETTLED = "run_settled"
    WORKER_LOST = "worker_lost"
    # Agents: one whose file says `enabled: false` is listed, never run.
    AGENT_DISABLED = "agent_disabled"
    SESSION_ACTIVE = "session_active"
    # A person in the loop (docs/approvals.md).
    APPROVAL_DECIDED = "approval_decided"
    THREAD_WAITING = "thread_waiting"
    GUARD_BLOCKED = "guard_blocked"
    # Attachments (docs/attachments.md).
    ATTACHMENT_REFUSED = "attachment_refused"
    MODEL_INPUT_UNSUPPORTED = "model_input_unsupported"

    @property
    def info(self) -> CodeInfo:
        return _INFO[self]

    @property
    def retryable(self) -> bool:
        return _INFO[self].retryable

    @property
    def category(self) -> ErrorCode:
        """The seed-001 code this one belongs to (itself for seed-001 codes)."""
        return _INFO[self].category or self


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """What a code means: shown in ``docs/errors.md`` and used for default hints."""

    retryable: bool
    cause: str
    action: str
    category: ErrorCode | None = None
    seed_name: str | None = None


_E = ErrorCode
_INFO: dict[ErrorCode, CodeInfo] = {
    _E.CANCELLED: CodeInfo(
        False,
        "The run was aborted (Ctrl-C, a cancel request, or the caller's abort signal).",
        "Nothing to fix; start the run again if you still want the answer.",
    ),
    _E.TOOL_DENIED: CodeInfo(
        False,
        "A tool call was refused by policy: not granted, outside the trust scope, or a path "
        "that escapes the agent's workspace.",
        "Grant the tool in the agent file (`tools:`/`capabilities:`) or widen `trust:`.",
    ),
    _E.TOOL_FAILED: CodeInfo(
        True,
        "A tool raised an error, or the model kept calling tools with unknown names or invalid "
        "arguments after its correction budget was spent.",
        "Check the tool's error in `agentrunner runs show RUN`; retrying may succeed.",
    ),
    _E.INTERNAL: CodeInfo(
        False,
        "A bug or a wiring gap in agentrunner (e.g. a provider with no adapter).",
        "Re-run with `--debug` and report the traceback.",
    ),
    _E.PROVIDER_AUTH: CodeInfo(
        False,
        "The provider rejected the credentials, or the environment variable that should hold "
        "them is not set.",
        "Export the API key variable named in the message (never put keys in files).",
    ),
    _E.PROVIDER_RATE_LIMIT: CodeInfo(
        True,
        "The provider answered 429 on every attempt and every fallback model.",
        "Wait and retry, add a `fallback:` model, or raise `retry.max`.",
    ),
    _E.PROVIDER_UNAVAILABLE: CodeInfo(
        True,
        "The provider was overloaded or unreachable (5xx, 529, timeout, dropped connection) on "
        "every attempt.",
        "Retry later or add a `fallback:` model from another provider.",
    ),
    _E.CONTENT_FILTER: CodeInfo(
        False,
        "The provider refused to answer for content-policy reasons.",
        "Rephrase the request; failing over to another model is deliberately not done.",
    ),
    _E.VALIDATION: CodeInfo(
        False,
        "Bad input: a request the provider rejected (400), a structured answer that does not "
        "match `output_schema`, or a tool grant that tries to widen the agent's grant.",
        "Read the message: it names the field or schema path at fault.",
    ),
    _E.TURN_LIMIT: CodeInfo(
        False,
        "The tool loop reached `limits.max_steps` model requests without a final answer.",
        "Raise `limits.max_steps` or make the task smaller.",
    ),
    _E.RUN_TIMEOUT: CodeInfo(
        False,
        "The run passed its deadline, `limits.timeout_s` (600 s unless the agent file says "
        "otherwise), which covers model requests, retries, backoff waits and tool calls.",
        "Raise `limits.timeout_s`, or see where the time went with `agentrunner runs show RUN`.",
        _E.TURN_LIMIT,
    ),
    _E.MISSING_MANDATORY_PLACEHOLDER: CodeInfo(
        False,
        "A mandatory `{{input.x}}` placeholder has no value (missing or null) in the input.",
        "Pass the value in `--input`, or mark the placeholder optional: `{{input.x?}}`.",
        _E.VALIDATION,
        "MISSING_MANDATORY_PLACEHOLDER",
    ),
    _E.INVALID_PLACEHOLDER_PATH: CodeInfo(
        False,
        "A placeholder is malformed, is not rooted at `input`, puts `?` anywhere but the end, "
        "or walks through a value that is not an object or list.",
        "Write placeholders as `{{input.a.b}}` or `{{input.a.b?}}`.",
        _E.VALIDATION,
        "INVALID_PLACEHOLDER_PATH",
    ),
    _E.AGENT_NOT_FOUND: CodeInfo(
        False,
        "No agent file with that id in the agents directory.",
        "Run `agentrunner agents list` to see the ids; the message suggests close matches.",
        _E.VALIDATION,
        "AGENT_NOT_FOUND",
    ),
    _E.MODEL_NOT_FOUND: CodeInfo(
        False,
        "The model name is neither `provider:model` with a known provider nor an alias.",
        "Use `provider:model` (e.g. `openai:gpt-4.1-mini`) or define an alias in "
        "`agentrunner.toml` under `[aliases]`.",
        _E.VALIDATION,
        "MODEL_NOT_FOUND",
    ),
    _E.EXECUTION_FAILED: CodeInfo(
        False,
        "The agent's execution failed for a reason outside the other codes.",
        "Read the details in the message; `--debug` shows the cause chain.",
        _E.INTERNAL,
        "EXECUTION_FAILED",
    ),
    _E.INVALID_SPECIFICATION: CodeInfo(
        False,
        "An agent file or `agentrunner.toml` is invalid: bad YAML/TOML, an unknown or mistyped "
        "key, a missing model, duplicate ids, or a `reports_to` that is missing or cyclic.",
        "Fix the file at the line given; `agentrunner agents validate` lists every problem.",
        _E.VALIDATION,
        "INVALID_SPECIFICATION",
    ),
    _E.RUNNER_IO: CodeInfo(
        False,
        "agentrunner could not read or write something it needs: a file, the stdio protocol "
        "stream, the project directory (an agents directory whose only problems are "
        "unreadable files reports this code), or the database (unreachable for longer than "
        "the store waits for it).",
        "Check the path and permissions, or the database, named in the message.",
        _E.INTERNAL,
        "PYTHON_RUNNER_ERROR",
    ),
    _E.BUDGET_EXCEEDED: CodeInfo(
        False,
        "A spending limit (per run, per agent per day, or global per day) would be exceeded "
        "by the next model request.",
        "Raise `limits.max_budget_usd` or the budgets in `agentrunner.toml`, or wait a day.",
    ),
    _E.PRICE_UNKNOWN: CodeInfo(
        False,
        "A budget is in force and the model has no known price, so what its requests cost "
        "cannot be bounded: the run is refused before its first request (`agents validate` "
        "says so before any run).",
        'Price it: `[prices."provider:model"]` with `input_per_mtok` and `output_per_mtok` in '
        "`agentrunner.toml` (0 for a free local server); or let unpriced models run under "
        "budgets, uncounted, with `[budgets] allow_unpriced = true`.",
        _E.BUDGET_EXCEEDED,
    ),
    _E.THREAD_NOT_FOUND: CodeInfo(
        False,
        "`--thread` (or a request's thread id) names no thread of that agent: the id is "
        "unknown, or the thread belongs to another agent.",
        "Use an id from `agentrunner threads list --agent AGENT` (the message lists the "
        "agent's recent threads), or leave the option out to continue the session thread.",
        _E.VALIDATION,
    ),
    _E.NOT_FOUND: CodeInfo(
        False,
        "The HTTP API has no such route, or no such thread, run or channel.",
        "Check the path against `docs/http-api.md` (or `/docs` on the running server).",
        _E.VALIDATION,
    ),
    _E.ADDRESS_IN_USE: CodeInfo(
        False,
        "`agentrunner serve` could not listen: another program already uses the port.",
        "Stop the other server, or pick another port with `--port`.",
        _E.INTERNAL,
    ),
    _E.UNAUTHORIZED: CodeInfo(
        False,
        "The HTTP API refused the request: the bearer token is missing or wrong (401); too "
        "many wrong tokens came from the client's address, so it is refused for a while "
        "(429, with `Retry-After`); or, on a server with no token, the `Host` header names "
        "neither loopback nor a name in `[server] allowed_hosts` (403) — as a web page "
        "reaching the server through DNS rebinding would.",
        "Send `Authorization: Bearer <token>` (after a 429, once `Retry-After` has passed); "
        "for a server without a token, call it as `localhost`/`127.0.0.1`/`[::1]` or add its "
        "name to `[server] allowed_hosts`.",
        _E.VALIDATION,
    ),
    _E.QUEUE_FULL: CodeInfo(
        True,
        "The agent's mailbox already holds `[workers] max_queue` queued runs, so the request "
        "would queue another (HTTP 429, with `Retry-After`). Nothing was written.",
        "Retry after the time given; add workers, or raise `[workers] max_queue`.",
        _E.PROVIDER_RATE_LIMIT,
    ),
    _E.RUN_SETTLED: CodeInfo(
        False,
        "A worker finished a run that had been settled meanwhile: it was paused or cut off "
        "from the database past its lease, and the lease rules failed the run. Its late "
        "result was not recorded (what it spent was); the run keeps the lease's reason.",
        "Nothing to redo by hand; if workers are expected to stall that long, raise "
        "`[workers] lease_s`.",
        _E.INTERNAL,
    ),
    _E.WORKER_LOST: CodeInfo(
        False,
        "The worker serving the run stopped renewing its lease (killed, its machine lost, or "
        "paused past `[workers] lease_s`), and another worker failed the run; or the process "
        "running a company job was found gone (`agentrunner jobs` heals such a job, naming "
        "the process in the run's error). It is not run again by itself: its tools may "
        "already have had effects.",
        "Run it again if you still want the answer (check what its tool calls did first); a "
        "worker that is often paused needs a longer `[workers] lease_s`.",
        _E.INTERNAL,
    ),
    _E.AGENT_DISABLED: CodeInfo(
        False,
        "The agent file says `enabled: false`: the agent is listed, but it is not run, not "
        "offered to other agents (`delegate`, `ask_agent`) and not routed channel or direct "
        "messages.",
        "Set `enabled: true` (or remove the line) in the agent file named in the message.",
        _E.VALIDATION,
    ),
    _E.SESSION_ACTIVE: CodeInfo(
        False,
        "`agentrunner start` found a company session active already: a project has at most "
        "one, which `brief` continues.",
        "Continue it (`agentrunner start --resume`, or just `agentrunner brief`), or end it "
        "first with `agentrunner stop`.",
        _E.VALIDATION,
    ),
    _E.APPROVAL_DECIDED: CodeInfo(
        False,
        "The approval request was decided already (the first decision stands, whoever made "
        "it), or its run no longer waits (cancelled). The message names the first decision; "
        "nothing was changed (HTTP 409).",
        "`agentrunner approvals` lists what still waits; `agentrunner runs show RUN` shows "
        "who decided what.",
        _E.VALIDATION,
    ),
    _E.THREAD_WAITING: CodeInfo(
        False,
        "The thread's last run waits for a person's decision on a tool call; the thread is "
        "held until it goes on, so a new message on it cannot run now (queued messages wait "
        "their turn behind it). Nothing was written.",
        "Decide what waits (`agentrunner approvals`, then `approve ID` or `deny ID`), or "
        "cancel the waiting run (`agentrunner runs cancel RUN`).",
        _E.VALIDATION,
    ),
    _E.GUARD_BLOCKED: CodeInfo(
        False,
        "An input guard blocked the run's message before anything was sent to a model, or an "
        "output guard blocked its answer before it was delivered (not kept in the thread, not "
        "passed on; what the run cost is recorded). The message names the guard and its "
        "reason.",
        'The guards are an extension\'s (docs/approvals.md, "Guards and policies"): change '
        "the message, or the guard, and run again.",
        _E.CONTENT_FILTER,
    ),
    _E.ATTACHMENT_REFUSED: CodeInfo(
        False,
        "A file given with a message was refused where it came in: its type (read from its "
        "bytes, not its name) is not an image (PNG, JPEG, GIF, WebP) or a PDF, it cannot be "
        "decoded or opened, or it is larger than a file or a message may be. Nothing was "
        "stored and no run started. The message names the file and the reason.",
        "Attach a PNG, JPEG, GIF, WebP or PDF file within the limits of `[attachments]` in "
        "agentrunner.toml (docs/attachments.md).",
        _E.VALIDATION,
    ),
    _E.MODEL_INPUT_UNSUPPORTED: CodeInfo(
        False,
        "The run's messages carry an image or a PDF and no model of the agent's chain takes "
        'that kind of input (`[models."provider:model"] input`). Nothing was sent to a '
        "model. The message names the model and the part.",
        "Give the agent a model that takes it (or one as a fallback), or declare what the "
        'model takes: [models."provider:model"] input = ["text", "image", "pdf"].',
        _E.VALIDATION,
    ),
}


def code_info(code: ErrorCode | str) -> CodeInfo:
    return _INFO[ErrorCode(code)]


class AgentRunnerError(Exception):
    """A failure with a code from the taxonomy, a plain message and, where it helps, a hint.

    ``file`` and ``line`` (1-based) point at the source of the problem when it is a file.
    ``retryable`` defaults to the code's flag; the engine may override it per failure.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        hint: str | None = None,
        file: str | None = None,
        line: int | None = None,
        retryable: bool | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.hint = hint
        self.file = file
        self.line = line
        self.retryable = self.code.retryable if retryable is None else retryable
        self.details = details or {}

    @property
    def location(self) -> str | None:
        if self.file is None:
            return None
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def one_line(self) -> str:
        """``file:line: code: message`` — the form `agents validate` prints (the code said
        once: ``in_words``)."""
        head = f"{self.location}: " if self.location else ""
        return head + error_line(self.code, self.message)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": str(self.code),
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.hint:
            out["hint"] = self.hint
        if self.file:
            out["file"] = self.file
        if self.line is not None:
            out["line"] = self.line
        return out

    def __repr__(self) -> str:
        return f"AgentRunnerError({self.code!s}, {self.message!r})"


class AgentFileErrors(AgentRunnerError):
    """Every problem found while loading a directory of agent files, reported together, in
    file and line order. ``partial`` is what could still be read of a single bad file (for
    the checks that need the other files too), when anything could."""

    def __init__(self, problems: Sequence[AgentRunnerError], partial: Any = None) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file or "", p.line or 0))
        self.partial = partial
        first = self.problems[0]
        more = len(self.problems) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        # One kind of problem keeps its code (an unreadable file is runner_io, not a bad spec).
        codes = {p.code for p in self.problems}
        hint = "Run `agentrunner agents validate` to list every problem."
        super().__init__(
            codes.pop() if len(codes) == 1 else ErrorCode.INVALID_SPECIFICATION,
            first.message + suffix,
            hint=first.hint or hint if not more else hint,  # one problem: its own hint
            file=first.file,
            line=first.line,
        )

    @classmethod
    def raise_if_any(cls, problems: Iterable[AgentRunnerError], partial: Any = None) -> None:
        found = list(problems)
        if found:
            raise cls(found, partial)


def in_words(code: ErrorCode | str, message: str | None) -> tuple[str | None, str]:
    """An error as people read it, the code said once: the code to lead the message with, or
    None where the message already begins with it (``cancelled on request``), and the message.
    A message stored led by its code (a cancelled run's ``cancelled: …``, as runs wrote it
    before) is read without the lead. Every interface that shows an error (the CLI's lines,
    the dashboard's pages, tool errors) says it this way: ``error_line``."""
    code = str(code)
    text = (message or "").strip()
    lead = f"{code}:"
    while text.startswith(lead):
        text = text[len(lead) :].strip()
    if re.match(rf"{re.escape(code)}\b", text, re.IGNORECASE):
        return None, text
    return code, text


def error_line(code: ErrorCode | str, message: str | None) -> str:
    """``code: message`` — or the message alone where it already says the code; the code
    alone for an empty message (``in_words``)."""
    lead, text = in_words(code, message)
    if lead is None:
        return text
    return f"{lead}: {text}" if text else lead
