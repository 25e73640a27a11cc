"""filter.pii_ner: names and street addresses found by the spaCy model are masked (or counted);
places alone, other languages and null text are left as they are."""
from __future__ import annotations

import pyarrow as pa

from assay.filters.pii_ner import PiiNer

TEXTS = ["Please send the signed form to John Smith at 42 Baker Street, London NW1 6XE before Friday.",
         "The lease for 19344 Craig Walk, Burtontown, KY 59873 is signed by the tenant.",
         "Paris is the capital of France. The conference was held there in 2019.",
         "Bitte schicken Sie das Formular an Hans Müller, Hauptstraße 5, Berlin.",
         None]


def table():
    return pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS, "lang": ["en", "en", "en", "de", "en"]})


def test_names_and_addresses_masked():
    out = PiiNer({}).process(table())
    text = out.column("text").to_pylist()
    assert text[0] == "Please send the signed form to <NAME> at <ADDRESS> before Friday."
    assert text[1] == "The lease for <ADDRESS> is signed by the tenant."  # a street named like a person
    assert text[2:] == TEXTS[2:]  # a city alone is no address; German rows and nulls untouched
    counts = [dict(c) for c in out.column("pii_ner_counts").to_pylist()]
    assert counts[0] == {"name": 1, "address": 1} and counts[2] == {} and counts[3] == {}
    assert out.column("reject_reason").null_count == len(TEXTS)


def test_count_mode_and_types():
    out = PiiNer({"mode": "count", "types": ["name"]}).process(table())
    assert out.column("text").to_pylist() == TEXTS
    assert dict(out.column("pii_ner_counts").to_pylist()[0]) == {"name": 1}
