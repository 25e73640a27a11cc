"""Page layout from a PDF text layer: reading order by columns, tables as Markdown, headings, margins.

Works on word boxes (pymupdf `get_text("words")`), the same input an OCR engine gives back, so the OCR
path reuses it. Steps per page:
1. Tables: visual rows (words sharing a baseline across blocks) are cut into segments at wide gaps;
   runs of >= 3 rows with >= 2 segments whose segments fall into shared x-columns (vertical
   whitespace rivers) become one Markdown table. Two-column prose is not a table: its segments are
   long runs of words.
2. The remaining lines are ordered by recursive XY-cut: a vertical gutter splits columns (left to
   right, right to left on a right-to-left page), else the widest horizontal gap splits bands top to
   bottom; then neighbouring lines of one text-layer block are joined into paragraphs again.
3. Lines in the top/bottom margin band that are short and not larger than body text (running heads,
   folios, footers) are dropped; a block of text clearly larger than the body is a heading (`#`).
Everything is plain geometry: no model, a few ms per page.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

_RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")
_LETTER = re.compile(r"[^\W\d_]")
_PAGE_NUM = re.compile(r"^\s*(?:[-–—]\s*)?(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:of|/)\s*\d{1,4})?(?:\s*[-–—])?\s*$", re.I)


@dataclass
class Word:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    key: tuple = ()  # (block, line) in the text layer; OCR gives one line per detected box


@dataclass
class Line:
    words: list[Word]
    x0: float = 0.0
    y0: float = 0.0
    x1: float = 0.0
    y1: float = 0.0

    def __post_init__(self) -> None:
        self.x0 = min(w.x0 for w in self.words)
        self.y0 = min(w.y0 for w in self.words)
        self.x1 = max(w.x1 for w in self.words)
        self.y1 = max(w.y1 for w in self.words)

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def size(self) -> float:
        """Typical glyph height: the median span height (a merged row's box is taller than its text)."""
        return statistics.median(w.y1 - w.y0 for w in self.words)

    @property
    def text(self) -> str:
        """Spans joined; a space only where the layer has none and the glyphs stand apart."""
        out = ""
        for prev, w in zip([None] + self.words[:-1], self.words):
            if prev is not None and out and not out.endswith(" ") and not w.text.startswith(" ") \
                    and max(w.x0 - prev.x1, prev.x0 - w.x1) > 0.15 * (w.y1 - w.y0):  # RTL runs go leftwards
                out += " "
            out += w.text
        return re.sub(r"\s+", " ", out).strip()


@dataclass
class Block:
    lines: list[Line]
    kind: str = "text"  # text | table | heading
    rendered: list[str] = field(default_factory=list)  # table rows as Markdown

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return (min(l.x0 for l in self.lines), min(l.y0 for l in self.lines),
                max(l.x1 for l in self.lines), max(l.y1 for l in self.lines))


# ---- rows, segments, tables ---------------------------------------------------------------------

def _rows(lines: list[Line]) -> list[list[Line]]:
    """Lines that share a visual row (vertical centre inside each other's extent), left to right."""
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda l: (l.y0 + l.y1) / 2):
        c = (line.y0 + line.y1) / 2
        if rows:
            last = rows[-1]
            ly0 = statistics.median(l.y0 for l in last)
            ly1 = statistics.median(l.y1 for l in last)
            if ly0 <= c <= ly1 and line.y0 <= (ly0 + ly1) / 2 <= line.y1:
                last.append(line)
                continue
        rows.append([line])
    return [sorted(r, key=lambda l: l.x0) for r in rows]


def _segments(row: list[Line]) -> list[Line]:
    """A row's words cut at gaps wider than about one character height: the candidate cells."""
    words = sorted((w for l in row for w in l.words), key=lambda w: w.x0)
    h = statistics.median(w.y1 - w.y0 for w in words)
    segs, cur = [], [words[0]]
    for w in words[1:]:
        if w.x0 - cur[-1].x1 > max(0.9 * h, 4.0):
            segs.append(Line(cur))
            cur = [w]
        else:
            cur.append(w)
    segs.append(Line(cur))
    return segs


