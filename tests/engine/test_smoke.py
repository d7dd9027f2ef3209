from __future__ import annotations

import pytest

from agentrunner.engine import run_turn
from agentrunner.testing import MockProvider, MockProviderServer, Reply
from tests.engine.helpers import Recorder, registry, turn


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("model", ["mockai:gpt-mock", "mockant:claude-mock"])
async def test_tool_turn(
    mock_server: MockProviderServer, mock: MockProvider, stream: bool, model: str
) -> None:
    mock.queue(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="It is sunny in Paris.")
    )
    reg = registry(mock_server)
    rec = Recorder()
    t = turn(reg, model, stream=stream, emit=rec)
    result = await run_turn(t)
    await reg.aclose()
    assert result.text == "It is sunny in Paris."
    assert result.stop_reason == "end_turn"
    print(rec.kinds())
    assert rec.kinds()[-1] == "agent.message"
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "assistant"]
