"""extract.pdf's layout path on PDFs generated here: column order, tables, margins, RTL columns."""
import pytest

from assay.extractors.pdf import extract_pdf

pymupdf = pytest.importorskip("pymupdf")

LEFT = [f"left column line {w} of the first story" for w in ("one", "two", "three", "four", "five", "six")]
RIGHT = [f"right column line {w} of the second story" for w in ("one", "two", "three", "four", "five", "six")]


def _two_columns(path):
    """Two columns written row by row, alternating: content-stream order interleaves them."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 100), "A Title Across The Page", fontsize=20)
    for i, (a, b) in enumerate(zip(LEFT, RIGHT)):
        y = 160 + 14 * i
        page.insert_text((72, y), a, fontsize=10)
        page.insert_text((320, y), b, fontsize=10)
    doc.save(path)


def test_two_columns_read_left_then_right(tmp_path):
    path = tmp_path / "cols.pdf"
    _two_columns(str(path))
    text = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"]
    assert text.startswith("# A Title Across The Page")
    flat = " ".join(text.split())
    assert " ".join(LEFT) in flat and " ".join(RIGHT) in flat
    assert flat.index(LEFT[-1]) < flat.index(RIGHT[0])
    assert "|" not in text  # two columns of prose are not a table
    old = extract_pdf({"path": str(path), "backend": "pymupdf", "layout": False})["text"]
    assert " ".join(LEFT) not in " ".join(old.split())  # content-stream order interleaves the columns


def test_table_as_markdown_rows_and_columns(tmp_path):
    rows = [("Item", "Quantity", "Price"), ("Apples", "12", "3.40"), ("Pears", "7", "2.10"), ("Plums", "30", "5.95")]
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 90), "The stock counted on Monday is listed in the table below, by item.", fontsize=10)
    for col in range(3):  # column by column: the stream holds no row order
        for r, row in enumerate(rows):
            page.insert_text((72 + 140 * col, 130 + 16 * r), row[col], fontsize=10)
    page.insert_text((72, 220), "Prices are in euros per kilogram and include the tax.", fontsize=10)
    path = tmp_path / "table.pdf"
    doc.save(str(path))
    text = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"]
    lines = text.splitlines()
    assert "| Item | Quantity | Price |" in lines
    assert "| Apples | 12 | 3.40 |" in lines and "| Plums | 30 | 5.95 |" in lines
    assert lines.index("| Item | Quantity | Price |") + 1 == lines.index("|---|---|---|")
    assert text.index("stock counted") < text.index("| Item") < text.index("Prices are")


def test_margin_head_and_folio_dropped_on_a_single_page(tmp_path):
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((200, 30), "Journal of Examples, Vol. 3", fontsize=8)
    body = "The body of the page is long enough to be the body and it goes on for a while here."
    for i in range(8):
        page.insert_text((72, 120 + 14 * i), body, fontsize=10)
    page.insert_text((290, 820), "17", fontsize=8)
    path = tmp_path / "head.pdf"
    doc.save(str(path))
    text = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"]
    assert "Journal of Examples" not in text and "17" not in text
    assert text.count("The body of the page") == 8


def test_rtl_page_reads_columns_right_to_left(tmp_path):
    right = ["שורה ראשונה בטור הימני", "שורה שנייה בטור הימני", "שורה שלישית בטור הימני", "שורה רביעית בטור הימני"]
    left = ["שורה ראשונה בטור השמאלי", "שורה שנייה בטור השמאלי", "שורה שלישית בטור השמאלי", "שורה רביעית בטור השמאלי"]
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    html_r = "".join(f"<p>{t}</p>" for t in right)
    html_l = "".join(f"<p>{t}</p>" for t in left)
    page.insert_htmlbox(pymupdf.Rect(320, 100, 540, 400), f'<div dir="rtl">{html_r}</div>')
    page.insert_htmlbox(pymupdf.Rect(60, 100, 280, 400), f'<div dir="rtl">{html_l}</div>')
    path = tmp_path / "rtl.pdf"
    doc.save(str(path))
    text = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"]
    assert all(t in text for t in right + left), text
    assert text.index(right[-1]) < text.index(left[0])


def _cells_pdf(path, rows, xs, row_spans=()):
    """A table written cell by cell at left edges xs; rows listed in row_spans are written as one
    text run instead, their cells a single space apart (one span in the layer, as a bold total row)."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "The figures below are counted by hand and checked twice by the clerk.", fontsize=10)
    for r, row in enumerate(rows):
        y = 120 + 16 * r
        if r in row_spans:
            page.insert_text((xs[0], y), row[0], fontsize=10)
            page.insert_text((xs[1], y), " ".join(row[1:]), fontsize=10)
        else:
            for x, cell in zip(xs, row):
                if cell:
                    page.insert_text((x, y), cell, fontsize=10)
    doc.save(str(path))


def test_cells_one_space_apart_in_one_span_are_split_by_the_columns_of_other_rows(tmp_path):
    nums = ["1,111,111", "2,222,222", "3,333,333"]
    step = pymupdf.get_text_length(nums[0] + " ", fontsize=10)  # where the run's words fall
    xs = [72, 200, 200 + step, 200 + 2 * step]
    rows = [["Region", "2001", "2002", "2003"]]
    rows += [[name, f"{k}4,000", f"{k}5,000", f"{k}6,000"] for k, name in
             zip(range(4, 9), ["North", "South", "East", "West", "Centre"])]
    rows.append(["Total", *nums])
    path = tmp_path / "span.pdf"
    _cells_pdf(path, rows, xs, row_spans={len(rows) - 1})
    lines = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"].splitlines()
    assert "| Total | 1,111,111 | 2,222,222 | 3,333,333 |" in lines, lines
    assert "| North | 44,000 | 45,000 | 46,000 |" in lines


