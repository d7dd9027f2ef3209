"""Money as a hard limit (DESIGN decision 9): what a run has spent and holds, what a budget has
left, and what a request may cost at most.

Before each model request the turn reserves the request's worst case — its input (estimated
from the request) plus its output cap, at the model's dearest prices — against the tightest
budget, lowering the output cap to what is left; after the request it settles the reservation
with what the provider reported. A reply therefore never spends more than a budget has left,
and two requests in flight never both count on the same remainder.

Budgets within a run and the runs it started (``ask_agent``) live on their ``CostTracker``s;
budgets shared with other runs, in this process or others (a day's spend per agent or in all),
are an ``ExternalBudget`` the runner provides over the store.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agentrunner.core.json_text import json_bytes
from agentrunner.engine.attachment_tokens import attachment_tokens
from agentrunner.engine.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ToolDefinition,
    ToolResult,
    Usage,
    UserMessage,
)
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.engine.models import ResolvedModel
    from agentrunner.engine.pricing import PriceBook, Rates

__all__ = [
    "DAILY_BUDGET_HINT",
    "DEFAULT_OUTPUT_CAP",
    "HOLD_WAIT_S",
    "MIN_REPLY_TOKENS",
    "RUN_BUDGET_HINT",
    "Allowance",
    "BudgetGate",
    "CostTracker",
    "ExternalBudget",
    "Reservation",
    "budget_cut_off",
    "budget_exceeded",
    "estimate_input_tokens",
    "estimate_message_tokens",
    "estimate_output_tokens",
    "estimate_sent_tokens",
    "estimate_text_tokens",
    "fixed_request_bytes",
    "held_input_tokens",
    "least_request_micros",
    "price_unknown",
    "smallest_request_micros",
]

# With a budget in force every request carries an output cap: the agent's max_output_tokens,
# else this (Anthropic's own default here), lowered to what the budget has left.
DEFAULT_OUTPUT_CAP = 8192
# Below this many output tokens a reply is not worth its input: the request is refused.
MIN_REPLY_TOKENS = 32
# How long a request waits for other requests' holds to be settled before it makes do with what
# they leave (they hold a worst case; most of it comes back).
HOLD_WAIT_S = 120.0
# Byte-level tokenizers average 3-4 bytes of English or JSON a token, and about one token per
# CJK character (3 bytes); three bytes a token errs high. Measured against cl100k_base
# (bench/token_estimate.py): 1.31x the real count on English prose, 1.43x on Python, 1.31x on
# JSON, 1.00x on Chinese and Japanese; a single 2,000-character piece from 0.85x to 3x. Each
# message costs a few tokens of framing, and a request with tools carries the provider's
# tool-use instructions.
_BYTES_PER_TOKEN = 3
_TAKEN = object()  # a hold refused: another request took part of what was left
_PER_MESSAGE = 8
# A tool call is sent in a structure of its own (its id, type, name and arguments as a string
# of JSON, escaped): about 60 bytes around what it says.
_TOOL_CALL_FRAMING = 60
_PER_REQUEST = 50
_WITH_TOOLS = 400


RUN_BUDGET_HINT = (
    "Raise limits.max_budget_usd in the agent file, or [budgets] per_run_usd in agentrunner.toml."
)
DAILY_BUDGET_HINT = (
    "Raise [budgets] per_agent_daily_usd / global_daily_usd in agentrunner.toml, or wait for "
    "the next day (UTC)."
)


@dataclass(frozen=True, slots=True)
class Allowance:
    """One budget in micro-dollars: its ``limit``, what is ``spent`` of it, and what requests
    in flight hold against it."""

    label: str
    limit: int
    spent: int
    held: int = 0
    hint: str = RUN_BUDGET_HINT

    @property
    def left(self) -> int:
        return self.limit - self.spent - self.held


class ExternalBudget(Protocol):
    """Budgets shared with other runs (the runner's daily budgets, kept in the store)."""

    async def allowance(self) -> Allowance | None:
        """The tightest of them now, or None when none applies."""
        ...

    async def hold(self, micros: int) -> object | None:
        """Reserve ``micros`` if every budget still has them; None when one no longer does
        (another run took them since ``allowance``): ask again."""
        ...

    def release(self, hold: object) -> None:
        """Give a reservation back (once the request's real cost is recorded)."""
        ...


@dataclass(slots=True)
class CostTracker:
    """One per run (seed 001); a child run started by ``ask_agent`` adds to its parent's.

    ``limit`` (micro-dollars, named by ``label``) bounds this run and the runs it starts;
    ``held`` is what requests in flight in this run and its children have reserved."""

    micros: int = 0
    known: bool = True
    usage: Usage = field(default_factory=Usage)
    parent: CostTracker | None = None
    limit: int | None = None
    label: str = "the run's budget"
    held: int = 0
    hint: str = RUN_BUDGET_HINT  # how to raise ``limit``

    def add(self, micros: int | None, usage: Usage) -> None:
        tracker: CostTracker | None = self
        while tracker is not None:
            tracker.usage.add(usage)
            if micros is None:
                tracker.known = False
            else:
                tracker.micros += micros
            tracker = tracker.parent

    def hold(self, micros: int) -> None:
        tracker: CostTracker | None = self
        while tracker is not None:
            tracker.held += micros
            tracker = tracker.parent

    def release(self, micros: int) -> None:
        self.hold(-micros)

    def allowance(self) -> Allowance | None:
        """The tightest limit on this run: its own, or that of a run that started it."""
        best: Allowance | None = None
        tracker: CostTracker | None = self
        while tracker is not None:
            if tracker.limit is not None:
                found = Allowance(
                    tracker.label, tracker.limit, tracker.micros, tracker.held, tracker.hint
                )
                if best is None or found.left < best.left:
                    best = found
            tracker = tracker.parent
        return best

    def child(self) -> CostTracker:
        return CostTracker(parent=self)

    @property
    def root(self) -> CostTracker:
        tracker = self
        while tracker.parent is not None:
            tracker = tracker.parent
        return tracker


@dataclass(frozen=True, slots=True)
class Reservation:
    """A request's worst case, held against the budgets until the request is settled."""

    model: str  # provider:model it was made for: another model's prices differ
    micros: int
    cap: int  # the request's output cap
    lowered: bool  # the cap is lower than the agent's own: the budget set it
    input_tokens: int  # the estimate it was made with
    hold: object | None  # the external budget's part
    # The tightest budget when it was made, the one that set the cap; None when the request's
    # whole cap was held at once, no budget read (none lowered it).
    budget: Allowance | None


class BudgetGate:
    """A turn's side of its budgets: each request's worst case reserved before it is sent, its
    output cap lowered to fit, the reservation settled with what the request really cost, and
    the estimate of a request's input corrected by what each response was billed."""

    def __init__(
        self,
        tracker: CostTracker,
        external: ExternalBudget | None,
        prices: PriceBook,
        tools: Sequence[Any],
        output_schema: Mapping[str, Any] | None,
    ) -> None:
        self.tracker = tracker
        self.external = external
        self.prices = prices
        self.active = external is not None or tracker.allowance() is not None
        self.held: Reservation | None = None
        self._calibration: dict[str, float] = {}  # model -> billed / estimated input tokens
        self._tools, self._output_schema = tools, output_schema
        self._fixed: int | None = None  # fixed_request_bytes, measured when first needed

    async def reserve(self, model: ResolvedModel, request: ModelRequest) -> None:
        """Hold ``request``'s worst case against the tightest budget, and cap its output to fit
        what is left; ``budget_exceeded`` when not even a minimal reply fits. Where only other
        requests' holds are in the way — they will mostly be given back — wait for them (up to
        ``HOLD_WAIT_S``) rather than cut this reply short. A reservation for another model is
        given back first."""
        if self.held is not None and self.held.model != model.ref:
            self.release()
        if self.held is None:
            self.held = await self._reserve(model, request)
        if self.held is not None:
            request.max_output_tokens = self.held.cap

    async def _reserve(self, model: ResolvedModel, request: ModelRequest) -> Reservation | None:
        rates = self.prices.rates(model.provider.name, model.name)
        if self.prices.refused(model.provider.name, model.name):
            # A budget cannot bound what it cannot price: refused, not run blind.
            external = await self.external.allowance() if self.external is not None else None
            raise price_unknown(model.ref, self.tightest(external))
        if self.external is not None and rates is not None and not rates.free:
            whole = await self._reserve_whole(model, request, rates)
            if whole is not None:
                return whole
        waited, pause = 0.0, 0.02
        while True:
            external = await self.external.allowance() if self.external is not None else None
            # From here to the tracker's hold nothing awaits, so runs of one tree that take
            # turns on this event loop cannot both count on the same remainder.
            allowance = self.tightest(external)
            if allowance is None:
                return None
            if allowance.spent >= allowance.limit:
                raise budget_exceeded(allowance)
            if rates is None or rates.free:
                # Free prices need no bound; unknown ones run uncounted where allowed
                # (``allow_unpriced``; PriceBook warns once).
                return None
            tokens = self.input_tokens(model, request)
            wanted = request.max_output_tokens or DEFAULT_OUTPUT_CAP
            input_cost = rates.input_micros(tokens)
            cap = min(wanted, rates.output_tokens_within(allowance.left - input_cost, tokens))
            unheld = allowance.left + allowance.held - input_cost
            if (
                cap < wanted
                and allowance.held > 0
                and waited < HOLD_WAIT_S
                and rates.output_tokens_within(unheld, tokens) > cap
            ):
                await asyncio.sleep(pause)  # others' holds, not spend, are in the way
                waited += pause
                pause = min(pause * 2, 1.0)
                continue
            if cap < min(MIN_REPLY_TOKENS, wanted):
                needed = least_request_micros(rates, tokens, min(MIN_REPLY_TOKENS, wanted))
                raise budget_exceeded(allowance, needed)
            worst = input_cost + rates.output_micros(cap, tokens)
            hold = await self._hold(worst)
            if hold is _TAKEN:
                continue
            return Reservation(model.ref, worst, cap, cap < wanted, tokens, hold, allowance)

    async def reserve_input(self, model: ResolvedModel, tokens: int) -> None:
        """Hold what a request that bills only its input (an embedding) costs, ``tokens`` at
        the model's input price, against the tightest budget; ``budget_exceeded`` when it
        does not fit, ``price_unknown`` for a model a budget cannot price."""
        rates = self.prices.rates(model.provider.name, model.name)
        if self.prices.refused(model.provider.name, model.name):
            external = await self.external.allowance() if self.external is not None else None
            raise price_unknown(model.ref, self.tightest(external))
        if rates is None or rates.free:
            return
        worst = rates.input_micros(tokens)
        while True:
            external = await self.external.allowance() if self.external is not None else None
            allowance = self.tightest(external)
            if allowance is None:
                return
            if allowance.left < worst:
                raise budget_exceeded(allowance, worst, reply=False)
            hold = await self._hold(worst)
            if hold is _TAKEN:
                continue
            self.held = Reservation(model.ref, worst, 0, False, tokens, hold, allowance)
            return

    async def _hold(self, worst: int) -> object | None:
        """``worst`` held by the run's tracker and the external budget (its hold, None without
        one); ``_TAKEN`` where another run took part of what was left meanwhile: look again."""
        self.tracker.hold(worst)
        try:
            hold = await self.external.hold(worst) if self.external is not None else None
        except BaseException:
            self.tracker.release(worst)
            raise
        if self.external is not None and hold is None:
            self.tracker.release(worst)
            return _TAKEN
        return hold

    async def _reserve_whole(
        self, model: ResolvedModel, request: ModelRequest, rates: Rates
    ) -> Reservation | None:
        """The request's worst case at its whole output cap, held if every budget has room
        for it: the external budget's hold checks its limits itself, in the same transaction,
        so what it has left need not be read first (one statement fewer a request, the
        common case far from a limit). None when a budget would lower the cap, or is used
        up: the caller reads what is left and decides (a lower cap, a wait, an error)."""
        tokens = self.input_tokens(model, request)
        wanted = request.max_output_tokens or DEFAULT_OUTPUT_CAP
        input_cost = rates.input_micros(tokens)
        own = self.tracker.allowance()
        if own is not None and rates.output_tokens_within(own.left - input_cost, tokens) < wanted:
            return None
        worst = input_cost + rates.output_micros(wanted, tokens)
        assert self.external is not None
        self.tracker.hold(worst)
        try:
            hold = await self.external.hold(worst)
        except BaseException:
            self.tracker.release(worst)
            raise
        if hold is None:
            self.tracker.release(worst)
            return None
        return Reservation(model.ref, worst, wanted, False, tokens, hold, None)

    def tightest(self, external: Allowance | None = None) -> Allowance | None:
        """The budget with the least left: the run's (or a caller's), or ``external``."""
        own = self.tracker.allowance()
        if own is None or (external is not None and external.left < own.left):
            return external
        return own

    def input_tokens(self, model: ResolvedModel, request: ModelRequest) -> int:
        """``request``'s input in tokens at worst, estimated high and corrected by what was
        billed: what a reservation holds."""
        calibration = self._calibration.get(model.ref, 1.0)
        return held_input_tokens(request, self._fixed_bytes, calibration, model.provider.kind)

    def sent_tokens(self, model: ResolvedModel, request: ModelRequest) -> int:
        """The size of what ``request`` sent, in tokens (``estimate_sent_tokens``, corrected by
        what was billed where that was more): what a request cut off before the provider
        reported its usage is charged."""
        tokens = estimate_sent_tokens(request, self._fixed_bytes, model.provider.kind)
        return int(tokens * self._calibration.get(model.ref, 1.0)) + 1

    @property
    def _fixed_bytes(self) -> int:
        if self._fixed is None:
            self._fixed = fixed_request_bytes(self._tools, self._output_schema)
        return self._fixed

    def settle(self, usage: Usage) -> Reservation | None:
        """The request is over and its cost recorded: learn from its billed input, give its
        reservation back; the reservation it had, if any."""
        held = self.held
        if held is not None and usage.input_tokens and not usage.estimated:
            ratio = usage.input_tokens / max(held.input_tokens, 1)
            self._calibration[held.model] = max(ratio, self._calibration.get(held.model, 1.0))
        self.release()
        return held

    def release(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            self.tracker.release(held.micros)
            if held.hold is not None and self.external is not None:
                self.external.release(held.hold)


def fixed_request_bytes(tools: Sequence[Any], output_schema: Mapping[str, Any] | None) -> int:
    """The bytes every request of a turn carries besides its messages: tool definitions and
    the output schema (measured once per turn)."""
    size = sum(
        len(t.name) + len(t.description) + len(json_bytes(dict(t.parameters))) for t in tools
    )
    if output_schema is not None:
        size += len(json_bytes(dict(output_schema)))
    return size


def held_input_tokens(
    request: ModelRequest, fixed_bytes: int, calibration: float = 1.0, kind: str = ""
) -> int:
    """The input a reservation holds for ``request``: ``estimate_input_tokens`` corrected by
    ``calibration`` (what this model billed against the estimate before, when more)."""
    return int(estimate_input_tokens(request, fixed_bytes, kind) * calibration) + 1


def least_request_micros(
    rates: Rates, input_tokens: int, reply_tokens: int = MIN_REPLY_TOKENS
) -> int:
    """What a request of ``input_tokens`` with a minimal reply (``reply_tokens``) costs at
    ``rates``: below this a budget sends nothing."""
    return rates.input_micros(input_tokens) + rates.output_micros(reply_tokens, input_tokens)


def smallest_request_micros(
    rates: Rates,
    system: str,
    tools: Sequence[ToolDefinition],
    output_schema: Mapping[str, Any] | None = None,
    reply_tokens: int = MIN_REPLY_TOKENS,
) -> int:
    """What the smallest request with this system prompt, tools and output schema costs at
    ``rates``: a one-character message, no history, a minimal reply — its input estimated as a
    reservation estimates it (``held_input_tokens``). A budget with less left refuses every
    request of its kind (``budget_exceeded``)."""
    request = ModelRequest(
        model="",
        system=system,
        messages=[UserMessage(".")],
        tools=tools,
        output_schema=output_schema,
    )
    tokens = held_input_tokens(request, fixed_request_bytes(tools, output_schema))
    return least_request_micros(rates, tokens, reply_tokens)


def estimate_input_tokens(request: ModelRequest, fixed_bytes: int, kind: str = "") -> int:
    """An estimate, erring high, of the input tokens ``request`` will be billed for at most:
    its size (``estimate_sent_tokens``) and, with tools, the instructions for using them that
    a provider adds on its side (Anthropic's are some 350 tokens). What a request's worst case
    is reserved with."""
    tokens = estimate_sent_tokens(request, fixed_bytes, kind)
    return tokens + _WITH_TOOLS if request.tools else tokens


def estimate_sent_tokens(request: ModelRequest, fixed_bytes: int, kind: str = "") -> int:
    """The size of what ``request`` sends, in tokens, erring high: its system prompt, messages,
    tool definitions and output schema (``fixed_bytes``), with each message's framing, and
    its files by the rule the provider (of ``kind``) bills them by (``attachment_tokens``:
    pixels or pages, never their bytes). Nothing the provider adds on its side is in it."""
    size = _utf8_bytes(request.system) + fixed_bytes
    files = 0
    for message in request.messages:
        size += _message_bytes(message)
        if message.attachments:
            files += _files_tokens(message, kind, request.model)
    overhead = _PER_REQUEST + _PER_MESSAGE * len(request.messages)
    return math.ceil(size / _BYTES_PER_TOKEN) + overhead + files


def estimate_message_tokens(message: Message) -> int:
    """An estimate, erring high, of the input tokens ``message`` adds to a request (its files
    by OpenAI's tile rule, which a history's bound is counted in whatever the model)."""
    tokens = math.ceil(_message_bytes(message) / _BYTES_PER_TOKEN) + _PER_MESSAGE
    return tokens + _files_tokens(message, "", "") if message.attachments else tokens


def _files_tokens(message: Message, kind: str, model: str) -> int:
    """What ``message``'s files cost ``model`` of a provider of ``kind`` (``""``: OpenAI's
    tiles), by their pixels or pages."""
    return sum(attachment_tokens(a, kind, model) for a in message.attachments)


def estimate_text_tokens(text: str) -> int:
    """An estimate, erring high, of the tokens of ``text`` sent as part of a request."""
    return math.ceil(_utf8_bytes(text) / _BYTES_PER_TOKEN)


def _message_bytes(message: Message) -> int:
    if isinstance(message, AssistantMessage):
        size = _utf8_bytes(message.text)
        for call in message.tool_calls:
            size += len(call.id) + len(call.name) + len(json_bytes(call.arguments))
            size += _TOOL_CALL_FRAMING
        for thought in message.thinking:
            size += _utf8_bytes(thought.text) + len(thought.signature or "")
        return size
    if isinstance(message, ToolResult):
        return _utf8_bytes(message.content) + len(message.call_id)
    return _utf8_bytes(message.content)


def _utf8_bytes(text: str) -> int:
    # An ASCII string knows it is one (a flag): its length is its size, with no copy made.
    return len(text) if text.isascii() else len(text.encode())


def estimate_output_tokens(text: str) -> int:
    """An estimate, erring high, of the tokens of ``text`` a model wrote."""
    return math.ceil(len(text.encode()) / _BYTES_PER_TOKEN)


def budget_exceeded(
    allowance: Allowance, needed: int | None = None, *, reply: bool = True
) -> AgentRunnerError:
    """``budget_exceeded`` naming the budget, its limit, what is spent, and what was needed
    (``reply``: a minimal reply as well as the input)."""
    spent = f"{_usd(allowance.spent)} spent"
    if allowance.held > 0:
        spent += f" and {_usd(allowance.held)} held by requests in flight"
    if allowance.left <= 0 or needed is None:
        detail = f"{allowance.label} of {_usd(allowance.limit)} is used up: {spent}"
    else:
        detail = (
            f"{allowance.label} of {_usd(allowance.limit)} has {_usd(allowance.left)} left "
            f"({spent}); the next request needs at least {_usd(needed)} for its input"
            + (f" and a minimal reply of {MIN_REPLY_TOKENS} tokens" if reply else "")
        )
    return AgentRunnerError(ErrorCode.BUDGET_EXCEEDED, detail, hint=allowance.hint)


def price_unknown(model: str, budget: Allowance | str | None) -> AgentRunnerError:
    """``price_unknown``: ``budget`` (its label, or the budget) cannot bound what requests to
    ``model`` (``provider:model``) cost, for no price is known for it; the hint names the table
    that prices it."""
    label = budget.label if isinstance(budget, Allowance) else budget or "the budget"
    return AgentRunnerError(
        ErrorCode.PRICE_UNKNOWN,
        f"no price is known for {model}, so {label} cannot bound what its requests cost: "
        f'price it with [prices."{model}"] in agentrunner.toml',
        hint="Give it input_per_mtok and output_per_mtok (0 for a free local server), or set "
        "[budgets] allow_unpriced = true to let models of unknown price run under budgets, "
        "their cost uncounted.",
    )


def budget_cut_off(held: Reservation) -> str:
    """Why a reply stopped at the output cap its budget set: the budget, its limit, its spend."""
    budget = held.budget
    assert budget is not None, "a cap no budget lowered cuts nothing off"
    return (
        f"the reply was cut off at {held.cap} output tokens, all that "
        f"{budget.label} of {_usd(budget.limit)} had left room for ({_usd(budget.spent)} "
        "spent before it)"
    )


def _usd(micros: int) -> str:
    return f"${micros / 1_000_000:.4f}"