def _columns(seg_rows: list[list[Line]]) -> list[tuple[float, float]]:
    """x-intervals of a run of rows; the gaps between them are the rivers. A river may be crossed
    by a few rows (a spanning header, a bold row set tight): up to one row in seven."""
    spans = [(s.x0, s.x1) for row in seg_rows for s in row]
    events = sorted({x for sp in spans for x in sp})
    tol = len(seg_rows) // 7
    cols: list[list[float]] = []
    for x0, x1 in zip(events, events[1:]):
        mid = (x0 + x1) / 2
        covered = sum(any(s.x0 <= mid <= s.x1 for s in row) for row in seg_rows)
        if covered > tol:
            if cols and x0 <= cols[-1][1] + 1.0:
                cols[-1][1] = x1
            else:
                cols.append([x0, x1])
    cols = [c for c in cols if c[1] - c[0] >= 2.0]  # a sliver where a few edges happen to meet
    # what lies only in rivers (a column filled in one row) is a column of its own
    for x0, x1 in sorted(spans):
        if not any(a <= x1 and x0 <= b for a, b in cols):
            cols.append([x0, x1])
            cols.sort()
    return [(a, b) for a, b in cols]


def _overlap(x0: float, x1: float, col: tuple[float, float]) -> float:
    return min(x1, col[1]) - max(x0, col[0])


def _column_of(x0: float, x1: float, cols: list[tuple[float, float]]) -> int:
    return max(range(len(cols)), key=lambda k: (_overlap(x0, x1, cols[k]), -abs((x0 + x1) / 2 - sum(cols[k]) / 2)))


def _split_at_rivers(seg: Line, cols: list[tuple[float, float]]) -> list[Line]:
    """A segment over several columns whose words each touch one column (or none: a river) is
    several cells set a space apart (a bold total row, a tight heading row); a heading with a word
    over two columns stays whole."""
    words = seg.words
    if len(words) < 2:
        return [seg]
    where: list[int | None] = []
    for w in words:
        touched = [k for k, c in enumerate(cols) if _overlap(w.x0, w.x1, c) > 0]
        if len(touched) > 1:
            return [seg]
        where.append(touched[0] if touched else None)
    known = [k for k in where if k is not None]
    if len(set(known)) < 2:
        return [seg]
    out, cur, at = [], [], known[0]
    for w, k in zip(words, where):
        if k is not None and k != at:
            out.append(Line(cur))
            cur, at = [], k
        cur.append(w)
    return out + [Line(cur)]


_NUMBER = re.compile(r"[-+−–(]?[$€£]?\d[\d.,]*%?\)?")


def _merge_wrapped(grid: list[list[str]], spanning: list[bool]) -> list[list[str]]:
    """A row without a first cell whose cells all continue filled cells of the row above is their
    second line (a wrapped cell, a two-line heading); a number under a number is a row of its own,
    and so is a row with a cell over several columns (a section heading inside the table)."""
    out: list[list[str]] = []
    for row, wide in zip(grid, spanning):
        if out and not row[0] and not wide:
            prev = out[-1]
            filled = [k for k, c in enumerate(row) if c]
            if filled and all(prev[k] for k in filled) and not any(
                    _NUMBER.fullmatch(row[k]) and _NUMBER.fullmatch(prev[k].split(" ")[-1]) for k in filled):
                out[-1] = [(p + " " + c).strip() for p, c in zip(prev, row)]
                continue
        out.append(list(row))
    return out


_WIDE = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def _text_len(text: str) -> int:
    return len(text) + len(_WIDE.findall(text))  # a CJK character holds about two Latin ones


def _is_prose(seg_rows: list[list[Line]], cols: list[tuple[float, float]]) -> bool:
    """Columns of running text side by side (a two-column page, a text beside an infobox)."""
    total = cols[-1][1] - cols[0][0]
    if len(cols) == 2 and all(b - a >= 0.3 * total for a, b in cols):
        return True  # two wide columns side by side: a two-column page, not a table
    for a, b in cols:
        segs = [s for row in seg_rows for s in row if a - 1 <= (s.x0 + s.x1) / 2 <= b + 1]
        if len(segs) < 3:
            continue
        if statistics.median(_text_len(s.text) for s in segs) > 40:
            return True
        # wrapped lines fill their column: a wide column of full-width segments is running text
        full = sum(s.x1 - s.x0 >= 0.85 * (b - a) for s in segs)
        if b - a >= 0.25 * total and full >= 0.6 * len(segs):
            return True
    return False


