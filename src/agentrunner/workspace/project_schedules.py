"""The project's schedules as they are written (docs/schedules.md): which there are
(``[schedules.NAME]`` and agent files' own), what keeps one from firing (``check_schedule``:
an unknown agent, a message naming what nothing gives; a channel not declared is a warning),
and each as people are shown it (``ScheduleView``: its state, next tick, newest fire and
counts) — what ``workspace/schedules``' firing, ``status``, the CLI, the API and the dashboard
share."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.agents.templating import Template
from agentrunner.config.schedules import Schedule
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.config import Config
    from agentrunner.store.schedules import Fire
    from agentrunner.store.store import Store

__all__ = [
    "FIRE_INPUTS",
    "Problem",
    "ScheduleView",
    "check_schedule",
    "project_schedules",
    "schedule_problems",
    "schedule_views",
]

# (key, message, whether it stops the schedule firing: a problem; else a warning)
Problem = tuple[str, str, bool]
FIRE_INPUTS = ("schedule", "fire_time", "fire_date")  # what a message may name besides input


def project_schedules(config: Config, agents: AgentRegistry) -> dict[str, Schedule]:
    """The project's schedules by name: ``[schedules.NAME]`` and each agent file's own
    ``schedule:`` (named after its agent). A name written in both is refused at its line."""
    found = dict(config.schedules)
    for agent_id in agents.ids():
        own = agents.get(agent_id).schedule
        if own is None:
            continue
        if own.name in found:
            raise AgentRunnerError(
                ErrorCode.INVALID_SPECIFICATION,
                f"schedule '{own.name}' is written twice: in agentrunner.toml and as "
                f"{agent_id}'s own schedule:",
                file=own.source,
                line=agents.get(agent_id).line_of("schedule"),
                hint=f"Rename [schedules.{own.name}] or remove one of them.",
            )
        found[own.name] = own
    return found


async def schedule_views(
    store: Store,
    schedules: Mapping[str, Schedule],
    now: float,
    problems: Mapping[str, str] | None = None,
) -> list[ScheduleView]:
    """Every schedule by name, with its state, next tick, newest fire and counts, and what
    keeps one from firing (``problems``): what ``schedules``, ``status``, the API and the
    dashboard show."""
    problems = problems or {}
    if not schedules:
        return []
    states = await store.schedules.states()
    last = await store.schedules.last()
    counts = await store.schedules.counts()
    views = []
    for name, schedule in sorted(schedules.items()):
        state = states.get(name)
        views.append(
            ScheduleView(
                schedule,
                bool(state and state.paused),
                schedule.ticks.after(now),
                last.get(name),
                counts.get(name, {}),
                problems.get(name),
            )
        )
    return views


def schedule_problems(
    config: Config, agents: AgentRegistry, schedules: Mapping[str, Schedule]
) -> dict[str, str]:
    """The schedules that cannot fire, each with the first reason (``check_schedule``'s
    problems, not its warnings): never fired, listed as ``invalid``."""
    found = {}
    for name, schedule in schedules.items():
        stops = [message for _, message, stop in check_schedule(config, agents, schedule) if stop]
        if stops:
            found[name] = stops[0]
    return found


def check_schedule(config: Config, agents: AgentRegistry, schedule: Schedule) -> list[Problem]:
    """What is wrong with ``schedule`` in this project, each at its key: an unknown agent, a
    message naming an input it does not have (problems); a channel not declared in
    agentrunner.toml, which must then be made before it fires (a warning)."""
    problems: list[Problem] = []
    if schedule.agent not in agents and schedule.agent not in agents.partial:
        near = difflib.get_close_matches(schedule.agent, agents.ids(), n=1, cutoff=0.6)
        meant = f" (did you mean '{near[0]}'?)" if near else ""
        problems.append(("agent", f"no agent '{schedule.agent}' in agents/{meant}", True))
    for key, channel in (("channel", schedule.channel), ("notify", schedule.notify)):
        if channel is not None and channel not in config.channels:
            problems.append(
                (
                    key,
                    f"#{channel} is not declared in agentrunner.toml ([channels.{channel}]): "
                    "its fires are skipped until it is made (`agentrunner channels create`)",
                    False,
                )
            )
    try:
        template = Template.parse(schedule.message, file=schedule.source)
    except AgentRunnerError as exc:
        return [*problems, ("message", exc.message, True)]
    for placeholder in template.placeholders:
        name = placeholder.path[0] if placeholder.path else ""
        if not placeholder.optional and name not in schedule.input and name not in FIRE_INPUTS:
            problems.append(
                (
                    "message",
                    f"the message names {{{{{placeholder.dotted}}}}}, which neither its input "
                    f"nor the fire ({', '.join(FIRE_INPUTS)}) gives",
                    True,
                )
            )
    return problems


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as ``schedules`` lists it: itself, whether it is paused, its next tick, its
    newest fire and how many it has queued and skipped."""

    schedule: Schedule
    paused: bool
    next_tick: float | None
    last: Fire | None
    counts: Mapping[str, int] = field(default_factory=dict)
    problem: str | None = None  # what keeps it from firing (`schedule_problems`)

    @property
    def state(self) -> str:
        if self.problem is not None:
            return "invalid"
        if not self.schedule.enabled:
            return "disabled"
        return "paused" if self.paused else "active"

    def to_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "name": s.name,
            "agent": s.agent,
            "when": s.ticks.describe(),
            "cron": s.ticks.cron,
            "every_s": s.ticks.every_s,
            "timezone": s.ticks.timezone,
            "target": s.target,
            "channel": s.channel,
            "thread": None if s.channel else s.thread,
            "missed": s.missed,
            "overlap": s.overlap,
            "state": self.state,
            "problem": self.problem,
            "next_fire": self.next_tick if self.state == "active" else None,
            "last_fire": None if self.last is None else self.last.to_dict(),
            "fires": {
                "queued": self.counts.get("queued", 0),
                "skipped": self.counts.get("skipped", 0),
            },
        }