def test_wrapped_cell_lines_join_but_a_number_under_a_number_is_its_own_row(tmp_path):
    xs = [72, 150, 330]
    rows = [["Source", "Definition", "Tons"],
            ["Major", "emits ten tons a year", "10"],
            ["", "of any one toxic", ""],
            ["Area", "emits less than ten", "4"],
            ["", "tons a year in all", ""],
            ["", "", "5"],
            ["Mobile", "cars and trucks", "7"]]
    path = tmp_path / "wrap.pdf"
    _cells_pdf(path, rows, xs)
    lines = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"].splitlines()
    assert "| Major | emits ten tons a year of any one toxic | 10 |" in lines, lines
    assert "| Area | emits less than ten tons a year in all | 4 |" in lines
    assert "|  |  | 5 |" in lines and "| Mobile | cars and trucks | 7 |" in lines


def test_section_row_over_columns_stays_a_row_and_a_heading_over_columns_joins_the_table(tmp_path):
    xs = [72, 200, 300, 400]
    rows = [["", "", "", ""],  # the "Year Ended" line, written below
            ["Source", "Type", "Tokens", "Words"],
            ["", "Pretraining mix of the first stage", "", ""],
            ["Web", "pages", "3.7T", "3.3T"],
            ["Code", "files", "83B", "70B"],
            ["Papers", "articles", "58B", "51B"],
            ["Math", "proofs", "12B", "11B"],
            ["Wiki", "entries", "3.7B", "3.1B"]]
    path = tmp_path / "section.pdf"
    _cells_pdf(path, rows, xs)
    doc = pymupdf.open(str(path))
    doc[0].insert_text((310, 120), "Year Ended", fontsize=10)  # over the number columns
    doc.saveIncr()
    lines = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"].splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert "| Source | Type | Tokens | Words |" in table, lines
    assert any("Year Ended" in line for line in table) and table[0].count("|") == 5
    assert "| Web | pages | 3.7T | 3.3T |" in table


def _html_at(page, x, y, text, size):
    page.insert_htmlbox(pymupdf.Rect(x, y, x + 200, y + 2 * size), f'<span style="font-size:{size}px">{text}</span>')


def _glyph_boxes(page, wanted, below):
    chars = [c for b in page.get_text("rawdict")["blocks"] for l in b.get("lines", ()) for s in l["spans"] for c in s["chars"]]
    return [c["bbox"] for c in chars if c["c"] in wanted and c["bbox"][1] >= below]


def test_scripts_and_fraction_halves_join_their_formula_line(tmp_path):
    """As HTML maths renderers lay them out: superscripts and the halves of a fraction are text
    objects of their own above and below the formula's baseline."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    _html_at(page, 72, 60, "Two laws of the page: the sides of a right triangle, and the curl of the field.", 11)
    _html_at(page, 100, 150, "a + b = c", 16)
    for x0, y0, x1, y1 in _glyph_boxes(page, "abc", 140):
        _html_at(page, x1, y0 - 5, "2", 10)  # raised, smaller
    _html_at(page, 100, 250, "∇× E = −", 16)
    x_end = max(x1 for _, _, x1, _ in _glyph_boxes(page, "−", 240))
    _html_at(page, x_end + 2, 236, "∂B", 16)  # numerator, above the baseline
    _html_at(page, x_end + 2, 264, "∂t", 16)  # denominator, below it
    path = tmp_path / "maths.pdf"
    doc.save(str(path))
    lines = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"].splitlines()
    squeeze = ["".join(line.split()) for line in lines]
    assert "a2+b2=c2" in squeeze, lines
    assert "∇×E=−∂B∂t" in squeeze, lines


def test_two_column_rows_that_share_baselines_are_not_a_table(tmp_path):
    """Short exercise lines on the left beside short list items on the right: rows with a wide gap,
    in columns, but the gap is the page's gutter that the prose above and below leaves free too."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    prose_l = [f"Left prose of the page, line {w}, goes on." for w in ("one", "two", "six", "ten")]
    prose_r = [f"Right prose of the page, line {w}, runs on." for w in ("one", "two", "six", "ten")]
    short_l = ["150. s(t) = 2t + 8", "151. s(t) = 2t3 - 15t2 + 36t - 10", "152. s(t) = t", "153. s(t) = 4t - 1"]
    short_r = ["a. Find the speed.", "b. Determine when the potato reaches its maximum", "c. Sketch s.",
               "d. Find the acceleration of the potato at 0.5 s and 1.5"]
    y = 100
    for block_l, block_r, shift in ((prose_l, prose_r, 7), (short_l, short_r, 0), (prose_l, prose_r, 7)):
        for a, b in zip(block_l, block_r):
            page.insert_text((72, y), a, fontsize=10)
            page.insert_text((315, y + shift), b, fontsize=10)  # prose: baselines apart
            y += 14
        y += 10
    path = tmp_path / "exercises.pdf"
    doc.save(str(path))
    text = extract_pdf({"path": str(path), "backend": "pymupdf"})["text"]
    assert "|" not in text, text
    flat = " ".join(text.split())
    assert flat.index(short_l[-1]) < flat.index(short_r[0])  # the left column first