def _table(seg_rows: list[list[Line]]) -> list[list[str]] | None:
    if len(seg_rows) < 3:
        return None
    cols = _columns(seg_rows)
    if len(cols) < 2 or _is_prose(seg_rows, cols):
        return None
    grid, spanning = [], []
    for row in seg_rows:
        cells = [""] * len(cols)
        for s in (piece for seg in row for piece in _split_at_rivers(seg, cols)):
            i = _column_of(s.x0, s.x1, cols)
            cells[i] = (cells[i] + " " + s.text).strip()
        grid.append(cells)
        spanning.append(any(sum(_overlap(s.x0, s.x1, c) > 0 for c in cols) > 1 for s in row))
    filled = sum(bool(c) for r in grid for c in r)
    if filled < 0.45 * len(cols) * len(grid):
        return None
    return _merge_wrapped(grid, spanning)


def render_table(grid: list[list[str]]) -> list[str]:
    esc = [[c.replace("|", "\\|") for c in row] for row in grid]
    out = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(esc[0])]
    out += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return out


def _headings_above(rows: list[list[Line]], seg_rows: list[list[Line]], i: int, lh: float, used: set[int]) -> int:
    """Index of the first of up to two short lines just above a table's first row that start right
    of its first cell: a heading over a group of columns ("Year Ended"), part of the table."""
    h = i
    while h > max(0, i - 2) and len(seg_rows[h - 1]) == 1 and not any(id(l) in used for l in rows[h - 1]):
        lone = seg_rows[h - 1][0]
        gap = min(l.y0 for l in rows[h]) - lone.y1
        if _text_len(lone.text) >= 40 or gap > lh or lone.x0 <= seg_rows[i][0].x1:
            break
        h -= 1
    return h


def find_tables(lines: list[Line]) -> tuple[list[Block], list[Line]]:
    """Tables found among a page's lines, and the lines left over."""
    rows = _rows(lines)
    seg_rows = [_segments(r) for r in rows]
    tables: list[Block] = []
    spans: list[list[tuple[float, float]]] = []
    used: set[int] = set()
    i = 0
    while i < len(rows):
        if len(seg_rows[i]) < 2:
            i += 1
            continue
        j = i + 1
        lh = max(l.height for l in rows[i])
        while j < len(rows):
            gap = min(l.y0 for l in rows[j]) - max(l.y1 for l in rows[j - 1])
            if gap > 2.2 * lh:
                break
            if len(seg_rows[j]) < 2:  # lone cells (a wrapped label, a section row) inside a table
                k = j
                while k < min(j + 2, len(rows)) and len(seg_rows[k]) < 2 and _text_len(seg_rows[k][0].text) < 40:
                    k += 1
                if k < len(rows) and k > j and len(seg_rows[k]) >= 2:
                    j = k + 1
                    continue
                # the last line of a wrapped cell: starts where a cell of the row above starts
                lone = seg_rows[j][0]
                if gap <= 0.8 * lh and _text_len(lone.text) < 40 and any(abs(s.x0 - lone.x0) <= 2 for s in seg_rows[j - 1]):
                    j += 1
                    continue
                break
            j += 1
        grid = _table(seg_rows[i:j])
        if grid is not None:
            h = _headings_above(rows, seg_rows, i, lh, used)
            if h < i and (above := _table(seg_rows[h:j])) is not None:
                grid, i = above, h
            block_lines = [l for r in rows[i:j] for l in r]
            tables.append(Block(block_lines, "table", render_table(grid)))
            spans.append(_columns(seg_rows[i:j]))
            used.update(id(l) for l in block_lines)
            i = j
        else:
            i += 1
    rest = [l for l in lines if id(l) not in used]
    # rows of a two-column page that happen to share baselines are not a table: their river is the
    # page's gutter, which the text above and below the "table" leaves free as well
    keep = [not _on_page_gutter(cols, rest) for cols in spans]
    dropped = {id(l) for t, k in zip(tables, keep) if not k for l in t.lines}
    return [t for t, k in zip(tables, keep) if k], [l for l in lines if id(l) not in used or id(l) in dropped]


