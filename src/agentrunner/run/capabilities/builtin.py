"""The built-in capabilities: memory, notes, notify, agents, delegation (files lives in
``files``)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from agentrunner.engine.tools import Tool, ToolContext, ToolRetry, tool
from agentrunner.errors import AgentRunnerError
from agentrunner.run.capabilities.files import TOOL_NAMES as FILE_TOOLS
from agentrunner.run.capabilities.files import files_tools
from agentrunner.run.capabilities.registry import CapabilityContext, CapabilityRegistry

if TYPE_CHECKING:
    from agentrunner.agents.spec import AgentSpec

__all__ = ["ASK_PERSON", "builtin_capabilities"]

log = logging.getLogger("agentrunner.memory")
MAX_RECALLED = 20  # messages a recall returns at most
MAX_TASK_CHARS = 2000  # a task is a line or a paragraph, sent with every turn of its thread


def memory_tools(ctx: CapabilityContext) -> list[Tool]:
    memory, agent_id = ctx.store.memory, ctx.agent.id

    @tool(writes=True)
    async def memory_append(label: str, text: str) -> str:
        """Append text to one of your core memory blocks (created if missing)."""
        blocks = await memory.blocks(agent_id)
        current = blocks.get(label, "")
        await memory.set(agent_id, label, f"{current}\n{text}".strip())
        ctx.tell("agent.memory_updated", {"label": label})
        _updated(label, "append")
        return f"appended to {label}"

    @tool(writes=True)
    async def memory_replace(label: str, old: str, new: str) -> str:
        """Replace text in one of your core memory blocks."""
        blocks = await memory.blocks(agent_id)
        if label not in blocks:
            raise ToolRetry(f"no memory block '{label}'; blocks: {', '.join(blocks) or 'none'}")
        if old not in blocks[label]:
            raise ToolRetry(f"'{old}' is not in block '{label}'")
        await memory.set(agent_id, label, blocks[label].replace(old, new))
        ctx.tell("agent.memory_updated", {"label": label})
        _updated(label, "replace")
        return f"updated {label}"

    @tool(writes=True)
    async def set_task(task: str) -> str:
        """Say what you are working on in this conversation: shown to you as your current task
        at each of its later turns. An empty text clears it."""
        if ctx.thread_id is None:
            raise ToolRetry("this run is on no conversation, so there is no task to set")
        if len(task) > MAX_TASK_CHARS:
            raise ToolRetry(f"a task is at most {MAX_TASK_CHARS} characters; say it shorter")
        await ctx.store.threads.set_task(ctx.thread_id, task.strip() or None)
        return "task set" if task.strip() else "task cleared"

    return [memory_append, memory_replace, set_task]


def recall_tools(ctx: CapabilityContext) -> list[Tool]:
    agent_id, search = ctx.agent.id, ctx.recall

    @tool
    async def recall(query: str, limit: int = 5) -> list[dict[str, object]]:
        """Find what was said in your earlier conversations by meaning: the messages nearest
        the query (a person's, or your answers), best first, each with its conversation."""
        if search is None:
            raise ToolRetry(
                "recall is not set up in this project ([embeddings] model in agentrunner.toml)"
            )
        if not query.strip():
            raise ToolRetry("say what to look for: the query is empty")
        try:
            found = await search(agent_id, ctx.run_id, query, max(1, min(limit, MAX_RECALLED)))
        except AgentRunnerError as exc:  # the run goes on without: the model is told why
            raise ToolRetry(f"recall could not search now: {exc.one_line()}") from exc
        return [item.to_dict() for item in found]

    return [recall]


def _updated(label: str, change: str) -> None:
    """An agent's decision to change its memory, logged (the block's label, never its text)."""
    log.info(
        "memory block %r updated (%s)", label, change, extra={"label": label, "change": change}
    )


def notes_tools(ctx: CapabilityContext) -> list[Tool]:
    notes, agent_id = ctx.store.notes, ctx.agent.id

    @tool(writes=True)
    async def note_create(title: str, body: str) -> str:
        """Write a note; returns its slug."""
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "note"
        await notes.upsert(agent_id, slug, title, body)
        return slug

    @tool
    async def note_read(slug: str) -> str:
        """Read one of your notes by slug."""
        note = await notes.get(agent_id, slug)
        if note is None:
            raise ToolRetry(f"no note '{slug}'")
        return f"# {note.title}\n\n{note.body}"

    @tool
    async def note_list() -> list[str]:
        """List your notes (slug: title)."""
        return [f"{n.slug}: {n.title}" for n in await notes.list(agent_id)]

    @tool
    async def note_share(slug: str, message: str | None = None) -> str:
        """Share one of your notes with the user."""
        note = await notes.get(agent_id, slug)
        if note is None:
            raise ToolRetry(f"no note '{slug}'")
        ctx.tell(
            "agent.note_shared",
            {"slug": slug, "title": note.title, "body": note.body, "message": message},
        )
        return f"shared {slug}"

    return [note_create, note_read, note_list, note_share]


def notify_tools(ctx: CapabilityContext) -> list[Tool]:
    @tool
    async def notify_user(message: str) -> str:  # async: nothing to wait for, no thread hop
        """Send the user a notification, even when no one is watching this conversation."""
        ctx.tell("agent.notify", {"message": message})
        return "notified"

    return [notify_user]


ASK_PERSON = "ask_person"


def person_tools(ctx: CapabilityContext) -> list[Tool]:
    """``ask_person``: the run waits for a person's answer (docs/approvals.md), which the
    model gets as the call's result. The runner's policy pauses every call of it; the tool
    itself runs only where no run can wait (a delegation, a task), and says so."""

    async def ask(args: dict[str, Any], call: ToolContext) -> str:
        raise ToolRetry(
            "ask_person is not available in this run (a delegated run or a task cannot wait "
            "for a person): answer with what you have, and say what you would have asked"
        )

    schema = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "What to ask, in full."},
            "choices": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The answers to choose from, if the answer is one of a few.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    return [
        Tool(
            ASK_PERSON,
            "Ask the person you work for a question and wait for the answer (it may take "
            "hours; the run waits). Ask only what you cannot find out or decide yourself.",
            schema,
            ask,
        )
    ]


