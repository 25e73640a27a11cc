"""Rebuild the shipped models and calibration from the repository alone (`assay quality build-models`):

1. web.ftz: fastText, clean (label hq) vs full page / shuffled / spam (lq), quality/data/contrast-train;
2. lm.npz: the reference bigram LM on the clean rows of the same split;
3. edu.ftz: fastText on 0-5 grades from the offline teacher (annotate.heuristic_grades);
4. calibration.json: token-weighted percentiles of the default scores on quality/data/contrast-calib,
   whose clean and junk halves weigh the same (so the top three tiers hold the better half), and of
   quality_code on the bundled sample's code files.
Single-threaded training with fixed seeds: the same data gives the same files.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from assay.pipeline.dataset import atomic_write_text
from assay.pipeline.schema import make_docs

from .corpus import read_jsonl_gz
from .scorers import MODELS, approx_tokens

DATA = Path(__file__).resolve().parent / "data"
ENSEMBLE = "mean"  # chosen on the calibration split: max let full pages through (see README)
scorers_used = ("fasttext", "lm")  # the discriminative pair; edu, heuristics and math stay columns


def score_rows(rows: list[dict], models: Path = MODELS) -> pa.Table:
    """The default scorers' columns (no tiers) for contrast rows."""
    from .code_rules import CodeRules
    from assay.filters.rules import Rules
    from .scorers import FastTextScorer, LMScorer, MathScorer
    from assay.filters.signals import Signals

    table = make_docs([{"text": r["text"], "source": r.get("kind", "x"), "url": r.get("url") or None,
                        "content_type": r.get("content_type", "web")} for r in rows])
    parts = [Signals(), Rules(), CodeRules(), FastTextScorer({"model": str(models / "web.ftz"), "name": "fasttext"}),
             FastTextScorer({"model": str(models / "edu.ftz"), "name": "edu"}), LMScorer({"model": str(models / "lm.npz")}),
             MathScorer()]
    for part in parts:
        table = part.process(table)
    return table


def balanced_weights(table: pa.Table, labels: np.ndarray) -> np.ndarray:
    """Token weights rescaled so clean and junk rows weigh the same in total."""
    tokens = approx_tokens(table)
    w = tokens.copy()
    for value in (0, 1):
        sel = labels == value
        w[sel] *= tokens.sum() / 2 / max(tokens[sel].sum(), 1)
    return w


def build(out: Path = MODELS, data: Path = DATA, log=print) -> dict:
    from . import ftmodel
    from .annotate import heuristic_grades
    from .lm import NgramLM
    from .tiers import JOINT, fit_histograms, make_calibration

    out.mkdir(parents=True, exist_ok=True)
    train = read_jsonl_gz(data / "contrast-train.jsonl.gz")
    texts = [r["text"] for r in train]
    ftmodel.train(texts, ["hq" if r["label"] else "lq" for r in train], out / "web.ftz")
    log(f"web.ftz: {len(train)} rows")
    NgramLM.train_calibrated([r["text"] for r in train if r["label"]]).save(out / "lm.npz")
    log("lm.npz: clean rows")
    from . import scorers

    saved = dict(scorers.SHIPPED)
    scorers.SHIPPED.update({"lm": out / "lm.npz"})
    try:
        grades = heuristic_grades(texts)
    finally:
        scorers.SHIPPED.clear()
        scorers.SHIPPED.update(saved)
    ftmodel.train(texts, [str(g) for g in grades], out / "edu.ftz")
    log(f"edu.ftz: grades {np.bincount(grades, minlength=6).tolist()}")
    calib = read_jsonl_gz(data / "contrast-calib.jsonl.gz")
    table = score_rows(calib, out)
    labels = np.array([r["label"] for r in calib])
    weights = balanced_weights(table, labels)
    state = fit_histograms(table, list(scorers_used), None, weights=weights)
    code_rows = _code_rows(out)
    code_state = fit_histograms(code_rows, ["code"], None)  # code is scored on code files only
    code_state.pop(JOINT)  # the ensemble's percentiles stay those of the balanced web reference
    calibration = make_calibration([state, code_state], ENSEMBLE, scorers=list(scorers_used) + ["code"])
    calibration["reference"] = {"rows": len(calib), "clean_rows": int(labels.sum()), "source": "quality/data/contrast-calib.jsonl.gz",
                                "weighting": "tokens, clean and junk halves equal"}
    atomic_write_text(out / "calibration.json", json.dumps(calibration, sort_keys=True) + "\n")
    log(f"calibration.json: {len(calib)} rows, scorers {sorted(calibration['scorers'])}")
    return calibration


def _code_rows(models: Path) -> pa.Table:
    """The bundled sample's Python files (examples/sample/code) as the code scorer's reference."""
    from .code_rules import CodeRules

    root = Path(__file__).resolve().parents[1] / "examples" / "sample" / "code"
    rows = [{"text": p.read_text(encoding="utf-8"), "source": "code", "content_type": "code", "url": str(p.relative_to(root))}
            for p in sorted(root.rglob("*.py"))]
    return CodeRules().process(make_docs(rows))
