"""An agent's threads as people name them: its session thread (DESIGN decision 6), a thread
given by id or by a beginning of its id, and the rule that a thread is one agent's own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrunner.core.ids import new_id
from agentrunner.errors import AgentRunnerError, ErrorCode

if TYPE_CHECKING:
    from agentrunner.store.records import Thread
    from agentrunner.store.store import Store

__all__ = ["agent_thread", "check_owner", "find_thread", "session_thread"]

_SEVERAL = "A thread holds one agent's conversation; several agents talk in a channel."


async def session_thread(store: Store, agent_id: str, *, new: bool = False) -> str:
    """The agent's current session thread; a new one if asked or none."""
    state = await store.agent_states.get(agent_id)
    if state.current_thread_id and not new:
        return state.current_thread_id
    thread_id = new_id(f"{agent_id}-")
    await store.threads.open(thread_id, agent_id)
    await store.agent_states.set_current_thread(agent_id, thread_id)
    return thread_id


async def agent_thread(store: Store, agent_id: str, thread_id: str, *, prefix: bool = True) -> str:
    """The id of ``agent_id``'s existing thread ``thread_id`` — or, with ``prefix`` (a
    person typing), the one whose id begins with it, if only one does; ``thread_not_found``,
    with the agent's recent threads as a hint, for an unknown id or another agent's thread.
    A thread is opened by its own request, never by naming an id that is not there."""
    thread = await store.threads.get(thread_id)
    if thread is None and prefix:
        starting = await store.threads.ids_starting(thread_id, 2)
        if len(starting) == 1:
            thread = await store.threads.get(starting[0])
    if thread is not None and thread.agent_id == agent_id:
        return thread.id
    recent = [t.id for t in await store.threads.list(agent_id=agent_id, limit=5)]
    if recent:
        hint = f"Threads of '{agent_id}', newest first: {', '.join(recent)}."
    elif prefix:
        hint = f"'{agent_id}' has no threads yet; leave out the thread to start its session."
    else:
        hint = f"'{agent_id}' has no threads yet."
    if thread is None:
        message = f"no thread '{thread_id}' of agent '{agent_id}'"
        if not prefix:
            hint += " Open one first: POST /threads with its agent_id (and an id to choose it)."
    else:
        message = f"thread '{thread.id}' belongs to agent '{thread.agent_id}', not '{agent_id}'"
        hint += f" {_SEVERAL}"
    raise AgentRunnerError(ErrorCode.THREAD_NOT_FOUND, message, hint=hint)


async def find_thread(store: Store, thread_id: str) -> Thread:
    """The thread ``thread_id``, whichever agent's — or the one whose id begins with it, if only
    one does; ``thread_not_found`` otherwise."""
    thread = await store.threads.get(thread_id)
    if thread is not None:
        return thread
    starting = await store.threads.ids_starting(thread_id, 6) if thread_id else []
    if len(starting) == 1:
        thread = await store.threads.get(starting[0])
        if thread is not None:
            return thread
    if len(starting) > 1:
        more = ", …" if len(starting) > 5 else ""
        raise AgentRunnerError(
            ErrorCode.VALIDATION,
            f"'{thread_id}' begins more than one thread id: {', '.join(starting[:5])}{more}",
            hint="Give more of the id.",
        )
    raise AgentRunnerError(
        ErrorCode.THREAD_NOT_FOUND,
        f"no thread '{thread_id}'",
        hint="See `agentrunner threads list`.",
    )


def check_owner(thread: Thread, agent_id: str) -> None:
    """A thread is one agent's conversation: another agent's run there is refused."""
    if thread.agent_id != agent_id:
        raise AgentRunnerError(
            ErrorCode.THREAD_NOT_FOUND,
            f"thread '{thread.id}' belongs to agent '{thread.agent_id}', not '{agent_id}'",
            hint=f"{_SEVERAL} (`agentrunner channels create`), or ask_agent.",
        )
