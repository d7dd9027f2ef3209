"""The HTTP API declares what it returns: every route has a stable operation id and its response
body's schema in the OpenAPI document, and the bodies are the library's own dicts, unchanged."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx2
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from agentrunner.testing import Fault, MockProvider, Reply
from tests.runner.conftest import Agent
from tests.server.conftest import open_thread

AUTH = {"authorization": "Bearer secret-token"}

OPERATIONS = {
    ("GET", "/health"): "health",
    ("GET", "/agents"): "list_agents",
    ("GET", "/agents/{agent_id}"): "get_agent",
    ("POST", "/threads"): "create_thread",
    ("GET", "/threads"): "list_threads",
    ("GET", "/threads/{thread_id}"): "get_thread",
    ("GET", "/threads/{thread_id}/messages"): "list_thread_messages",
    ("POST", "/threads/{thread_id}/fork"): "fork_thread",
    ("POST", "/threads/{thread_id}/rewind"): "rewind_thread",
    ("POST", "/threads/{thread_id}/runs"): "start_run",
    ("GET", "/runs/{run_id}"): "get_run",
    ("POST", "/runs/{run_id}/cancel"): "cancel_run",
    ("POST", "/runs/{run_id}/replay"): "replay_run",
    ("GET", "/approvals"): "list_approvals",
    ("GET", "/approvals/{approval_id}"): "get_approval",
    ("POST", "/approvals/{approval_id}"): "decide_approval",
    ("GET", "/runs/{run_id}/events"): "stream_run_events",
    ("GET", "/threads/{thread_id}/events"): "stream_thread_events",
    ("GET", "/channels"): "list_channels",
    ("POST", "/channels/{name}/messages"): "post_channel_message",
    ("GET", "/channels/{name}/messages"): "list_channel_messages",
    ("POST", "/dm/{agent_id}"): "send_direct_message",
    ("GET", "/channels/{name}/events"): "stream_channel_events",
    ("POST", "/attachments"): "upload_attachment",
    ("GET", "/attachments/{sha256}"): "get_attachment",
    ("GET", "/costs"): "get_costs",
    ("GET", "/schedules"): "list_schedules",
    ("GET", "/schedules/{name}"): "get_schedule",
    ("POST", "/schedules/{name}/pause"): "pause_schedule",
    ("POST", "/schedules/{name}/resume"): "resume_schedule",
    ("POST", "/schedules/{name}/run"): "run_schedule_now",
    ("GET", "/schedules/events"): "stream_schedule_fires",
    ("GET", "/v1/models"): "list_models",
    ("POST", "/v1/chat/completions"): "create_chat_completion",
}
STREAMS = {
    "stream_run_events",
    "stream_thread_events",
    "stream_channel_events",
    "stream_schedule_fires",
}
FILES = {
    "get_attachment": ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"]
}


def test_every_route_declares_its_body_and_a_stable_operation_id(tmp_path: Path) -> None:
    """Ids are set by hand (FastAPI's own would change with a function's name), unique, and
    pinned here; every success answers a named schema with properties, or an event stream."""
    from agentrunner.interfaces.server import (
        approval_routes,
        attachment_routes,
        create_app,
        fork_routes,
        openai_compat,
        routes,
        schedule_routes,
    )

    app = create_app(tmp_path, token="t")
    every_route = [
        *app.routes,
        *routes.router.routes,
        *approval_routes.router.routes,
        *attachment_routes.router.routes,
        *fork_routes.router.routes,
        *openai_compat.router.routes,
        *schedule_routes.router.routes,
    ]
    declared = {
        (method, route.path): route.operation_id
        for route in every_route
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods
    }
    assert declared == OPERATIONS
    spec = app.openapi()
    documented = {
        (method.upper(), path): operation["operationId"]
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
    }
    assert documented == OPERATIONS  # no route of another router left out of the test
    schemas = spec["components"]["schemas"]
    for (method, path), operation_id in OPERATIONS.items():
        operation = spec["paths"][path][method.lower()]
        assert operation["operationId"] == operation_id
        [(status, success)] = [(s, r) for s, r in operation["responses"].items() if s < "300"]
        content = success["content"]
        if operation_id in STREAMS:
            assert list(content) == ["text/event-stream"] and status == "200", operation_id
            continue
        if operation_id in FILES:  # a file's bytes, as the type it is
            assert list(content) == FILES[operation_id] and status == "200", operation_id
            continue
        name = content["application/json"]["schema"]["$ref"].removeprefix("#/components/schemas/")
        assert schemas[name]["properties"] and schemas[name]["required"], operation_id
    chat = spec["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert set(chat) == {"application/json", "text/event-stream"}  # stream: true


def _wait(url: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (run := httpx2.get(f"{url}/runs/{run_id}", headers=AUTH).json())["status"] in (
        "created",
        "running",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return dict(run)


def _json(value: Any) -> str:
    """``value`` as the routes wrote it before they had response models: a ``dict[str, Any]``
    through pydantic's JSON writer (which spells 2.4e-05 as 0.000024)."""
    return TypeAdapter(dict[str, Any]).dump_json(value).decode()


