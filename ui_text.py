"""Text safety for the UI: strings from data are shown literally, never interpreted."""

from __future__ import annotations

import hashlib
import html
import re

# CommonMark backslash-escapable punctuation: escaping all of it makes Markdown render the text as typed.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>:$=^])")


def clean(value: object) -> str:
    """A printable str: lone surrogates and NUL (which Arrow, protobuf and browsers reject) become U+FFFD."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and "\x00" not in text:
        return text
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def esc(value: object) -> str:
    """HTML-escape (quotes too) for any string placed into HTML markup."""
    return html.escape(clean(value), quote=True)


def md_literal(value: object) -> str:
    """Markdown that renders as the literal text: HTML-escaped, then every Markdown sign backslash-escaped."""
    text = html.escape(clean(value), quote=False)
    # `&lt;` must survive as an entity, so escape punctuation outside the entities we just made.
    parts = re.split(r"(&(?:lt|gt|amp);)", text)
    return "".join(p if p.startswith("&") and p.endswith(";") else _MD_SPECIAL.sub(r"\\\1", p) for p in parts)


_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s")


def reading(value: object) -> str:
    """Chunk text as a reader expects it: hard line wraps (lines cut at one width, as in Project Gutenberg files)
    joined into paragraphs; blank lines, short lines (a heading, a line of verse) and list items keep their breaks."""
    text = clean(value)
    lines = text.split("\n")
    widths = sorted(len(line) for line in lines if line.strip())
    if len(widths) < 3:
        return text
    wrap = widths[int(0.9 * (len(widths) - 1))]
    if not 40 <= wrap <= 100:  # short lines are verse or a list; lines this long were never wrapped by hand
        return text
    out = [lines[0]]
    for prev, line in zip(lines, lines[1:], strict=False):
        if prev.strip() and line.strip() and len(prev.rstrip()) >= 0.6 * wrap and not _LIST_ITEM.match(line):
            out[-1] = out[-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return "\n".join(out)


def short(value: object, limit: int = 40) -> str:
    """At most `limit` characters, with an ellipsis when cut."""
    text = clean(value)
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def entity_label(name: str, type_: str) -> str:
    """How the Paths pickers name an entity, and keep it in the URL: `name (type)`, both shortened."""
    return f"{clean(short(name, 80))} ({clean(short(type_, 30))})"


def md_code(value: object) -> str:
    """An inline Markdown code span showing the text literally (code spans take no escapes)."""
    text = clean(value).replace("\n", " ")
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def slug(text: str, limit: int, default: str) -> str:
    """A safe file-name stem: runs of anything but ASCII letters and digits become one '-', lower case."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:limit] or default


def result_key(*parts: str) -> str:
    """A short stable key for widgets that belong to one result (selection resets on a new search)."""
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
