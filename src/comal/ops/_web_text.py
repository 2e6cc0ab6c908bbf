"""A fetched page as text the model can read: what a browser would show, links kept.

Scripts, styles and other parts a reader never sees are dropped; blocks end their lines;
headings, list items and preformatted text keep their shape; a link keeps its target after its
text. Nothing is executed and nothing is fetched: this reads the bytes WebFetch already has.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["html_to_text"]

_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe", "object"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
        "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
        "main", "nav", "ol", "p", "pre", "section", "table", "tr", "ul",
    }
)  # fmt: skip
_SPACES = re.compile(r"[ \t\r\f\v]+")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.hidden = 0
        self.pre = 0
        self.href: list[str | None] = []
        self.title: list[str] = []
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in _HIDDEN:
            self.hidden += 1
            return
        if tag in _BLOCKS:
            self.out.append("\n")
        if tag == "pre":
            self.pre += 1
        elif tag == "li":
            self.out.append("- ")
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.out.append("#" * int(tag[1]) + " ")
        elif tag == "a":
            self.href.append(dict(attrs).get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
            return
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag == "a" and self.href:
            href = self.href.pop()
            if href and not href.startswith(("#", "javascript:")) and not self.hidden:
                self.out.append(f" ({href})")
        if tag in _BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        if self.hidden:
            return
        self.out.append(data if self.pre else _SPACES.sub(" ", data.replace("\n", " ")))


def html_to_text(html: str) -> str:
    """The text of ``html`` as a reader sees it (the title first when the page has one)."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = [line.strip() for line in "".join(parser.out).split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(parser.title).split())
    return f"# {title}\n\n{body}" if title and title not in body[:200] else body
