"""Images and PDFs over real HTTP against the mock provider, on each wire: the mock receives the
parts each wire builds and accepts them (its echo says what it saw), a tool's image reaches the
model, the mock refuses (400, in the API's own error shape and words) what each API refuses —
driven through the real client, whose error is classified — and a file bills by its pixels or
pages, never by its base64.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentrunner.engine import run_turn, tool
from agentrunner.engine.failures import FailureKind, ProviderError
from agentrunner.engine.fold import ResponseFold
from agentrunner.engine.http_client import HttpModelClient, Wire
from agentrunner.engine.messages import (
    PDF_TYPE,
    AssistantMessage,
    Attachment,
    ModelRequest,
    ToolCall,
    ToolResult,
    UserMessage,
)
from agentrunner.engine.wire_anthropic import AnthropicWire
from agentrunner.engine.wire_openai import TOOL_FILES, OpenAIWire
from agentrunner.engine.wire_responses import ResponsesWire
from agentrunner.errors import ErrorCode
from agentrunner.testing import MockProvider, MockProviderServer, PromptCacheModel, Reply
from agentrunner.testing.mock_attachments import PDF_PAGE_TOKENS, image_tokens
from tests.engine.attachment_files import (
    FIRST,
    PDF_1,
    PDF_2,
    PNG,
    SECOND,
    attached,
    b64,
    noise,
    picture,
)
from tests.engine.helpers import Recorder, registry, turn

MODELS = {
    "chat": "mockai:gpt-mock",
    "responses": "mockresp:gpt-5-mock",
    "anthropic": "mockant:claude-mock",
}
WIRES: dict[str, Callable[[], Wire]] = {
    "chat": lambda: OpenAIWire("mockai"),
    "responses": lambda: ResponsesWire("mockresp"),
    "anthropic": lambda: AnthropicWire("mockant"),
}


def conversation(body: dict[str, Any]) -> list[Any]:
    return body.get("messages") or body["input"]


# -- accepted --------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("wire", MODELS)
async def test_each_wire_sends_an_image_and_a_pdf_the_mock_accepts(
    mock_server: MockProviderServer, mock: MockProvider, wire: str, stream: bool
) -> None:
    reg = registry(mock_server)
    bodies = []
    for files in (FIRST, SECOND):
        t = turn(reg, MODELS[wire], tools=(), stream=stream)
        t.messages[0] = UserMessage("Describe both.", attachments=files)
        result = await run_turn(t)
        assert result.text == "Echo: Describe both. [saw 1 image, 1 pdf]"
        sent = mock.requests[-1].body
        built = WIRES[wire]().build(ModelRequest("m", t.system, [t.messages[0]]))
        assert conversation(sent)[-1] == conversation(built)[-1]  # as the wire built it
        bodies.append(sent)
    await reg.aclose()
    assert conversation(bodies[0]) != conversation(bodies[1])


@pytest.mark.parametrize("wire", MODELS)
async def test_a_text_only_request_is_echoed_as_before(
    mock_server: MockProviderServer, mock: MockProvider, wire: str
) -> None:
    reg = registry(mock_server)
    result = await run_turn(turn(reg, MODELS[wire], message="Just text.", tools=()))
    await reg.aclose()
    assert result.text == "Echo: Just text."


@tool
def screenshot() -> Attachment:
    """Take a screenshot."""
    return FIRST[0]


@tool
def report(pages: int) -> list[str | Attachment]:
    """Fetch the report."""
    return ["The report:", FIRST[1] if pages == 1 else attached(PDF_2, "application/pdf")]


@pytest.mark.parametrize("wire", MODELS)
async def test_a_tools_image_reaches_the_model_on_each_wire(
    mock_server: MockProviderServer, mock: MockProvider, wire: str
) -> None:
    """The mock's simple agent calls the tool, then sees its image: in the tool's result on
    the Responses API and Anthropic, in a user message after the tool's on Chat Completions."""
    reg = registry(mock_server)
    rec = Recorder()
    t = turn(reg, MODELS[wire], message="Look at the screen.", tools=[screenshot], emit=rec)
    result = await run_turn(t)
    await reg.aclose()
    assert result.text.endswith(" [saw 1 image]")
    assert t.messages[2] == ToolResult(
        t.messages[2].call_id, "screenshot", "", attachments=FIRST[:1]
    )
    [event] = rec.of("agent.tool_result")
    assert event["attachments"] == [FIRST[0].to_dict()]
    assert b64(PNG) not in json.dumps(rec.events)  # events name files, never carry them
    sent = conversation(mock.requests[-1].body)
    png = f"data:image/png;base64,{b64(PNG)}"
    if wire == "chat":
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
        assert sent[3]["content"].endswith("(attached below)")
        assert sent[4]["content"][0]["text"] == TOOL_FILES
        assert sent[4]["content"][1]["image_url"]["url"] == png
    elif wire == "responses":
        assert sent[-1]["output"] == [{"type": "input_image", "image_url": png, "detail": "auto"}]
    else:
        [result_block] = sent[-1]["content"]
        assert result_block["content"][0]["source"]["data"] == b64(PNG)


