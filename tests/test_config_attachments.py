"""``[attachments]`` in agentrunner.toml: the limits every way in checks files by, read into
``Config.attachments``; a wrong value is an error naming its key, at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.config import load_config
from agentrunner.core.attachments import AttachmentLimits
from agentrunner.errors import AgentRunnerError, ErrorCode


def load(tmp_path: Path, text: str) -> AttachmentLimits:
    (tmp_path / "agentrunner.toml").write_text(text)
    return load_config(tmp_path, env={}).attachments


def test_the_defaults_sit_inside_what_the_providers_take(tmp_path: Path) -> None:
    limits = load(tmp_path, '[defaults]\nmodel = "test"\n')
    assert limits == AttachmentLimits()
    assert (limits.max_image_bytes, limits.max_pdf_bytes, limits.max_message_bytes) == (
        3_750_000,
        20_000_000,
        24_000_000,
    )
    assert (limits.max_pdf_pages, limits.max_files, limits.max_image_edge) == (100, 20, 8000)
    # base64 grows bytes by 4/3: Anthropic's 5 MB an image and 32 MB a request
    assert limits.max_image_bytes * 4 / 3 <= 5_000_000
    assert limits.max_message_bytes * 4 / 3 <= 32_000_000


def test_each_key_sets_its_limit(tmp_path: Path) -> None:
    first = load(
        tmp_path,
        "[attachments]\nmax_image_mb = 1.5\nmax_pdf_mb = 8\nmax_pdf_pages = 30\n"
        "max_message_mb = 10\nmax_files = 4\nmax_image_edge = 2000\n",
    )
    assert first == AttachmentLimits(1_500_000, 8_000_000, 30, 10_000_000, 4, 2000)
    second = load(tmp_path, "[attachments]\nmax_image_mb = 20\nmax_files = 50\n")
    assert second == AttachmentLimits(max_image_bytes=20_000_000, max_files=50)
    assert second != first


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("max_image_mb = -1", "max_image_mb", "must be a positive number of megabytes, got -1"),
        ("max_image_mb = 0", "max_image_mb", "must be a positive number of megabytes, got 0"),
        ('max_pdf_mb = "20"', "max_pdf_mb", "must be a positive number of megabytes, got '20'"),
        ("max_message_mb = true", "max_message_mb", "must be a positive number of megabytes"),
        ("max_image_mb = 1e-9", "max_image_mb", "is less than a byte"),
        ("max_pdf_pages = 0", "max_pdf_pages", "must be at least 1, got 0"),
        ("max_files = -3", "max_files", "must be a whole number, got -3"),
        ("max_files = 2.5", "max_files", "must be a whole number, got 2.5"),
        ('max_image_edge = "8000"', "max_image_edge", "must be a whole number, got '8000'"),
        ("max_image_bytes = 100", "max_image_bytes", "unknown key 'attachments.max_image_bytes'"),
        ("max_imge_mb = 3", "max_imge_mb", "(did you mean 'attachments.max_image_mb'?)"),
    ],
)
def test_a_wrong_value_names_its_key_at_its_line(
    tmp_path: Path, text: str, key: str, fragment: str
) -> None:
    with pytest.raises(AgentRunnerError) as info:
        load(tmp_path, f'[defaults]\nmodel = "test"\n\n[attachments]\n# limits\n{text}\n')
    error = info.value
    assert error.code is ErrorCode.INVALID_SPECIFICATION
    assert fragment in error.message, error.message
    assert f"attachments.{key}" in error.message
    assert error.details["config_key"] == ("attachments", key)
    assert error.line == 6
    assert error.hint


def test_a_misspelt_section_is_caught(tmp_path: Path) -> None:
    with pytest.raises(AgentRunnerError, match=r"did you mean '\[attachments\]'"):
        load(tmp_path, "[attachment]\nmax_files = 3\n")
