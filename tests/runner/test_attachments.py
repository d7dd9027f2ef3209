"""Files in a run's message (docs/attachments.md), on SQLite and PostgreSQL: kept once by
their digest however many threads name them, named in the thread's rows without their bytes,
loaded for every request that sends them, and a part no model of the chain takes refused
before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentRunner
from agentrunner.engine import UserMessage
from agentrunner.errors import AgentRunnerError, ErrorCode
from agentrunner.store.records import from_json
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from agentrunner.workspace.workspace import Workspace
from tests.attachment_files import image_attachment, pdf_attachment
from tests.runner.conftest import CONFIG, Agent


async def _bodies(runner: AgentRunner, thread_id: str) -> list[dict[str, Any]]:
    rows = await runner.store.messages.db.fetch_all(
        "SELECT body FROM messages WHERE thread_id = '" + thread_id + "' ORDER BY seq", {}
    )
    return [from_json(r["body"]) for r in rows]


async def test_files_are_kept_once_by_digest_and_named_in_rows(
    agent: Agent, open_runner: Any
) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    red, blue = image_attachment("red.png", 4, 3, "red"), image_attachment("blue.png", 7, 5, "blue")
    report = pdf_attachment("report.pdf", pages=3)
    assert len({red.sha256, blue.sha256, report.sha256}) == 3

    first = await runner.run_agent("looker", "t1", "what is this?", attachments=[red, report])
    second = await runner.run_agent("looker", "t2", "and this?", attachments=[blue])
    # the same file in a thousand threads is one copy: here, ten more threads
    for n in range(10):
        await runner.run_agent("looker", f"many-{n}", "again", attachments=[red])

    # the test model was sent the bytes (it refuses a request without them) and names the files
    assert "red.png" in first.text and "report.pdf" in first.text and "3 pages" in first.text
    assert "blue.png" in second.text and "7x5" in second.text and "red.png" not in second.text
    files, size = await runner.store.attachments.stats()
    assert files == 3 and size == red.size + blue.size + report.size
    assert await runner.store.attachments.uses(red.sha256) == 11
    assert await runner.store.attachments.uses(blue.sha256) == 1

    body = (await _bodies(runner, "t1"))[0]
    assert body["content"] == "what is this?"
    assert [a["sha256"] for a in body["attachments"]] == [red.sha256, report.sha256]
    assert body["attachments"][0] == {
        "sha256": red.sha256,
        "media_type": "image/png",
        "size": red.size,
        "name": "red.png",
        "width": 4,
        "height": 3,
    }
    assert "data" not in str(body) and len(str(body)) < 600  # a reference, never the bytes
    kept = await runner.store.attachments.get(report.sha256)
    assert kept is not None and kept.pages == 3 and kept.media_type == "application/pdf"
    assert await runner.store.attachments.data(report.sha256) == report.data


async def test_a_later_turn_sends_the_thread_s_files_again(agent: Agent, open_runner: Any) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    await runner.run_agent("looker", "t1", "look", attachments=[image_attachment("a.png")])
    # a second runner: a fresh process, nothing cached, the bytes from the store
    other: AgentRunner = await open_runner()
    later = await other.run_agent("looker", "t1", "and now, without a file?")
    assert later.status == "completed" and "You said: and now" in later.text
    history, _ = await other.store.messages.tail("t1", 10)
    user = history[0]
    assert isinstance(user, UserMessage) and user.attachments[0].name == "a.png"
    assert user.attachments[0].data is None  # as read: a reference; loaded only to be sent


async def test_a_text_message_s_row_is_unchanged(agent: Agent, open_runner: Any) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    await runner.run_agent("looker", "t1", "plain words")
    assert (await _bodies(runner, "t1"))[0] == {"role": "user", "content": "plain words"}
    assert await runner.store.attachments.stats() == (0, 0)


@pytest.mark.parametrize("file", ["image", "pdf"])
async def test_a_part_no_model_takes_is_refused_before_anything_is_sent(
    agent: Agent, open_runner: Any, mock: MockProvider, file: str
) -> None:
    agent("reader", "name: reader\nmodel: mockai:gpt-mock")  # a model of no known family: text
    runner: AgentRunner = await open_runner()
    given = image_attachment("shot.png") if file == "image" else pdf_attachment("doc.pdf")
    with pytest.raises(AgentRunnerError) as raised:
        await runner.run_agent("reader", "t1", "describe", attachments=[given])
    assert raised.value.code is ErrorCode.MODEL_INPUT_UNSUPPORTED
    assert "mockai:gpt-mock" in raised.value.message and given.name in raised.value.message
    assert f"takes no {file} input" in raised.value.message
    assert mock.requests == []  # nothing was sent


async def test_deleting_threads_drops_files_no_other_thread_names(
    agent: Agent, open_runner: Any
) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    shared, own = image_attachment("shared.png"), pdf_attachment("own.pdf", pages=2)
    await runner.run_agent("looker", "t1", "one", attachments=[shared, own])
    await runner.run_agent("looker", "t2", "two", attachments=[shared])
    store = runner.store

    deleted, dropped = await store.threads.delete("t1", store.attachments)
    assert deleted == ["t1"] and dropped == 1  # own.pdf: no thread names it now
    assert await store.threads.get("t1") is None
    assert await store.messages.tail("t1", 10) == ([], 0)
    assert await store.attachments.get(own.sha256) is None
    assert await store.attachments.data(shared.sha256) == shared.data  # t2 still names it
    # a later turn of t2 still sends it
    later = await runner.run_agent("looker", "t2", "still there?")
    assert later.status == "completed"

    deleted, dropped = await store.threads.delete("t2", store.attachments)
    assert dropped == 1 and await store.attachments.stats() == (0, 0)
    # the runs stay, with what they cost
    assert len(await store.runs.list(agent_id="looker", limit=10)) == 3


async def test_a_thread_with_a_live_run_is_not_deleted(agent: Agent, open_runner: Any) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    await runner.run_agent("looker", "t1", "one", attachments=[image_attachment("a.png")])
    queued = await Workspace(runner).runs.queue("looker", "t1", "queued, not run")
    with pytest.raises(AgentRunnerError) as raised:
        await runner.store.threads.delete("t1", runner.store.attachments)
    assert raised.value.code is ErrorCode.VALIDATION and queued.run_id in raised.value.message
    assert await runner.store.threads.get("t1") is not None
    assert await runner.store.attachments.stats() != (0, 0)


async def test_a_queued_run_s_files_reach_the_worker_s_model(
    agent: Agent, open_runner: Any
) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    workspace = Workspace(runner)
    await runner.store.threads.open("q1", "looker")
    await runner.store.threads.open("q2", "looker")
    one, two = image_attachment("one.png", 3, 3), pdf_attachment("two.pdf", pages=4)
    first = await workspace.runs.queue("looker", "q1", "queued one", attachments=[one])
    second = await workspace.runs.queue("looker", "q2", "queued two", attachments=[two])
    assert await runner.store.attachments.stats() == (2, one.size + two.size)  # kept at once
    # another process's worker: nothing of the files in its memory
    worker_runner: AgentRunner = await open_runner()
    await Workspace(worker_runner).worker().run(until_idle=True)
    done = [await runner.store.runs.get(r.run_id) for r in (first, second)]
    assert [r.status for r in done if r] == ["completed", "completed"]
    texts = [(await runner.store.messages.tail(t, 5))[0][-1] for t in ("q1", "q2")]
    assert "one.png" in texts[0].text and "two.pdf" not in texts[0].text  # type: ignore[union-attr]
    assert "two.pdf" in texts[1].text and "4 pages" in texts[1].text  # type: ignore[union-attr]


PRICEY_VISION = """
[prices."mockai:gpt-pricey"]
input_per_mtok = 100.0
output_per_mtok = 400.0

