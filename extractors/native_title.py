"""The page's title against its headings, for `mode=native`: both compared as a reader sees them,
a heading that is the title or a part of it (the headline), and one that names the article in more
words than the title (the heading of its replies)."""
from __future__ import annotations

import re


_QUOTES = str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")  # a title's typography varies from its heading's

_TITLE_PARTS = re.compile(r"\s+[|\u2013\u2014:\u00b7\u2022-]+\s+")


def _title_headline(title: str | None) -> tuple[str, str] | None:
    """The page's title and the article's headline in it: its longest part between the separators
    that add the site's name ("Why X matters | Site"), both lower case."""
    if not title:
        return None
    title = " ".join(title.split()).lower().translate(_QUOTES)
    part = max(_TITLE_PARTS.split(title), key=len)
    return (title, part) if len(part) >= 15 else None


def _replies_heading(text: str, headline: tuple[str, str] | None) -> bool:
    """A heading (`text`, spaces collapsed) after the article that names the article with words the
    title does not have: the heading of its replies ("12 thoughts on “Title”", "3 responses to
    Title"). A heading that repeats the title, or part of it, is the article's own."""
    if headline is None or len(text) < len(headline[1]) + 5:
        return False
    text = text.lower().translate(_QUOTES)
    return headline[1] in text and text not in headline[0]


_TITLE_HEADING = 10  # characters: a shorter heading ("News", "Home") inside the title names no article


def _plain(text: str) -> str:
    """Spaces collapsed, lower case: a title and a heading compared as a reader sees them."""
    return " ".join(text.split()).lower()


def _in_title(heading: str, title: str) -> bool:
    """The heading (`_plain`) is the title's or part of it (a title adds the site's name)."""
    return len(heading) >= _TITLE_HEADING and heading in title