@pytest.mark.parametrize("wire", MODELS)
async def test_a_tools_text_and_pdf_reach_the_model_and_differ_by_file(
    mock_server: MockProviderServer, mock: MockProvider, wire: str
) -> None:
    reg = registry(mock_server)
    sent = []
    for pages in (1, 2):
        mock.queue(Reply(tool_calls=[("report", {"pages": pages})]))
        t = turn(reg, MODELS[wire], message="Read it.", tools=[report])
        result = await run_turn(t)
        assert result.text.endswith(" [saw 1 pdf]")
        assert t.messages[2].content == "The report:"
        sent.append(json.dumps(conversation(mock.requests[-1].body)))
    await reg.aclose()
    assert b64(PDF_1) in sent[0] and b64(PDF_2) in sent[1]
    assert b64(PDF_2) not in sent[0]


async def test_anthropic_breakpoints_on_files_are_accepted(
    mock_server: MockProviderServer, mock: MockProvider
) -> None:
    """A conversation whose turns end with files, with tools and a system prompt: four
    breakpoints, the last on a document, none inside a tool result, which the mock (refusing
    five) takes."""
    image, document = FIRST
    mock.queue(Reply(text="Seen both."))
    reg = registry(mock_server)
    t = turn(reg, MODELS["anthropic"], tools=[screenshot])
    t.messages[:] = [
        UserMessage("", attachments=(image,)),
        AssistantMessage(tool_calls=[ToolCall("toolu_1", "screenshot", {})]),
        ToolResult("toolu_1", "screenshot", "", attachments=(image, document)),
        AssistantMessage("Seen."),
        UserMessage("", attachments=(document,)),
    ]
    result = await run_turn(t)
    await reg.aclose()
    assert result.text == "Seen both."
    body = mock.requests[0].body
    assert json.dumps(body).count("cache_control") == 4
    assert "cache_control" in body["messages"][-1]["content"][-1]
    assert body["messages"][-1]["content"][-1]["type"] == "document"


# -- refused ---------------------------------------------------------------------------------


@dataclass
class Tampered:
    """A wire that builds as its own does, then changes the body as a wrong wire would."""

    wire: Wire
    change: Callable[[dict[str, Any]], None]

    @property
    def provider(self) -> str:
        return self.wire.provider

    def path(self, request: ModelRequest) -> str:
        return self.wire.path(request)

    def build(self, request: ModelRequest) -> dict[str, Any]:
        body = self.wire.build(request)
        self.change(body)
        return body

    def dropped_settings(self, request: ModelRequest) -> list[tuple[str, str]]:
        return []

    def fold_body(self, body: Any, fold: ResponseFold) -> None:
        self.wire.fold_body(body, fold)

    def fold_event(self, event: str | None, data: str, fold: ResponseFold) -> None:
        self.wire.fold_event(event, data, fold)


def files_request() -> ModelRequest:
    return ModelRequest("m", "", [UserMessage("Describe both.", attachments=FIRST)], stream=False)


def tool_request() -> ModelRequest:
    return ModelRequest(
        "m",
        "",
        [
            UserMessage("Look."),
            AssistantMessage(tool_calls=[ToolCall("call_1", "screenshot", {})]),
            ToolResult("call_1", "screenshot", "Here.", attachments=FIRST[:1]),
        ],
        stream=False,
    )


def into_tool_message(body: dict[str, Any]) -> None:
    """The image in the tool message rather than in the user message after it."""
    tool, files = body["messages"][-2], body["messages"].pop()
    tool["content"] = [{"type": "text", "text": tool["content"]}, files["content"][1]]


def into_assistant_message(body: dict[str, Any]) -> None:
    assistant = body["messages"][1]
    image = body["messages"][-1]["content"][1]
    assistant["content"] = [{"type": "text", "text": "Taking one."}, image]


