"""``python -m agentrunner.testing``: the mock provider as a server of its own (bench/, a
person trying the runtime offline)."""

from __future__ import annotations

from agentrunner.testing.mock_provider import MockProvider
from agentrunner.testing.prompt_cache import PromptCacheModel


def main() -> None:
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(
        description="Run the mock provider: OpenAI (Chat Completions, Responses) and Anthropic."
    )
    parser.add_argument("--port", type=int, default=8999)
    parser.add_argument(
        "--count-input-tokens",
        action="store_true",
        help="Bill each request's real size (about a token per 4 bytes), as a provider does.",
    )
    parser.add_argument(
        "--prompt-cache",
        action="store_true",
        help="Bill as each provider's prompt cache would (cached tokens read and written).",
    )
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=0.0,
        help="Wait this long before each answer, as a model thinks (bench/scaleout.py).",
    )
    args = parser.parse_args()
    mock = MockProvider(
        count_input_tokens=args.count_input_tokens,
        prompt_cache=PromptCacheModel() if args.prompt_cache else None,
    )
    mock.record = False
    mock.delay_s = args.delay_ms / 1000
    uvicorn.run(
        mock,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


main()