def _on_page_gutter(cols: list[tuple[float, float]], rest: list[Line], min_gutter: float = 6.0) -> bool:
    lo, hi = cols[0][0], cols[-1][1]
    others = sorted((l.x0, l.x1) for l in rest if l.x1 > lo and l.x0 < hi)
    for (_, a), (b, _) in zip(cols, cols[1:]):
        reach = a
        for x0, x1 in others + [(b, b)]:
            if x0 >= b:
                x0 = b
            if x1 <= reach:
                continue
            if x0 - reach >= min_gutter:  # a free band: nothing of the page crosses it
                x = (reach + x0) / 2
                if sum(x1 <= x for _, x1 in others) >= 3 and sum(x0 >= x for x0, _ in others) >= 3:
                    return True
            reach = max(reach, x1)
            if reach >= b:
                break
    return False


# ---- reading order ------------------------------------------------------------------------------

def _xy_cut(blocks: list[Block], rtl: bool, min_gutter: float) -> list[Block]:
    if len(blocks) <= 1:
        return blocks
    boxes = [b.bbox for b in blocks]
    # vertical gutter: a gap in the x-projection of all blocks
    order = sorted(range(len(blocks)), key=lambda k: boxes[k][0])
    reach, cut = boxes[order[0]][2], None
    for k in order[1:]:
        if boxes[k][0] - reach >= min_gutter:
            cut = (reach + boxes[k][0]) / 2
            break
        reach = max(reach, boxes[k][2])
    if cut is not None:
        left = [b for b, bb in zip(blocks, boxes) if bb[2] <= cut]
        right = [b for b, bb in zip(blocks, boxes) if bb[2] > cut]
        parts = [right, left] if rtl else [left, right]
        return [x for p in parts for x in _xy_cut(p, rtl, min_gutter)]
    # horizontal cut at the widest gap in the y-projection
    order = sorted(range(len(blocks)), key=lambda k: boxes[k][1])
    reach, best, at = boxes[order[0]][3], 0.0, None
    for k in order[1:]:
        gap = boxes[k][1] - reach
        if gap > best:
            best, at = gap, (reach + boxes[k][1]) / 2
        reach = max(reach, boxes[k][3])
    if at is None:
        return sorted(blocks, key=lambda b: (b.bbox[1], b.bbox[0]))
    top = [b for b, bb in zip(blocks, boxes) if bb[1] < at]
    bottom = [b for b, bb in zip(blocks, boxes) if bb[1] >= at]
    return _xy_cut(top, rtl, min_gutter) + _xy_cut(bottom, rtl, min_gutter)


# ---- page ---------------------------------------------------------------------------------------

def lines_from_words(words: list[Word]) -> list[Line]:
    by_key: dict[tuple, list[Word]] = {}
    for w in words:
        by_key.setdefault(w.key, []).append(w)
    return _attach_scripts(_merge_fragments([Line(ws) for ws in by_key.values()]))


def _centre(line: Line) -> float:
    return statistics.median((w.y0 + w.y1) / 2 for w in line.words)


def _merge_fragments(lines: list[Line]) -> list[Line]:
    """Pieces of one printed line that the text layer keeps apart (OCR'd scans put words on jittered
    baselines): same block, overlapping vertically by half, a gap under three glyph heights."""
    out: list[Line] = []
    for line in sorted(lines, key=lambda l: (l.words[0].key[:1], l.y0, l.x0)):
        for k in range(len(out) - 1, max(-1, len(out) - 9), -1):
            prev = out[k]
            if prev.words[0].key[:1] != line.words[0].key[:1]:
                break
            # centres, not boxes: a merged row must not grow until it swallows the next row
            off = abs(_centre(prev) - _centre(line))
            gap = max(line.x0 - prev.x1, prev.x0 - line.x1)
            if off < 0.4 * min(prev.size, line.size) and gap < 3 * max(prev.size, line.size):
                words = prev.words + line.words
                rtl = is_rtl("".join(w.text for w in words))
                out[k] = Line(sorted(words, key=lambda w: -w.x1 if rtl else w.x0))
                line = None
                break
        if line is not None:
            out.append(line)
    return out