def test_bodies_are_the_library_s_own_dicts_byte_for_byte(
    agent: Agent, server: Any, mock: MockProvider, project: Path
) -> None:
    """The response models describe the JSON; they change nothing in it — not a key's
    presence (an assistant message's optional keys), not its order (a run's usage as the
    database keeps it), not a number's form — on SQLite and PostgreSQL."""
    from agentrunner.runtime.compose import open_workspace
    from agentrunner.store.records import thread_message_dict

    agent("helper", "name: helper\ncapabilities: [notes]\nreports_to: boss")
    agent("boss", "name: boss\ndescription: leads\nfallback: [mock:gpt-4o]")
    with (project / "agentrunner.toml").open("a") as config:
        config.write('\n[channels.general]\nmembers = ["helper", "you"]\n')
    srv = server()
    mock.queue(
        Reply(tool_calls=[("note_create", {"title": "é", "body": "y"})], thinking="hmm"),
        Reply(text="Done ✓"),
        Reply.malformed_tool_call("note_create"),
        Reply(text="Fixed"),
        Reply(fault=Fault.http(401)),
        Reply(text="Hello all"),
    )
    runs = []
    open_thread(srv.url, "helper", "t-1")
    for message in ("hi", "again", "once more"):
        queued = httpx2.post(
            f"{srv.url}/threads/t-1/runs",
            headers=AUTH,
            json={"agent_id": "helper", "message": message},
        )
        runs.append(_wait(srv.url, queued.json()["run_id"]))
    assert [run["status"] for run in runs] == ["completed", "completed", "failed"]
    posted = httpx2.post(f"{srv.url}/channels/general/messages", headers=AUTH, json={"text": "Hi"})
    _wait(srv.url, posted.json()["run_ids"][0])

    async def library() -> dict[str, Any]:
        ws = await open_workspace(project)
        try:
            store = ws.runner.store
            channel = await ws.channels.channel("general")
            page = await store.messages.page("t-1")
            day = time.strftime("%Y-%m-%d", time.gmtime())
            helper_threads = await store.threads.list(agent_id="helper")
            return {
                "/agents": {"data": [a.summary() for a in ws.runner.agents]},
                "/agents/boss": ws.runner.agents.get("boss").summary(),
                "/threads?agent_id=helper": {
                    "data": [t.to_dict() for t in helper_threads],
                    "next_cursor": None,
                },
                "/threads/t-1/messages": {
                    "data": [thread_message_dict(*entry) for entry in page],
                    "next_cursor": None,
                },
                **{
                    f"/runs/{run['id']}": (await store.runs.get(run["id"])).to_dict()  # type: ignore[union-attr]
                    for run in runs
                },
                "/channels": {"data": await store.channels.all()},
                "/costs?days=1": {
                    "since": day,
                    "data": [
                        # the priced_* sums price the cache for `cost`: not in the schema
                        {
                            **{k: v for k, v in row.items() if not k.startswith("priced_")},
                            "cost_usd": row["cost_micros"] / 1e6,
                        }
                        for row in await store.costs.summary(since=day)
                    ],
                },
                "/channels/general/messages": {
                    "data": [
                        {
                            "id": m.id,
                            "sender": m.sender,
                            "sender_kind": m.sender_kind,
                            "content": m.content,
                            "thread": m.thread_root_id,
                            "depth": m.depth,
                            "created_at": m.created_at,
                        }
                        for m in await store.channels.after(channel.id, "", 100)
                    ],
                    "next_cursor": None,
                },
            }
        finally:
            await ws.close()

    expected = asyncio.run(library())
    messages = expected["/threads/t-1/messages"]["data"]
    assert any("raw_arguments" in c for m in messages for c in m.get("tool_calls", ()))
    assert any("thinking" in m for m in messages) and any(m["role"] == "tool" for m in messages)
    assert any("tool_calls" not in m for m in messages if m["role"] == "assistant")
    assert expected[f"/runs/{runs[2]['id']}"]["error"]["code"] == "provider_auth"
    assert expected[f"/runs/{runs[0]['id']}"]["cost_usd"] < 1e-4  # a number JSON may spell two ways
    for path, body in expected.items():
        assert httpx2.get(f"{srv.url}{path}", headers=AUTH).text == _json(body), path
