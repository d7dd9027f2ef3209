"""What an attachment costs a model (engine.attachment_tokens): the providers' own worked
examples, each model family's rule, PDFs by pages, and that a larger copy of a picture never
costs fewer tokens than a smaller one."""

from __future__ import annotations

from fractions import Fraction

import pytest

from agentrunner.engine.attachment_tokens import (
    PatchRule,
    PixelRule,
    TileRule,
    attachment_tokens,
    token_rule,
)
from agentrunner.engine.messages import Attachment


def picture(width: int, height: int, detail: str = "auto") -> Attachment:
    return Attachment("0" * 64, "image/png", 1000, "p.png", width, height, None, detail)


def document(pages: int | None) -> Attachment:
    return Attachment("1" * 64, "application/pdf", 1000, "d.pdf", None, None, pages)


# -- the providers' worked examples -------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        (1024, 1024, "high", 765),  # 768 x 768: 4 tiles
        (2048, 4096, "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
        (2048, 4096, "low", 85),
        (4000, 3000, "low", 85),
        (1024, 1024, "auto", 765),  # auto counted as high, the dearer
        (512, 512, "high", 255),  # one tile: never scaled up
        (100, 30, "high", 255),
    ],
)
def test_openais_tile_rule(width: int, height: int, detail: str, tokens: int) -> None:
    for model in ("gpt-4o", "gpt-4.1", "o3", "gpt-4o-2024-11-20"):
        assert attachment_tokens(picture(width, height, detail), "openai", model) == tokens


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (1092, 1092, 1590),  # the largest square Anthropic sends unresized
        (200, 200, 54),
        (1000, 1000, 1334),
        (784, 1568, 1640),  # the largest 1:2 it sends unresized
        (3136, 1568, 1640),  # scaled to 1568 x 784
        (4000, 4000, 1640),  # scaled to fit the pixel limit
    ],
)
def test_anthropics_pixel_rule(width: int, height: int, tokens: int) -> None:
    for model in ("claude-sonnet-4-5", "claude-haiku-4-5-20251001"):
        assert attachment_tokens(picture(width, height), "anthropic", model) == tokens
    assert attachment_tokens(picture(width, height, "low"), "anthropic", "claude-3-5") == tokens


def test_openais_patch_rule() -> None:
    # 1024 x 1024 is 32 x 32 = 1024 patches; gpt-4.1-mini's multiplier 1.62, nano's 2.46
    assert attachment_tokens(picture(1024, 1024), "openai", "gpt-4.1-mini") == 1659
    assert attachment_tokens(picture(1024, 1024), "openai", "gpt-4.1-nano-2025-04-14") == 2520
    assert attachment_tokens(picture(1024, 1024), "openai-responses", "o4-mini") == 1762
    assert attachment_tokens(picture(1024, 1024), "openai", "gpt-5-mini") == 1659
    assert attachment_tokens(picture(1024, 1024), "openai", "gpt-5-nano") == 2520
    # over the 1536-patch cap the cap is counted (OpenAI's resize comes to 1452 for this one)
    assert attachment_tokens(picture(1800, 2400), "openai", "gpt-4.1-mini") == 2489
    # detail changes nothing for these models; a partial patch is a whole one
    assert attachment_tokens(picture(33, 33, "low"), "openai", "gpt-4.1-mini") == 7  # 4 x 1.62


def test_gpt_4o_mini_has_its_own_tile_numbers() -> None:
    assert (
        attachment_tokens(picture(1024, 1024, "high"), "openai", "gpt-4o-mini") == 2833 + 4 * 5667
    )
    assert attachment_tokens(picture(1024, 1024, "low"), "openai", "gpt-4o-mini") == 2833


# -- which rule ---------------------------------------------------------------------------------


def test_the_rule_is_the_model_familys_then_the_provider_kinds() -> None:
    assert token_rule("openai", "gpt-4o") == TileRule(85, 170)
    assert token_rule("openai", "gpt-4o-mini-2024-07-18") == TileRule(2833, 5667)
    assert token_rule("openai", "gpt-4.1-mini") == PatchRule(Fraction("1.62"))
    assert token_rule("anthropic", "claude-sonnet-4-5") == PixelRule()
    assert token_rule("anthropic", "a-model-nobody-named") == PixelRule()
    opus = token_rule("anthropic", "claude-opus-4-7-20260416")
    assert isinstance(opus, PixelRule) and opus.long_edge == 2576
    # a router's vendor/model, and Claude behind an OpenAI-compatible server, by the model
    assert token_rule("openai", "openai/gpt-4o-mini") == TileRule(2833, 5667)
    assert token_rule("openai", "anthropic/claude-sonnet-4.5") == PixelRule()
    # unknown providers and models, and the offline test model: OpenAI's tile rule
    for kind, model in [("openai", "llama3.2"), ("test", "test"), ("openai", "GPT-4O")]:
        assert token_rule(kind, model) == TileRule(85, 170)