def set_at(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        if value is DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


DELETE = object()
BMP = picture(2, 2, "BMP")
CHAT_PART = ("messages", 0, "content")
RESP_PART = ("input", 0, "content")
ANT_BLOCK = ("messages", 0, "content")
REFUSED = [
    (
        "chat: an image in a tool message",
        "chat",
        tool_request,
        into_tool_message,
        "Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', but "
        "this message with role 'tool' contains an image URL.",
    ),
    (
        "chat: an image in an assistant message",
        "chat",
        tool_request,
        into_assistant_message,
        "but this message with role 'assistant' contains an image URL.",
    ),
    (
        "chat: a file part that is not a PDF",
        "chat",
        files_request,
        set_at((*CHAT_PART, 2, "file", "file_data"), f"data:image/png;base64,{b64(PNG)}"),
        "Invalid file data: 'messages[0].content[2].file.file_data'. Expected a base64-encoded "
        "data URL with an application/pdf MIME type",
    ),
    (
        "chat: an image neither PNG, JPEG, GIF nor WebP",
        "chat",
        files_request,
        set_at((*CHAT_PART, 1, "image_url", "url"), f"data:image/bmp;base64,{b64(BMP)}"),
        "Please make sure your image has of one the following formats: "
        "['png', 'jpeg', 'gif', 'webp'].",
    ),
    (
        "chat: invalid base64",
        "chat",
        files_request,
        set_at((*CHAT_PART, 1, "image_url", "url"), "data:image/png;base64,not*base64"),
        "but got an invalid base64-encoded value.",
    ),
    (
        "chat: an image that does not decode",
        "chat",
        files_request,
        set_at((*CHAT_PART, 1, "image_url", "url"), f"data:image/png;base64,{b64(b'plain')}"),
        "Please make sure your image is valid.",
    ),
    (
        "responses: input_image without detail",
        "responses",
        files_request,
        set_at((*RESP_PART, 1, "detail"), DELETE),
        "Missing required parameter: 'input[0].content[1].detail'.",
    ),
    (
        "responses: input_image whose image_url is an object",
        "responses",
        files_request,
        set_at((*RESP_PART, 1, "image_url"), {"url": f"data:image/png;base64,{b64(PNG)}"}),
        "Invalid type for 'input[0].content[1].image_url': expected a string, but got an "
        "object instead.",
    ),
    (
        "responses: an image data URL that is not base64",
        "responses",
        files_request,
        set_at((*RESP_PART, 1, "image_url"), "data:image/png,rawbytes"),
        "Invalid 'input[0].content[1].image_url'. Expected a base64-encoded data URL",
    ),
    (
        "responses: input_file of bad base64",
        "responses",
        files_request,
        set_at((*RESP_PART, 2, "file_data"), "data:application/pdf;base64,%%%"),
        "Invalid file data: 'input[0].content[2].file_data'.",
    ),
    (
        "anthropic: an image media_type outside the four",
        "anthropic",
        files_request,
        set_at((*ANT_BLOCK, 0, "source", "media_type"), "image/bmp"),
        "messages.0.content.0.image.source.base64.media_type: Input should be 'image/png', "
        "'image/jpeg', 'image/gif' or 'image/webp'",
    ),
    (
        "anthropic: a data: prefix in source.data",
        "anthropic",
        files_request,
        set_at((*ANT_BLOCK, 0, "source", "data"), f"data:image/png;base64,{b64(PNG)}"),
        "messages.0.content.0.image.source.base64: invalid base64 data",
    ),
    (
        "anthropic: an image that is not what its media_type says",
        "anthropic",
        files_request,
        set_at((*ANT_BLOCK, 0, "source", "media_type"), "image/jpeg"),
        "Image does not match the provided media type image/jpeg",
    ),
    (
        "anthropic: a document that is not a PDF",
        "anthropic",
        files_request,
        set_at((*ANT_BLOCK, 1, "source", "media_type"), "text/plain"),
        "messages.0.content.1.document.source.base64.media_type: Input should be 'application/pdf'",
    ),
    (
        "anthropic: bad base64",
        "anthropic",
        files_request,
        set_at((*ANT_BLOCK, 1, "source", "data"), "!!!"),
        "messages.0.content.1.document.source.base64: invalid base64 data",
    ),
    (
        "anthropic: an empty tool_result content list",
        "anthropic",
        tool_request,
        set_at(("messages", 2, "content", 0, "content"), []),
        "messages.2.content.0.tool_result.content: List should have at least 1 item",
    ),
]


def client(server: MockProviderServer, wire: Wire) -> HttpModelClient:
    base = server.anthropic_url if isinstance(wire, AnthropicWire) else server.openai_url
    return HttpModelClient(wire, base_url=base, headers={"authorization": "Bearer sk-mock"})


@pytest.mark.parametrize(
    ("wire", "make"), [(w, m) for w in WIRES for m in (files_request, tool_request)]
)
async def test_the_untampered_requests_are_accepted(
    mock_server: MockProviderServer,
    mock: MockProvider,
    wire: str,
    make: Callable[[], ModelRequest],
) -> None:
    """What the refusals below start from: each wire's own body, which the mock takes."""
    http = client(mock_server, WIRES[wire]())
    try:
        response = await http.request(make(), None)
    finally:
        await http.aclose()
    assert response.message.text.startswith("Echo: ")


@pytest.mark.parametrize(
    ("wire", "make", "change", "says"), [case[1:] for case in REFUSED], ids=[c[0] for c in REFUSED]
)
async def test_the_mock_refuses_what_each_api_refuses(
    mock_server: MockProviderServer,
    mock: MockProvider,
    wire: str,
    make: Callable[[], ModelRequest],
    change: Callable[[dict[str, Any]], None],
    says: str,
) -> None:
    http = client(mock_server, Tampered(WIRES[wire](), change))
    try:
        with pytest.raises(ProviderError) as caught:
            await http.request(make(), None)
    finally:
        await http.aclose()
    error = caught.value
    assert (error.status, error.kind, error.code) == (
        400,
        FailureKind.BAD_REQUEST,
        ErrorCode.VALIDATION,
    )
    assert not error.failover  # another model would be sent the same request
    assert says in error.message
    assert "invalid_request_error" in error.message  # the API's error type, as it sends it


# -- billed ----------------------------------------------------------------------------------


async def billed(server: MockProviderServer, wire: str, message: UserMessage) -> int:
    http = client(server, WIRES[wire]())
    try:
        response = await http.request(ModelRequest("m", "", [message], stream=False), None)
    finally:
        await http.aclose()
    return response.usage.input_tokens


@pytest.mark.parametrize("wire", MODELS)
async def test_a_file_bills_by_its_pixels_or_pages_not_its_base64(
    mock_server: MockProviderServer, mock: MockProvider, wire: str
) -> None:
    mock.count_input_tokens = True
    openai = wire != "anthropic"

    async def with_file(data: bytes, media_type: str = "image/png") -> int:
        message = UserMessage("Describe.", attachments=(attached(data, media_type),))
        return await billed(mock_server, wire, message)

    # ~260 KB of base64 (~65,000 tokens as text) bills as the 256x256 picture it is.
    large = await with_file(noise(256)) - await billed(mock_server, wire, UserMessage("Describe."))
    assert (
        image_tokens(256, 256, openai=openai) <= large <= image_tokens(256, 256, openai=openai) + 40
    )
    # Pictures differ by what the rule says of their sizes (the same JSON around them).
    small = await with_file(picture(100, 100))
    wide = await with_file(picture(2000, 1000))
    rule = image_tokens(2000, 1000, openai=openai) - image_tokens(100, 100, openai=openai)
    assert abs(wide - small - rule) <= 1
    assert rule > 500
    # A PDF by its pages.
    one, two = await with_file(PDF_1, PDF_TYPE), await with_file(PDF_2, PDF_TYPE)
    assert abs(two - one - PDF_PAGE_TOKENS) <= 1


def test_the_image_rules_are_the_providers_published_ones() -> None:
    # OpenAI's worked examples: 1024×1024 high → 765; 2048×4096 → 1105; low → 85.
    assert image_tokens(1024, 1024, openai=True) == 765
    assert image_tokens(2048, 4096, openai=True) == 1105
    assert image_tokens(4096, 4096, openai=True, detail="low") == 85
    # Anthropic: pixels / 750, at most ~1,600 after its downscaling.
    assert image_tokens(1000, 1000, openai=False) == 1334
    assert 1500 < image_tokens(8000, 8000, openai=False) <= 1600


def test_the_prompt_cache_model_bills_a_file_by_its_pixels_too() -> None:
    big = attached(noise(256), "image/png")
    body = AnthropicWire("a").build(
        ModelRequest("m", "", [UserMessage("Describe.", attachments=(big,))], stream=False)
    )
    bill = PromptCacheModel().bill("anthropic", body)
    assert bill.tokens < 200  # 88 for the picture, the rest its text and JSON