_MATH_OP = re.compile(r"[=+−∫∑∏√∂∇×·⋅≤≥≈≠→±]")


def _attach_scripts(lines: list[Line]) -> list[Line]:
    """Superscripts, subscripts, limits and the two halves of a fraction are lines of their own in the
    layer ("2 2 c2" over "a + b ="): a short line touching a formula line (one with an operator) and
    inside its width joins it in x order. A short line of body size joins only with a partner on the
    other side (numerator and denominator), so the short last line of a paragraph stays where it is."""
    short = [l for l in lines if len(l.text) <= 6]
    bases = [l for l in lines if _MATH_OP.search(l.text)]
    if not short or not bases:
        return lines

    def near(a: Line, b: Line) -> float | None:
        if not (b.x0 - 0.5 * b.size <= a.x0 and a.x1 <= b.x1 + 1.5 * b.size):
            return None
        dist = max(a.y0 - b.y1, b.y0 - a.y1)
        return dist if dist <= 0.35 * b.size else None

    target: dict[int, Line] = {}
    for sl in short:
        best = None
        for b in bases:
            if b is sl or (dist := near(sl, b)) is None:
                continue
            if sl.size > 0.85 * b.size and not any(
                    o is not sl and o is not b and (o.y0 >= b.y0) != (sl.y0 >= b.y0) and near(o, b) is not None
                    and min(o.x1, sl.x1) > max(o.x0, sl.x0) for o in short):
                continue
            if best is None or dist < best[0]:
                best = (dist, b)
        if best:
            target[id(sl)] = best[1]
    hosts = {id(b) for b in target.values()}
    target = {k: b for k, b in target.items() if k not in hosts}  # a line that takes scripts stays put
    if not target:
        return lines
    # x order, but the halves of a fraction as units: numerator, then denominator
    parts = [l for l in lines if id(l) in target and l.size > 0.85 * target[id(l)].size]
    extra: dict[int, list[tuple]] = {}
    for l in lines:
        if id(l) in target:
            b = target[id(l)]
            pair = [o for o in parts if target[id(o)] is b and min(o.x1, l.x1) > max(o.x0, l.x0)]
            at = min(o.x0 for o in pair) if l in pair else None
            extra.setdefault(id(b), []).extend(
                ((w.x0, 0.0) if at is None else (at, l.y0), Word(w.x0, w.y0, w.x1, w.y1, w.text.lstrip(), b.words[0].key))
                for w in l.words)
    out = []
    for l in lines:
        if id(l) in target:
            continue
        if id(l) in extra:
            keyed = [((w.x0, 0.0), w) for w in l.words] + extra[id(l)]
            l = Line([w for _, w in sorted(keyed, key=lambda kw: (kw[0], kw[1].x0))])
        out.append(l)
    return out


def _regroup(atoms: list[Block], body_h: float) -> list[Block]:
    """Lines in reading order → blocks again: a line joins the previous one when the text layer put
    them in one block and it sits just below it, overlapping it horizontally."""
    out: list[Block] = []
    for a in atoms:
        if a.kind == "text" and out and out[-1].kind == "text":
            prev, line = out[-1].lines[-1], a.lines[0]
            gap = line.y0 - prev.y1
            overlap = min(prev.x1, line.x1) - max(prev.x0, line.x0)
            same_block = prev.words[0].key[:1] == line.words[0].key[:1]
            # lines of one paragraph that the layer put in separate blocks: close, same size, aligned
            alike = abs(prev.size - line.size) <= 0.15 * body_h and overlap >= 0.6 * min(prev.x1 - prev.x0, line.x1 - line.x0)
            if -0.5 * body_h <= gap <= (1.0 if same_block else 0.7) * body_h and overlap > 0 and (same_block or alike):
                out[-1].lines.append(line)
                continue
        out.append(Block(list(a.lines), a.kind, a.rendered))
    return out