[models."mockai:gpt-pricey"]
input = ["text", "image", "pdf"]
"""


@pytest.mark.parametrize(("width", "height", "refused"), [(64, 64, False), (1024, 1024, True)])
async def test_a_per_run_budget_an_image_would_exceed_refuses_before_sending(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    mock_server: MockProviderServer,
    width: int,
    height: int,
    refused: bool,
) -> None:
    """$0.06 a run at $100 per million input tokens: 600 tokens, less a minimal reply's. A
    64 px image is 255 tokens by OpenAI's tiles, a 1024 px one 765: the first fits with the
    request's text, the second does not — refused before anything is sent, whatever its bytes
    (a few kilobytes)."""
    (project / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url,
            anthropic=mock_server.anthropic_url,
            extra=PRICEY_VISION + "\n[budgets]\nper_run_usd = 0.06\n",
        )
    )
    agent("viewer", "name: viewer\nmodel: mockai:gpt-pricey")
    runner: AgentRunner = await open_runner()
    picture = image_attachment("p.png", width, height)
    assert picture.size < 10_000  # cheap to send as bytes; dear as pixels
    if not refused:
        mock.queue(Reply(text="A small square.", input_tokens=None))
        result = await runner.run_agent("viewer", "t1", "what is it?", attachments=[picture])
        assert result.status == "completed" and len(mock.requests) == 1
        assert result.cost_micros <= 60_000
        return
    with pytest.raises(AgentRunnerError) as raised:
        await runner.run_agent("viewer", "t1", "what is it?", attachments=[picture])
    assert raised.value.code is ErrorCode.BUDGET_EXCEEDED
    assert mock.requests == []  # nothing sent
    [run] = await runner.store.runs.list(thread_id="t1")
    assert run.cost_micros == 0


async def test_compaction_names_the_files_it_summarises(agent: Agent, open_runner: Any) -> None:
    agent("looker", "name: looker\nmodel: test")
    runner: AgentRunner = await open_runner()
    await runner.run_agent(
        "looker", "t1", "look", attachments=[image_attachment("chart.png", 9, 7)]
    )
    summary = await runner.compact_thread("t1")
    # the test model writes back what it was asked: the transcript names the file, no bytes
    assert "[image: chart.png, image/png, 9x7" in summary.summary
    # the messages stay, and the file with them
    later = await runner.run_agent("looker", "t1", "what did I show you?")
    assert later.status == "completed"
    assert (await runner.store.attachments.stats())[0] == 1


async def test_spend_stays_within_the_per_run_budget_over_many_images(
    agent: Agent,
    open_runner: Any,
    mock: MockProvider,
    project: Path,
    mock_server: MockProviderServer,
) -> None:
    """Twenty runs, each with an image of another size (16 to 1,600 px a side): every run's
    spend is at most its budget, a run refused sent nothing and cost nothing, and the cost rows
    add up to the runs'."""
    (project / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url,
            anthropic=mock_server.anthropic_url,
            extra=PRICEY_VISION + "\n[budgets]\nper_run_usd = 0.08\n",
        )
    )
    agent("viewer", "name: viewer\nmodel: mockai:gpt-pricey")
    runner: AgentRunner = await open_runner()
    refused, codes = 0, []
    for n in range(20):
        side = 16 + n * 84
        sent = len(mock.requests)
        try:
            await runner.run_agent(
                "viewer",
                f"t{n}",
                "what is it?",
                attachments=[image_attachment("p.png", side, side)],
            )
        except AgentRunnerError as exc:
            codes.append(exc.code)
            assert len(mock.requests) == sent  # refused before sending
            refused += 1
    assert set(codes) == {ErrorCode.BUDGET_EXCEEDED}
    runs = await runner.store.runs.list(limit=100)
    assert len(runs) == 20 and 0 < refused < 20  # both sides of the limit were tried
    assert all(r.cost_micros <= 80_000 for r in runs)
    assert all(r.cost_micros == 0 for r in runs if r.status == "failed")
    rows = await runner.store.messages.db.fetch_all(
        "SELECT SUM(cost_micros) AS micros FROM costs", {}
    )
    assert int(rows[0]["micros"]) == sum(r.cost_micros for r in runs)


