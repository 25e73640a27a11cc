"""The contrast check: with a calibration, where do clean pages and junk versions of them land?

`contrast(rows)` scores rows {text, kind, label} with the default scorers, tiers them and reports, per
kind, the share in the top three tiers (clean should be there) and in the bottom two (junk should).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from .tiers import TIERS, TierOptions, assign, load_calibration

TOP3 = set(TIERS[:3])


def contrast(rows: list[dict], calibration: str = "default", **options) -> dict:
    from .build import score_rows

    table = score_rows(rows)
    _, _, tier, used = assign(table, load_calibration(calibration), TierOptions(**options))
    kinds = np.array([r["kind"] for r in rows])
    out: dict = {"scorers": used, "ensemble": options.get("ensemble") or load_calibration(calibration).get("ensemble"), "kinds": {}}
    for kind in sorted(set(kinds)):
        sel = kinds == kind
        t = tier[sel]
        out["kinds"][kind] = {"docs": int(sel.sum()), "top3": round(float((t <= 2).mean()), 4),
                              "bottom2": round(float((t >= 3).mean()), 4),
                              "tiers": dict(sorted(Counter(TIERS[i] for i in t).items()))}
    clean = kinds == "clean"
    out["clean_top3"] = round(float((tier[clean] <= 2).mean()), 4)
    out["junk_bottom2"] = round(float((tier[~clean] >= 3).mean()), 4)
    return out
