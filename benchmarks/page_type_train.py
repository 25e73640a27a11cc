"""Train `extractors/page_type.json`, the page-type tagger's logistic model, on the tune split of the
WCXB dev sample (benchmarks/wcxb.py), and report its macro F1 on both splits (the check split is
never trained on). Run: python benchmarks/page_type_train.py"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wcxb  # noqa: E402

from assay.extractors.html import extract_html  # noqa: E402

OUT = wcxb.ROOT / "extractors" / "page_type.json"


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    pages = wcxb.load_pages("all")
    feats = {pid: extract_html({"html": pg["html"], "page_type_features": True})["page_type_features"]
             for pid, pg in pages.items()}
    names = sorted(next(iter(feats.values())))
    tune = [pid for pid in pages if pages[pid]["split"] == "tune"]
    x = np.array([[feats[pid][n] for n in names] for pid in tune])
    y = [pages[pid]["type"] for pid in tune]
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    best = None
    for c in (0.003, 0.01, 0.03, 0.1):  # picked by 5-fold cross-validation on the tune split only
        from sklearn.model_selection import cross_val_score

        score = cross_val_score(LogisticRegression(C=c, max_iter=3000), (x - mean) / scale, y, cv=5,
                                scoring="f1_macro").mean()
        print(f"C={c}: cross-validated macro F1 {score:.3f}")
        if best is None or score > best[0]:
            best = (score, c)
    model = LogisticRegression(C=best[1], max_iter=3000).fit((x - mean) / scale, y)
    OUT.write_text(json.dumps({
        "about": "page-type tagger (extractors/page_type.py): multinomial logistic regression over structural "
                 "features, trained by benchmarks/page_type_train.py on the WCXB dev sample's tune split",
        "C": best[1], "classes": list(model.classes_), "features": names,
        "mean": [round(float(v), 6) for v in mean], "scale": [round(float(v), 6) for v in scale],
        "coef": [[round(float(v), 5) for v in row] for row in model.coef_],
        "intercept": [round(float(v), 5) for v in model.intercept_], "min_probability": 0.0,
    }, indent=1))
    import importlib

    from assay.extractors import page_type
    importlib.reload(page_type)
    tags = {pid: page_type.classify(f) for pid, f in feats.items()}
    result = wcxb.page_type_scores(pages, tags)
    for split in ("tune", "check", "ALL"):
        r = result[split]
        print(f"{split:6} macro F1 {r['macro_f1']:.3f} accuracy {r['accuracy']:.3f} ({r['pages']} pages) "
              + " ".join(f"{k[:5]} {v:.2f}" for k, v in r["per_type_f1"].items()))
    print(f"wrote {OUT.relative_to(wcxb.ROOT)}")


if __name__ == "__main__":
    main()