def test_the_same_picture_costs_differently_by_model() -> None:
    shot = picture(1920, 1080)
    costs = {
        model: attachment_tokens(shot, kind, model)
        for kind, model in [
            ("openai", "gpt-4o"),
            ("openai", "gpt-4o-mini"),
            ("openai", "gpt-4.1-mini"),
            ("anthropic", "claude-sonnet-4-5"),
        ]
    }
    assert costs == {
        "gpt-4o": 1105,  # 1365 x 768: 3 x 2 tiles
        "gpt-4o-mini": 2833 + 6 * 5667,
        "gpt-4.1-mini": 2489,  # 60 x 34 = 2040 patches, over the cap
        "claude-sonnet-4-5": 1640,  # 1568 x 882 is 1,382,976 px: scaled to 784 x 1568's
    }


# -- PDFs, and what was not read ----------------------------------------------------------------


def test_a_pdf_costs_by_its_pages() -> None:
    for pages in (1, 3, 40):
        assert attachment_tokens(document(pages), "anthropic", "claude-sonnet-4-5") == 2500 * pages
        assert attachment_tokens(document(pages), "openai", "gpt-4o") == 1500 * pages
        assert attachment_tokens(document(pages), "test", "test") == 1500 * pages
    # a page is an image at the model's own rule, and its text
    assert attachment_tokens(document(1), "openai", "gpt-4o-mini") == 2833 + 4 * 5667 + 735
    assert attachment_tokens(document(2), "openai", "gpt-4.1-mini") == 2 * (1245 + 735)


def test_what_was_not_read_costs_the_most_it_could() -> None:
    unsized = Attachment("2" * 64, "image/jpeg", 10, "x.jpg")
    assert attachment_tokens(unsized, "openai", "gpt-4o") == 85 + 8 * 170
    assert attachment_tokens(unsized, "anthropic", "claude-sonnet-4-5") == 1640
    assert attachment_tokens(unsized, "openai", "gpt-4.1-nano") == 3779  # 1536 x 2.46
    assert attachment_tokens(document(None), "openai", "gpt-4o") == 1500 * 100


# -- larger never cheaper -----------------------------------------------------------------------

MODELS = [
    ("openai", "gpt-4o"),
    ("openai", "gpt-4o-mini"),
    ("openai", "gpt-4.1-mini"),
    ("openai", "o4-mini"),
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-opus-4-7"),
    ("test", "test"),
]
SHAPES = [(1, 1), (1, 2), (2, 1), (3, 4), (16, 9), (9, 16), (1, 5), (7, 3), (21, 20)]


@pytest.mark.parametrize(("kind", "model"), MODELS)
@pytest.mark.parametrize("detail", ["auto", "low"])
def test_a_larger_copy_of_a_picture_never_costs_fewer_tokens(
    kind: str, model: str, detail: str
) -> None:
    """Over every shape, from a few pixels to 8000 a side: a copy with more pixels costs at
    least as much. (Not when only one side grows: the providers' rules scale a wide picture by
    its long side, and OpenAI's tiles by its short side; docs/attachments.md.)"""
    for w, h in SHAPES:
        last = 0
        for scale in range(1, 8000 // max(w, h) + 1, max(1, 8000 // max(w, h) // 400)):
            tokens = attachment_tokens(picture(w * scale, h * scale, detail), kind, model)
            assert tokens >= last, (w * scale, h * scale, tokens, last)
            last = tokens
        assert last >= attachment_tokens(picture(w, h, detail), kind, model)


@pytest.mark.parametrize(("kind", "model"), MODELS)
def test_no_picture_costs_more_than_the_most(kind: str, model: str) -> None:
    rule = token_rule(kind, model)
    worst = max(
        attachment_tokens(picture(w, h, "high"), kind, model)
        for w in range(1, 8001, 97)
        for h in range(1, 8001, 89)
    )
    assert worst <= rule.most()


def test_a_side_growing_alone_may_cost_fewer_as_the_providers_bill() -> None:
    """The rules as published, not smoothed: OpenAI scales the short side to 768, so 800 x 1600
    comes to 768 x 1536 (6 tiles) where 768 x 1600 stays (8); Anthropic scales by the long
    side, so a wider strip of the same height is sent smaller."""
    assert attachment_tokens(picture(768, 1600, "high"), "openai", "gpt-4o") == 1445
    assert attachment_tokens(picture(800, 1600, "high"), "openai", "gpt-4o") == 1105
    claude = ("anthropic", "claude-sonnet-4-5")
    assert attachment_tokens(picture(1568, 700), *claude) == 1464
    assert attachment_tokens(picture(3136, 700), *claude) == 732
