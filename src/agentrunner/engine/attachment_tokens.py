"""What an attachment costs a model in input tokens, by its provider's published rule, from what
the edge read of it (an image's width and height, a PDF's pages): nothing is decoded here.
Budgets hold it before a request and the token-bounded history counts it
(docs/attachments.md, "What an attachment costs").

Each model family's rule is a row of ``_FAMILIES`` (the longest prefix of the model's name
wins; an OpenAI-compatible server's or a router's ``vendor/model`` is matched on its last
part); a model no row names gets its provider kind's rule: Anthropic's for ``anthropic``,
OpenAI's tile rule for every other kind (OpenAI, the servers that speak its API, ``test``).

- ``TileRule``, OpenAI's tiles (GPT-4o, GPT-4.1, o1/o3 and, by default, every other model):
  ``low`` detail costs the base; else the image is fitted in 2048 x 2048, scaled so its short
  side is at most 768, and costs the base plus a tile's tokens for each 512 px square it
  covers. ``auto`` is counted as ``high``, the dearer of what OpenAI may choose.
- ``PatchRule``, OpenAI's patches (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): one token per
  32 px square, at most ``cap``, times the model's multiplier; ``detail`` changes nothing.
  OpenAI's guide scales an image over the cap until it fits, which comes to a few per cent
  under the cap (1800 x 2400: 1,452); the cap itself is counted, as billing has been seen to.
- ``PixelRule``, Anthropic's: width x height / 750, the image first scaled (as Anthropic does)
  to at most ``long_edge`` px on its long side and ``max_pixels`` in all.

A PDF's page is an estimate that errs high, since no provider publishes a rule: Anthropic
sends each page as an image and its text (about 2,100 to 2,500 tokens a page, measured), so
2,500; OpenAI likewise, so a page image at the model's own rule (a letter page, 768 x 994 px,
at high detail) and 735 tokens of text (about 2,900 characters): 1,500 on a tile-rule model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from agentrunner.engine.messages import Attachment

__all__ = ["PatchRule", "PixelRule", "TileRule", "TokenRule", "attachment_tokens", "token_rule"]

_PAGE_PX: Final = (768, 994)  # a US-letter page with its short side at 768 px
_PAGE_TEXT_TOKENS: Final = 735
# A PDF whose pages were not read (none the edge let through): as many as a PDF may have.
_UNKNOWN_PAGES: Final = 100


@dataclass(frozen=True, slots=True)
class TileRule:
    """OpenAI's tile rule: ``base`` tokens, plus ``tile`` for each 512 px square."""

    base: int = 85
    tile: int = 170

    def image(self, width: int, height: int, detail: str) -> int:
        if detail == "low":
            return self.base
        w, h = Fraction(width), Fraction(height)
        fit = min(Fraction(1), Fraction(2048) / max(w, h))  # into 2048 x 2048
        w, h = w * fit, h * fit
        short = min(Fraction(1), Fraction(768) / min(w, h))  # short side at most 768
        w, h = w * short, h * short
        return self.base + self.tile * math.ceil(w / 512) * math.ceil(h / 512)

    def most(self) -> int:
        return self.image(768, 2048, "high")  # the most tiles any image comes to: 2 x 4

    def page(self) -> int:
        return self.image(*_PAGE_PX, "high") + _PAGE_TEXT_TOKENS


@dataclass(frozen=True, slots=True)
class PatchRule:
    """OpenAI's patch rule: 32 px squares, at most ``cap``, times ``multiplier``."""

    multiplier: Fraction
    cap: int = 1536

    def image(self, width: int, height: int, detail: str) -> int:
        patches = math.ceil(width / 32) * math.ceil(height / 32)
        return math.ceil(min(patches, self.cap) * self.multiplier)

    def most(self) -> int:
        return math.ceil(self.cap * self.multiplier)

    def page(self) -> int:
        return self.image(*_PAGE_PX, "high") + _PAGE_TEXT_TOKENS


@dataclass(frozen=True, slots=True)
class PixelRule:
    """Anthropic's rule: pixels / ``pixels_per_token``, after scaling to ``long_edge`` and
    ``max_pixels``. ``max_pixels``: the largest size Anthropic's vision guide lists as sent
    unresized, 784 x 1568 (about 1,640 tokens, its "about 1,600")."""

    long_edge: int = 1568
    max_pixels: int = 784 * 1568
    pixels_per_token: int = 750
    page_tokens: int = 2500

    def image(self, width: int, height: int, detail: str) -> int:
        long, short = max(width, height), min(width, height)
        # Scaled by s = min(1, long_edge / long, sqrt(max_pixels / (w h))), the area w h s^2 is
        # the least of the three below: exact, so that a larger copy never counts fewer.
        area = min(
            Fraction(width * height),
            Fraction(self.long_edge * self.long_edge * short, long),
            Fraction(self.max_pixels),
        )
        return math.ceil(area / self.pixels_per_token)

    def most(self) -> int:
        return math.ceil(Fraction(self.max_pixels, self.pixels_per_token))

    def page(self) -> int:
        return self.page_tokens


TokenRule = TileRule | PatchRule | PixelRule

_OPENAI: Final = TileRule()
_ANTHROPIC: Final = PixelRule()
# By model family, the longest prefix first wins. Sources: OpenAI's "Images and vision" guide
# (tiles, patches and each model's numbers) and Anthropic's vision guide; Claude Opus 4.7's
# larger images (2576 px, about 3.75 MP) are from Anthropic's announcement as reported.
_FAMILIES: Final[tuple[tuple[str, TokenRule], ...]] = tuple(
    sorted(
        (
            ("gpt-4o-mini", TileRule(2833, 5667)),
            ("gpt-4.1-mini", PatchRule(Fraction("1.62"))),
            ("gpt-4.1-nano", PatchRule(Fraction("2.46"))),
            ("gpt-5-mini", PatchRule(Fraction("1.62"))),
            ("gpt-5-nano", PatchRule(Fraction("2.46"))),
            ("o4-mini", PatchRule(Fraction("1.72"))),
            ("claude-opus-4-7", PixelRule(long_edge=2576, max_pixels=3_750_000)),
            ("claude", _ANTHROPIC),
        ),
        key=lambda row: -len(row[0]),
    )
)
_BY_KIND: Final[dict[str, TokenRule]] = {"anthropic": _ANTHROPIC}


def token_rule(provider_kind: str, model: str) -> TokenRule:
    """The rule ``model`` (its name as the API takes it) is billed by: its family's, else its
    provider kind's."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, rule in _FAMILIES:
        if name.startswith(prefix):
            return rule
    return _BY_KIND.get(provider_kind, _OPENAI)


def attachment_tokens(att: Attachment, provider_kind: str, model: str) -> int:
    """The input tokens ``att`` costs ``model`` of a provider of ``provider_kind``: an image by
    its width and height (an image whose size was not read: the most any image costs), a PDF
    by its pages (an estimate that errs high)."""
    rule = token_rule(provider_kind, model)
    if att.kind == "pdf":
        return rule.page() * (att.pages if att.pages is not None else _UNKNOWN_PAGES)
    if att.width is None or att.height is None:
        return rule.most()
    return rule.image(att.width, att.height, att.detail)
