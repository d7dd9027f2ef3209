"""A person in the loop (issue 41): a run waits durably for a decision, the first decision wins,
and an approved call runs exactly once, whoever goes on with the run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.run.approvals import INTERRUPTED_APPROVED
from agentrunner.runtime.compose import open_workspace
from agentrunner.testing import MockProvider, Reply
from agentrunner.workspace.workspace import Workspace
from tests.runner.conftest import Agent

FRONT = "model: mockai:gpt-mock\ncapabilities: [notes]\napproval:\n  tools: [note_create]"


async def _notes(runner: AgentRunner, agent_id: str) -> list[str]:
    return [n.title for n in await runner.store.notes.list(agent_id)]


async def _serve(ws: Workspace) -> None:
    await ws.worker(concurrency=1).run(until_idle=True)


def _tool_results(mock: MockProvider) -> list[dict[str, object]]:
    """The tool results of the last request the mock provider was sent."""
    body = mock.requests[-1].body
    return [m for m in body["messages"] if m.get("role") == "tool"]


async def test_a_run_waits_then_goes_on_once_approved(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"}), ("note_list", {})]),
        Reply(text="free"),
        Reply(text="noted"),
    )
    ws = await open_workspace(project)
    try:
        runner = ws.runner
        result = await runner.run_agent("clerk", "t1", "write the plan down")
        assert result.status == "waiting" and result.stop_reason == "waiting"
        [asked] = result.approvals
        assert asked["tool"] == "note_create" and asked["arguments"]["title"] == "plan"
        run = await runner.store.runs.get(result.run_id)
        assert run is not None and run.status == "waiting" and run.worker_id is None
        assert await _notes(runner, "clerk") == []  # asked, not run
        # the thread is held: another message on it does not run
        with pytest.raises(AgentRunnerError) as held:
            await runner.run_agent("clerk", "t1", "anything else?")
        assert held.value.code is ErrorCode.THREAD_WAITING
        assert result.run_id in held.value.message
        # another thread of the same agent is not held
        assert (await runner.run_agent("clerk", "t2", "hi")).text == "free"

        decided = await runner.waits.decide(asked["approval_id"], approve=True, by="ana")
        assert decided.won and decided.requeued
        await _serve(ws)
        run = await runner.store.runs.get(result.run_id)
        assert run is not None and run.status == "completed", run
        assert await _notes(runner, "clerk") == ["plan"]
        sent = mock.requests[-1].body["messages"]
        [calls] = [m["tool_calls"] for m in sent if m.get("tool_calls")]
        results = _tool_results(mock)  # one each, in the order of the calls
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
        assert "plan" in str(results[0]["content"]) and results[1]["content"] != ""
        kinds = [e.type for e in await runner.store.events.list(result.run_id)]
        assert kinds.count("approval.requested") == 1 and kinds.count("approval.decided") == 1
        assert kinds.index("approval.requested") < kinds.index("approval.decided")
        assert kinds[-1] == "agent.idle" and kinds.count("agent.working") == 2
        seqs = [e.seq for e in await runner.store.events.list(result.run_id)]
        assert seqs == sorted(set(seqs))  # events go on after the wait, none overwritten
        thread = await runner.store.threads.get("t1")
        assert thread is not None and thread.waiting_run_id is None
        # a second decision, late, is refused naming the first
        with pytest.raises(AgentRunnerError) as late:
            await runner.waits.decide(asked["approval_id"], approve=False, by="bo")
        assert late.value.code is ErrorCode.APPROVAL_DECIDED and "ana" in late.value.message
        mock.queue(Reply(text="next"))
        assert (await runner.run_agent("clerk", "t1", "and now?")).text == "next"
    finally:
        await ws.close()


async def test_a_denied_call_tells_the_model_who_denied_it_and_why(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "secret", "body": "x"})]),
        Reply(text="understood"),
    )
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        [asked] = result.approvals
        await ws.runner.waits.decide(
            asked["approval_id"], approve=False, by="ana", reason="not on this thread"
        )
        await _serve(ws)
        [denied] = _tool_results(mock)
        assert denied["content"] == "denied by ana: not on this thread"
        assert await _notes(ws.runner, "clerk") == []
        run = await ws.runner.store.runs.get(result.run_id)
        assert run is not None and run.status == "completed"
    finally:
        await ws.close()


async def test_edited_arguments_run_and_the_model_is_told(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "draft", "body": "x"})]),
        Reply(text="ok"),
    )
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        [asked] = result.approvals
        decided = await ws.runner.waits.decide(
            asked["approval_id"],
            approve=True,
            by="ana",
            arguments={"title": "final", "body": "y"},
        )
        assert decided.record.edited
        await _serve(ws)
        assert await _notes(ws.runner, "clerk") == ["final"]
        [result_sent] = _tool_results(mock)
        assert "edited by ana" in str(result_sent["content"])
    finally:
        await ws.close()


async def test_twenty_concurrent_decisions_one_wins_and_the_tool_runs_once(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "once", "body": "x"})]),
        Reply(text="done"),
    )
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        [asked] = result.approvals

        async def decide(n: int) -> str:
            try:
                await ws.runner.waits.decide(
                    asked["approval_id"], approve=n % 2 == 0, by=f"person{n}"
                )
            except AgentRunnerError as exc:
                return "refused" if exc.code is ErrorCode.APPROVAL_DECIDED else str(exc.code)
            return f"person{n}"

        outcomes = await asyncio.gather(*(decide(n) for n in range(20)))
        winners = [o for o in outcomes if o.startswith("person")]
        assert len(winners) == 1 and outcomes.count("refused") == 19
        record = await ws.runner.store.approvals.get(asked["approval_id"])
        assert record is not None and record.decided_by == winners[0]
        await _serve(ws)
        expected = ["once"] if record.status == "approved" else []
        assert await _notes(ws.runner, "clerk") == expected
        run = await ws.runner.store.runs.get(result.run_id)
        assert run is not None and run.status == "completed"
    finally:
        await ws.close()


async def test_an_approved_call_that_started_before_a_crash_is_not_run_again(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "maybe", "body": "x"})]),
        Reply(text="checked"),
    )
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        [asked] = result.approvals
        await ws.runner.waits.decide(asked["approval_id"], approve=True, by="ana")
        # the journal's durable point was written, then the process died: it may have run
        assert await ws.runner.store.approvals.started(asked["approval_id"])
        await _serve(ws)
        assert await _notes(ws.runner, "clerk") == []  # not run a second time
        [answered] = _tool_results(mock)
        assert answered["content"] == INTERRUPTED_APPROVED
    finally:
        await ws.close()


async def test_a_resumed_run_whose_worker_died_is_queued_again_not_failed(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "kept", "body": "x"})]),
        Reply(text="finished"),
    )
    ws = await open_workspace(project)
    try:
        store = ws.runner.store
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        [asked] = result.approvals
        await ws.runner.waits.decide(asked["approval_id"], approve=True, by="ana")
        # a worker claimed it and died after the call ran, before the run settled
        claimed = await store.mailbox.claim("dead-worker", lease_s=-1.0)
        assert claimed is not None and claimed.id == result.run_id
        assert await store.approvals.started(asked["approval_id"])
        await store.approvals.finished(asked["approval_id"], {"content": "ok", "is_error": False})
        assert await store.mailbox.fail_expired() == []  # requeued, not failed
        run = await store.runs.get(result.run_id)
        assert run is not None and run.status == "created"
        await _serve(ws)
        run = await store.runs.get(result.run_id)
        assert run is not None and run.status == "completed"
        [answered] = _tool_results(mock)
        assert answered["content"] == "ok"  # its stored result, not a second run
        assert await _notes(ws.runner, "clerk") == []
    finally:
        await ws.close()


async def test_a_timeout_denies_and_cancelling_a_waiting_run_frees_its_thread(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT.replace("tools: [note_create]", "tools: [note_*]\n  timeout_s: 0.01"))
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "a", "body": "x"})]),
        Reply(text="too late"),
        Reply(tool_calls=[("note_list", {})]),
    )
    ws = await open_workspace(project)
    try:
        runner = ws.runner
        first = await runner.run_agent("clerk", "t1", "write it")
        await asyncio.sleep(0.05)
        assert await runner.waits.expire_due() == 1
        record = await runner.store.approvals.get(first.approvals[0]["approval_id"])
        assert record is not None and record.status == "expired"
        await _serve(ws)
        [denied] = _tool_results(mock)
        assert str(denied["content"]).startswith("denied: nobody decided in time")
        assert await _notes(runner, "clerk") == []  # a timeout never fails open
        second = await runner.run_agent("clerk", "t2", "list them")
        assert second.status == "waiting" and second.approvals[0]["tool"] == "note_list"
        assert await runner.store.mailbox.cancel(second.run_id) == "cancelled"
        run = await runner.store.runs.get(second.run_id)
        assert run is not None and run.status == "cancelled"
        thread = await runner.store.threads.get("t2")
        assert thread is not None and thread.waiting_run_id is None
        mock.queue(Reply(text="free again"))
        assert (await runner.run_agent("clerk", "t2", "hello")).text == "free again"
    finally:
        await ws.close()


async def test_agents_without_rules_never_wait(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("plain", "model: mockai:gpt-mock\ncapabilities: [notes]")
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "n", "body": "x"})]),
        Reply(text="done"),
    )
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("plain", "t1", "write it")
        assert result.status == "completed" and result.approvals == []
        assert await _notes(ws.runner, "plain") == ["n"]
    finally:
        await ws.close()


async def test_ask_person_waits_for_an_answer_the_model_then_reads(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", "model: mockai:gpt-mock\ncapabilities: [person]")
    question = {"question": "Which day?", "choices": ["Monday", "Friday"]}
    mock.queue(
        Reply(tool_calls=[("ask_person", question)]),
        Reply(text="Friday it is"),
        Reply(tool_calls=[("ask_person", {"question": "Why?"})]),
        Reply(text="no answer then"),
    )
    ws = await open_workspace(project)
    try:
        waits = ws.runner.waits
        first = await ws.runner.run_agent("clerk", "t1", "plan the review")
        [asked] = first.approvals
        assert first.status == "waiting" and asked["kind"] == "question"
        assert asked["arguments"] == question
        with pytest.raises(AgentRunnerError) as wrong:  # not one of its choices
            await waits.answer(asked["approval_id"], "Sunday", by="ana")
        assert wrong.value.code is ErrorCode.VALIDATION and "Monday, Friday" in wrong.value.message
        with pytest.raises(AgentRunnerError) as bare:  # approving a question needs an answer
            await waits.decide(asked["approval_id"], approve=True, by="ana")
        assert bare.value.code is ErrorCode.VALIDATION
        await waits.answer(asked["approval_id"], "Friday", by="ana")
        await _serve(ws)
        [answered] = _tool_results(mock)
        assert answered["content"] == "Friday"
        run = await ws.runner.store.runs.get(first.run_id)
        assert run is not None and run.status == "completed"
        # a question declined: the model is told, and the run goes on
        second = await ws.runner.run_agent("clerk", "t2", "and?")
        await waits.decide(second.approvals[0]["approval_id"], approve=False, by="bo")
        await _serve(ws)
        [declined] = _tool_results(mock)
        assert declined["content"] == "denied by bo"
    finally:
        await ws.close()


async def test_a_tool_call_is_approved_not_answered(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(Reply(tool_calls=[("note_create", {"title": "a", "body": "x"})]))
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        with pytest.raises(AgentRunnerError) as wrong:
            await ws.runner.waits.answer(result.approvals[0]["approval_id"], "yes", by="ana")
        assert wrong.value.code is ErrorCode.VALIDATION and "not a question" in wrong.value.message
        record = await ws.runner.store.approvals.get(result.approvals[0]["approval_id"])
        assert record is not None and record.status == "pending"  # nothing changed
    finally:
        await ws.close()


async def test_a_delegation_that_waits_makes_its_caller_wait_and_both_go_on(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    # the boss's grant bounds the CTO's tools: it has the notes too, and no rule on them
    agent("boss", "model: mockai:gpt-mock\ndescription: leads\ncapabilities: [notes]")
    agent("cto", f"{FRONT}\nreports_to: boss\ndescription: builds")
    mock.queue(
        Reply(tool_calls=[("delegate", {"agent": "cto", "task": "write the plan"})]),
        Reply(tool_calls=[("note_create", {"title": "plan", "body": "x"})]),
        Reply(text="plan written"),
        Reply(text="the CTO wrote the plan"),
    )
    ws = await open_workspace(project)
    try:
        runner, store = ws.runner, ws.runner.store
        top = await runner.run_agent("boss", "b1", "get the plan written")
        assert top.status == "waiting"
        # what the boss's run asks a person is the CTO's request: the one that decides it
        [person] = top.approvals
        assert person["agent_id"] == "cto" and person["tool"] == "note_create"
        [waiting_on] = [r.to_dict() for r in await store.approvals.of_run(top.run_id)]
        assert waiting_on["kind"] == "delegation" and "cto" in waiting_on["rule"]
        waiting_on["approval_id"] = waiting_on["id"]
        [child] = await store.runs.list(agent_id="cto")
        assert child.status == "waiting" and child.parent_run_id == top.run_id
        # a person sees the CTO's request, not the boss's wait on it
        [asked] = await store.approvals.pending()
        assert asked.agent_id == "cto" and asked.tool == "note_create"
        assert asked.id in waiting_on["rule"]
        with pytest.raises(AgentRunnerError):  # the boss's wait is not a person's to decide
            await runner.waits.decide(waiting_on["approval_id"], approve=True, by="ana")
        await runner.waits.decide(asked.id, approve=True, by="ana")
        await _serve(ws)
        child_run = await store.runs.get(child.id)
        top_run = await store.runs.get(top.run_id)
        assert child_run is not None and child_run.status == "completed"
        assert top_run is not None and top_run.status == "completed", top_run
        assert await _notes(runner, "cto") == ["plan"]
        [delegated] = _tool_results(mock)
        assert delegated["content"] == "plan written"  # the CTO's answer, once it ended
        kinds = [e.type for e in await store.events.list(top.run_id)]
        assert kinds.count("approval.decided") == 1 and kinds[-1] == "agent.idle"
    finally:
        await ws.close()


async def test_a_message_queued_behind_a_waiting_run_waits_and_serving_until_idle_ends(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "first", "body": "x"})]),
        Reply(text="first done"),
        Reply(text="second done"),
    )
    ws = await open_workspace(project)
    try:
        store = ws.runner.store
        first = await ws.runner.run_agent("clerk", "t1", "write it")
        queued = await ws.runs.queue("clerk", "t1", "and then this")
        # nothing a worker can take: serving until idle ends at once, the message still queued
        await asyncio.wait_for(_serve(ws), 30)
        behind = await store.runs.get(queued.run_id)
        assert behind is not None and behind.status == "created"
        assert not await store.mailbox.busy()
        await ws.runner.waits.decide(first.approvals[0]["approval_id"], approve=True, by="ana")
        assert await store.mailbox.busy()
        await _serve(ws)
        done = [await store.runs.get(r) for r in (first.run_id, queued.run_id)]
        assert [r.status for r in done if r is not None] == ["completed", "completed"]
        first_run, second_run = done
        assert first_run is not None and second_run is not None
        assert (first_run.completed_at or 0) <= (second_run.started_at or 0)  # in order
    finally:
        await ws.close()


async def test_a_held_thread_is_not_compacted(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT)
    mock.queue(Reply(tool_calls=[("note_create", {"title": "a", "body": "x"})]))
    ws = await open_workspace(project)
    try:
        result = await ws.runner.run_agent("clerk", "t1", "write it")
        with pytest.raises(AgentRunnerError) as held:
            await ws.runner.compact_thread("t1")
        assert held.value.code is ErrorCode.THREAD_WAITING
        assert len(mock.requests) == 1  # no summary was asked for
        assert result.status == "waiting"
    finally:
        await ws.close()


async def test_a_short_id_finds_its_request_and_an_ambiguous_one_is_refused(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    agent("clerk", FRONT.replace("[note_create]", "[note_create, note_list]"))
    mock.queue(Reply(tool_calls=[("note_create", {"title": "a", "body": "x"}), ("note_list", {})]))
    ws = await open_workspace(project)
    try:
        first, second = (await ws.runner.run_agent("clerk", "t1", "go")).approvals
        a, b = str(first["approval_id"]), str(second["approval_id"])
        common = next(n for n in range(len(a)) if a[n] != b[n])
        found = await ws.runner.waits.find(a[: common + 1])
        assert found.id == a
        with pytest.raises(AgentRunnerError) as ambiguous:
            await ws.runner.waits.find(a[:common])
        assert ambiguous.value.code is ErrorCode.VALIDATION and a in ambiguous.value.message
    finally:
        await ws.close()


async def test_the_last_decision_says_it_requeued_the_run_though_a_worker_took_it_at_once(
    agent: Agent, project: Path, mock: MockProvider
) -> None:
    """``requeued`` is what the decision's own transaction did, not the run's status read
    after it: a worker that claimed the run between the commit and that read (PostgreSQL
    wakes one by NOTIFY) left it ``running``, and the person was told it still waited."""
    agent("clerk", FRONT)
    mock.queue(
        Reply(
            tool_calls=[
                ("note_create", {"title": "a", "body": "x"}),
                ("note_create", {"title": "b", "body": "y"}),
            ]
        ),
    )
    ws = await open_workspace(project)
    try:
        store = ws.runner.store
        first, second = (await ws.runner.run_agent("clerk", "t1", "write both")).approvals
        driver = store.driver
        claimed: list[str] = []

        def then_claimed(commit: Any) -> Any:
            async def committed(ops: Any) -> Any:
                done = await commit(ops)
                if not claimed:  # the quick worker, woken by the commit
                    run = await store.mailbox.claim("quick-worker", lease_s=30.0)
                    claimed.extend([run.id] if run is not None else [])
                return done

            return committed

        driver.batch = then_claimed(driver.batch)  # type: ignore[method-assign]
        driver.fetch_in_transaction = then_claimed(driver.fetch_in_transaction)  # type: ignore[method-assign]
        # a decision that leaves another request pending queues nothing
        decided = await ws.runner.waits.decide(first["approval_id"], approve=True, by="ana")
        assert decided.won and not decided.requeued
        assert claimed == []  # nothing to claim: the run waits
        decided = await ws.runner.waits.decide(second["approval_id"], approve=False, by="bo")
        assert decided.won and decided.requeued
        run = await store.runs.get(decided.record.run_id)
        assert claimed == [decided.record.run_id]
        assert run is not None and run.status == "running"  # the worker's, at once
    finally:
        await ws.close()
