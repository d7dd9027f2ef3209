"""The mock provider's ``POST /embeddings`` (OpenAI's): a hashed bag-of-words vector per input
(``engine.embeddings.hashed_embedding``, what the ``test`` model embeds with too), billed a
token per 4 bytes as the mock bills prompts."""

from __future__ import annotations

from typing import Any

from agentrunner.engine.embeddings import hashed_embedding

__all__ = ["embeddings_answer"]


def embeddings_answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The status and JSON body the mock answers an embeddings request with."""
    model = str(body.get("model", ""))
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        problem = "input must be a string or a non-empty list of strings"
        error = {"type": "invalid_request_error", "message": problem, "param": "input"}
        return 400, {"error": error}
    rows = [
        {"object": "embedding", "index": i, "embedding": hashed_embedding(text)}
        for i, text in enumerate(texts)
    ]
    tokens = sum(len(text.encode()) // 4 + 1 for text in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return 200, {"object": "list", "data": rows, "model": model, "usage": usage}
