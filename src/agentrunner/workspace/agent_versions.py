"""An agent's file as it was at a git revision (``agentrunner eval --rev``): read with ``git
show`` from the repository the file is in, and parsed as the registry parses the file now."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agentrunner.core.paths import display_path
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.agents.registry import AgentRegistry
    from agentrunner.agents.spec import AgentSpec

__all__ = ["agent_at_revision"]


async def agent_at_revision(registry: AgentRegistry, agent_id: str, revision: str) -> AgentSpec:
    """``agent_id`` as its file was at ``revision`` (a commit, a tag, ``HEAD~1``):
    ``validation`` when git cannot give it (no git, no repository, a revision unknown or
    without the file), the file's own problems (``AgentFileErrors``, named ``FILE@REVISION``)
    when that version does not parse."""
    path = registry.get(agent_id).path
    if path is None:
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"agent '{agent_id}' has no file, so no earlier version of it",
            hint="Compare versions of agents loaded from agent files.",
        )
    shown = display_path(path)
    if revision.startswith("-"):  # git would read it as an option
        raise _unreadable(shown, revision, "a revision does not begin with '-'")
    try:
        git = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            str(path.parent),
            "show",
            f"{revision}:./{path.name}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise _unreadable(shown, revision, "git is not installed") from None
    text, said = await git.communicate()
    if git.returncode != 0:
        why = said.decode(errors="replace").strip().splitlines()
        first = why[0].removeprefix("fatal: ") if why else "git failed"
        if "not a git repository" in first:
            raise _unreadable(shown, revision, "the project is not in a git repository", init=True)
        raise _unreadable(shown, revision, first)
    return registry.version(agent_id, text.decode("utf-8", errors="replace"), f"{shown}@{revision}")


def _unreadable(file: str, revision: str, why: str, *, init: bool = False) -> AgentRunnerError:
    hint = (
        "Versions of a file come from git: `git init`, then commit the agent files."
        if init
        else f"Name a commit that has the file: `git log --oneline -- {file}`."
    )
    return AgentRunnerError(
        ErrorCode.VALIDATION,
        f"cannot read {file} at revision '{revision}': {why}",
        hint=hint,
        file=file,
    )