def agents_tools(ctx: CapabilityContext) -> list[Tool]:
    team = list(ctx.team)
    names = [a.id for a in team]

    async def ask(args: dict[str, Any], call: ToolContext) -> str:
        target = args["agent"]
        if target not in names:
            raise ToolRetry(
                f"ask_agent refused: '{target}' is not an agent you may ask; "
                f"agents: {', '.join(names) or 'none'}"
            )
        return await _child_run(ctx, "ask_agent", target, args["message"])

    schema = {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": names} if names else {"type": "string"},
            "message": {"type": "string"},
        },
        "required": ["agent", "message"],
        "additionalProperties": False,
    }
    return [
        Tool(
            "ask_agent",
            f"Ask another agent and get its answer. Agents: {_described(team)}.",
            schema,
            ask,
        )
    ]


def delegation_tools(ctx: CapabilityContext) -> list[Tool]:
    """``delegate``, offered only to an agent with (enabled) direct reports: the org chart is
    the grant, so a head of department hands work down to its own reports and no further."""
    reports = list(ctx.reports)
    if not reports:
        return []
    names = [a.id for a in reports]

    async def delegate(args: dict[str, Any], call: ToolContext) -> str:
        # anyone else is refused before this, by the schema's enum, naming the reports
        return await _child_run(ctx, "delegate", args["agent"], args["task"])

    schema = {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": names},
            "task": {"type": "string", "description": "What to do, with what they need to know."},
        },
        "required": ["agent", "task"],
        "additionalProperties": False,
    }
    return [
        Tool(
            "delegate",
            "Hand a task to one of your direct reports; they do it in a run of their own and "
            f"you get their result. Your direct reports: {_described(reports)}.",
            schema,
            delegate,
        )
    ]


async def _child_run(ctx: CapabilityContext, tool_name: str, target: str, message: str) -> str:
    if ctx.ask_agent is None:
        raise ToolRetry(f"{tool_name} is not available in this run")
    if ctx.depth >= ctx.max_depth:
        raise ToolRetry(
            f"{tool_name} refused: the delegation depth limit ({ctx.max_depth}) is reached; "
            "answer with what you have"
        )
    return await ctx.ask_agent(target, message)


def _described(agents: list[AgentSpec]) -> str:
    return "; ".join(f"{a.id}: {a.description or a.name}" for a in agents) or "none"


def builtin_capabilities() -> CapabilityRegistry:
    registry = CapabilityRegistry()
    registry.register("memory", memory_tools, ["memory_append", "memory_replace", "set_task"])
    registry.register("recall", recall_tools, ["recall"])
    registry.register("notes", notes_tools, ["note_create", "note_read", "note_list", "note_share"])
    registry.register("files", files_tools, FILE_TOOLS)
    registry.register("notify", notify_tools, ["notify_user"])
    registry.register("person", person_tools, [ASK_PERSON])
    registry.register("agents", agents_tools, ["ask_agent"])
    registry.register(
        "delegation",
        delegation_tools,
        ["delegate"],
        implicit="An agent may delegate to the agents whose files say `reports_to: {agent}`.",
    )
    return registry
