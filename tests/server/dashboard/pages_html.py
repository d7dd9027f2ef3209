"""What the run, costs and jobs page tests read pages with: a browser of sorts (a client that
keeps cookies and sends forms with their CSRF field) and a small HTML tree to find elements
by id, class and attribute (the standard library's parser; no dependency for it)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import httpx2
import pytest

__all__ = ["Browser", "Node", "parse", "wait_for"]

_VOID = frozenset(
    "area base br col embed hr img input link meta source track wbr".split()  # noqa: SIM905
)


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        """The text inside, whitespace runs made one space."""
        parts: list[str] = []

        def walk(node: Node) -> None:
            for child in node.children:
                if isinstance(child, str):
                    parts.append(child)
                else:
                    walk(child)

        walk(self)
        return re.sub(r"\s+", " ", "".join(parts)).strip()

    def walk(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()

    def all(self, tag: str | None = None, *, cls: str | None = None, **attrs: str) -> list[Node]:
        """Elements inside (``data_tool="x"`` matches ``data-tool="x"``)."""
        wanted = {name.replace("_", "-"): value for name, value in attrs.items()}
        return [
            node
            for node in self.walk()
            if (tag is None or node.tag == tag)
            and (cls is None or cls in node.classes)
            and all(node.attrs.get(name) == value for name, value in wanted.items())
        ]

    def one(self, tag: str | None = None, *, cls: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, cls=cls, **attrs)
        assert len(found) == 1, f"{len(found)} of {tag} {cls} {attrs}"
        return found[0]

    def by_id(self, element_id: str) -> Node:
        return self.one(id=element_id)

    def has_id(self, element_id: str) -> bool:
        return bool(self.all(id=element_id))


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


class Browser:
    """A person's browser on the dashboard: cookies kept (the CSRF one among them), forms sent
    as a page would send them, redirects not followed (tests look at them)."""

    def __init__(self, url: str) -> None:
        self.client = httpx2.Client(base_url=url, timeout=30)

    def get(self, path: str, status: int = 200) -> Node:
        response = self.client.get(path)
        assert response.status_code == status, f"{path}: {response.status_code} {response.text}"
        assert response.headers["content-type"].startswith("text/html")
        return parse(response.text)

    @property
    def csrf(self) -> str:
        for page in ("/", "/login"):  # a page sets it; on a guarded server, before logging in,
            if "ar_csrf" not in self.client.cookies:  # the login page is the one open
                self.client.get(page)
        return str(self.client.cookies["ar_csrf"])

    def post(self, path: str, fields: dict[str, str] | None = None, *, csrf: bool = True) -> Any:
        data = dict(fields or {})
        if csrf:
            data["csrf"] = self.csrf
        return self.client.post(path, data=data)

    def json(self, path: str) -> Any:
        response = self.client.get(path)
        assert response.status_code == 200, response.text
        return response.json()

    def close(self) -> None:
        self.client.close()


def wait_for(what: str, check: Callable[[], bool], within_s: float = 30) -> None:
    """Poll until ``check`` holds (a bound on waiting, not a timed assertion)."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for {what} after {within_s} s")
        time.sleep(0.05)