def is_rtl(text: str) -> bool:
    letters = _LETTER.findall(text)
    return bool(letters) and sum(bool(_RTL.match(c)) for c in letters) > 0.5 * len(letters)


def _isolated(line: Line, lines: list[Line], body_h: float, top: bool) -> bool:
    """Nothing else within a line's height below (a head) or above (a footer): a table row or the
    first line of the body that merely starts high on the page is not a running head."""
    c = _centre(line)
    others = [m for m in lines if abs(_centre(m) - c) > 0.5 * line.size]
    if top:
        gaps = [m.y0 - line.y1 for m in others if m.y0 >= line.y1 - 0.3 * body_h]
    else:
        gaps = [line.y0 - m.y1 for m in others if m.y1 <= line.y0 + 0.3 * body_h]
    return not gaps or min(gaps) >= 0.35 * body_h


def _drop_margins(lines: list[Line], height: float, body_h: float, margin: float) -> list[Line]:
    """Running heads, folios and footers: short lines alone in the margin bands. A running title in
    capitals may be set large; any other margin line only when not larger than the body."""
    if len(lines) <= 3:
        return lines
    content_top = min(l.y0 for l in lines)
    content_bottom = max(l.y1 for l in lines)
    kept, dropped = [], []
    for l in lines:
        txt = l.text
        in_band = l.y1 < height * margin or l.y0 > height * (1 - margin)
        edge = l.y0 <= content_top + 1 or l.y1 >= content_bottom - 1
        # a head is alone below it, a footer alone above it; on a short page the last line may sit high
        top = l.y1 < height * 0.5 if in_band or not edge else l.y0 <= content_top + 1
        wide_band = l.y1 < height * 0.12 or l.y0 > height * 0.88
        caps = (txt.isupper() or _PAGE_NUM.match(txt)) and len(txt) < 40
        if ((in_band or (edge and _PAGE_NUM.match(txt))) and len(txt) < 90 and l.size <= 1.15 * body_h
                or wide_band and caps) and _isolated(l, lines, body_h, top):
            dropped.append(l)
        else:
            kept.append(l)
    # what shares a dropped head's row is part of it ("BRITISH HUSBANDRY. [Ch. XIX. 400")
    rows_out = [(d.y0, d.y1) for d in dropped]
    return [l for l in kept if not (len(l.text) < 40 and any(a <= _centre(l) <= b for a, b in rows_out))]


def layout_page(words: list[Word], width: float, height: float, margin: float = 0.075) -> list[list[str]]:
    """Word boxes of one page → blocks of lines in reading order (a table block is Markdown rows)."""
    if not words:
        return []
    lines = lines_from_words(words)
    body_h = statistics.median(l.size for l in lines)
    # running heads, folios and footers: short lines in the margin bands, not larger than the body
    kept = _drop_margins(lines, height, body_h, margin)
    tables, rest = find_tables(kept)
    # lines are the atoms of the cut: a text-layer block may hold lines of two columns
    atoms = [Block([l]) for l in rest] + tables
    rtl = is_rtl(" ".join(l.text for l in rest[:200]))
    ordered = _regroup(_xy_cut(atoms, rtl, min_gutter=max(6.0, 0.6 * body_h)), body_h)
    out: list[list[str]] = []
    cap = ""
    for b in ordered:
        if b.kind == "table":
            out.append(b.rendered)
            continue
        texts = [l.text for l in b.lines]
        if len(texts) == 1 and len(texts[0]) == 1 and texts[0].isupper():  # a drop cap starts the next block
            cap = texts[0]
            continue
        if cap:
            texts[0], cap = cap + texts[0], ""
        big = statistics.median(l.size for l in b.lines) >= 1.3 * body_h
        if big and len(b.lines) <= 3 and sum(map(len, texts)) < 150:
            out.append(["# " + " ".join(texts)])
        else:
            out.append(texts)
    return out