async def test_a_paused_step_s_files_are_sent_when_it_goes_on(
    agent: Agent,
    project: Path,
    mock: MockProvider,
    mock_server: MockProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step asks for two calls: `snap` needs a person's yes, `peek` runs at once and returns
    an image, held while the run waits (in the store: the run goes on in a worker). Approved,
    `snap` returns another; both reach the model, each once."""
    from agentrunner.engine import tool
    from agentrunner.run.capabilities.builtin import builtin_capabilities
    from agentrunner.runtime import compose

    (project / "agentrunner.toml").write_text(
        CONFIG.format(
            openai=mock_server.openai_url,
            anthropic=mock_server.anthropic_url,
            extra='[models."mockai:gpt-mock"]\ninput = ["text", "image", "pdf"]\n',
        )
    )
    agent("eyes", "model: mockai:gpt-mock\ncapabilities: [camera]\napproval:\n  tools: [snap]")
    held, taken = image_attachment("held.png", 5, 5, "red"), image_attachment("snap.png", 6, 6)

    @tool
    async def peek() -> Any:
        """Look without asking."""
        return ["a quick look", held]

    @tool
    async def snap() -> Any:
        """Take a photo (asks first)."""
        return ["a photo", taken]

    def with_camera() -> Any:
        registry = builtin_capabilities()
        registry.register("camera", lambda ctx: [peek, snap], ["peek", "snap"])
        return registry

    from agentrunner.agents import loader

    monkeypatch.setattr(compose, "builtin_capabilities", with_camera)
    monkeypatch.setattr(loader, "CAPABILITIES", (*loader.CAPABILITIES, "camera"))
    mock.queue(Reply(tool_calls=[("peek", {}), ("snap", {})]), Reply(text="Two pictures."))
    ws = await compose.open_workspace(project)
    try:
        result = await ws.runner.run_agent("eyes", "t1", "look around")
        assert result.status == "waiting"
        assert (await ws.runner.store.attachments.stats())[0] == 1  # the held result's file
        [asked] = result.approvals
        await ws.runner.waits.decide(asked["approval_id"], approve=True, by="ana")
        await ws.worker(concurrency=1).run(until_idle=True)
        run = await ws.runner.store.runs.get(result.run_id)
        assert run is not None and run.status == "completed", (run.error_code, run.error_message)
        last = mock.requests[-1].body["messages"]
        images = [
            part["image_url"]["url"]
            for m in last
            if m["role"] == "user" and isinstance(m["content"], list)
            for part in m["content"]
            if part.get("type") == "image_url"
        ]
        assert images == [held.data_url(), taken.data_url()]
        assert (await ws.runner.store.attachments.stats())[0] == 2
    finally:
        await ws.close()
