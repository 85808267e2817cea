"""Model cards: Markdown, shown as HTML cleaned to an allow-list.

Raw HTML in a card is not HTML: Markdown's raw-HTML readers are taken out, so that <b> or
<script> shows as the text it is. What Markdown itself makes is then cleaned by nh3 all the
same: only the tags and attributes below, links only to http, https and mailto, each with
rel="noopener noreferrer nofollow" (a javascript: link in Markdown's own syntax is dropped)."""

from __future__ import annotations

import html
import re

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "del",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "td": {"align"}, "th": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}
_PLACEHOLDER = re.compile("\x02klzzwxh:[0-9]+\x03|[\x02\x03]")


class _NoRawHtml(markdown.Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 - Markdown's name
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


def card_html(text: str) -> SafeString:
    """The card as HTML that is safe to put in a page."""
    rendered = markdown.markdown(
        text or "", extensions=[_NoRawHtml(), "tables", "fenced_code", "sane_lists"]
    )
    cleaned = nh3.clean(
        rendered,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    # Markdown marks what it set aside with STX/ETX; one it did not put back (an image nh3
    # removed, say) would show as a stray control character.
    cleaned = _PLACEHOLDER.sub("", cleaned)
    return mark_safe(cleaned)  # noqa: S308 - cleaned by nh3 to the allow-list above


def card_summary(text: str, length: int = 200) -> str:
    """The card's first paragraph as plain text, for the catalogue."""
    for block in (text or "").split("\n\n"):
        if block.lstrip().startswith("#"):  # a heading: the name, mostly
            continue
        words = " ".join(line.strip() for line in block.splitlines() if line.strip())
        if words:
            # Tags stripped, then entities read back: the page's template escapes it again.
            plain = html.unescape(
                nh3.clean(markdown.markdown(words, extensions=[_NoRawHtml()]), tags=set())
            )
            return plain if len(plain) <= length else plain[: length - 1].rstrip() + "…"
    return ""
