"""The blocking-call detector of tests/conftest.py is on for every test; its exemptions name
calls it knows, each with a reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from blockbuster import BlockBuster, BlockingError

from agentrunner.config import load_config
from tests.conftest import MAY_BLOCK, _names


async def test_agentrunner_reading_a_file_on_the_loop_fails_the_test(project_dir: Path) -> None:
    with pytest.raises(BlockingError):
        load_config(project_dir)
    config = await asyncio.to_thread(load_config, project_dir)  # the same, off the loop
    assert config.root == project_dir


def test_off_any_loop_nothing_is_refused(project_dir: Path) -> None:
    assert load_config(project_dir).root == project_dir


def test_each_exemption_names_calls_the_detector_knows_and_says_why(
    blockbuster: BlockBuster,
) -> None:
    for exemption in MAY_BLOCK:
        assert exemption.where and len(exemption.why) > 40, exemption
        for call in exemption.calls:
            assert any(_names(call, name) for name in blockbuster.functions), call
