"""Rebuild the shipped models and calibration from the repository alone (`assay quality build-models`):

1. web.ftz: fastText, clean (label hq) vs full page / shuffled / spam (lq), quality/data/contrast-train;
2. lm.npz: the reference bigram LM on the clean rows of the same split;
3. edu.ftz: fastText on 0-5 grades from the offline teacher (annotate.heuristic_grades);
3b. reference.ftz (DCLM-style) and dsir.npz (DSIR): the train split of quality/data/reference.jsonl.gz
   (documentation and explanations, reference.py) against the raw web pool, the main text and full
   pages of contrast-train;
4. calibration.json: token-weighted percentiles of the default scores on a reference of
   quality/data/contrast-calib plus contrast-train scored out of fold, whose clean and junk halves weigh
   the same (so the top three tiers hold the better half), and of quality_code on the bundled sample's
   code files; the top-three cut-off is the bucket that best balances clean in the top three against
   junk in the bottom two on that reference.
Single-threaded training with fixed seeds: the same data gives the same files.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from assay.pipeline.dataset import atomic_write_text
from assay.pipeline.schema import make_docs

from .corpus import read_jsonl_gz
from .scorers import MODELS, approx_tokens

DATA = Path(__file__).resolve().parent / "data"
FOLDS = 5
ENSEMBLES = ("mean", "max", "min")  # tried on the calibration reference; ties keep the earlier
# The ensemble and the top-three cut-off are chosen on the calibration reference (calibration split +
# training split out of fold), by the worse of clean-in-top-three and junk-in-bottom-two; build() logs
# every candidate. Edu, heuristics and math stay columns for the mixer and for calibrations of your own.
scorers_used = ("fasttext", "lm")
# Value scorers: calibrated on the same reference, they order the documents the ensemble passes into
# the top three tiers (tiers.py); they do not vote on what is junk.
value_scorers = ("reference", "dsir")


RAW_KINDS = ("clean", "full")  # the raw pool's rows of the contrast sets: what a crawl holds, junk variants aside


def reference_rows(data: Path = DATA, split: str = "train") -> list[str]:
    return [r["text"] for r in read_jsonl_gz(data / "reference.jsonl.gz") if r["split"] == split]


def train_value_models(positives: list[str], raw: list[str], out: Path) -> None:
    """reference.ftz (positives `hq` against the raw pool `lq`) and dsir.npz (importance of the same target)."""
    from . import ftmodel
    from .dsir import Importance

    ftmodel.train(positives + raw, ["hq"] * len(positives) + ["lq"] * len(raw), out / "reference.ftz")
    Importance.train(positives, raw, "quality/data/reference.jsonl.gz (train split)").save(out / "dsir.npz")


def score_rows(rows: list[dict], models: Path = MODELS) -> pa.Table:
    """The default scorers' columns (no tiers) for contrast rows."""
    from .code_rules import CodeRules
    from assay.filters.rules import Rules
    from .scorers import DSIRScorer, FastTextScorer, LMScorer, MathScorer
    from assay.filters.signals import Signals

    table = make_docs([{"text": r["text"], "source": r.get("kind", "x"), "url": r.get("url") or None,
                        "content_type": r.get("content_type", "web")} for r in rows])
    parts = [Signals(), Rules(), CodeRules(), FastTextScorer({"model": str(models / "web.ftz"), "name": "fasttext"}),
             FastTextScorer({"model": str(models / "edu.ftz"), "name": "edu"}), LMScorer({"model": str(models / "lm.npz")}),
             MathScorer(), FastTextScorer({"model": str(models / "reference.ftz"), "name": "reference"}),
             DSIRScorer({"model": str(models / "dsir.npz")})]
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


def reference(calib: list[dict], train: list[dict], models: Path, log=print,
              positives: list[str] | None = None) -> tuple[pa.Table, np.ndarray]:
    """The calibration reference: the calibration split scored by the shipped models, plus the training
    split scored out of fold (FOLDS models by page, each scoring the pages it never saw), so the
    percentiles rest on every committed page without in-sample scores."""
    import shutil
    import tempfile

    from . import ftmodel
    from .lm import NgramLM

    tables, labels = [score_rows(calib, models)], [r["label"] for r in calib]
    fold = {r["page"]: int(hashlib.sha256(r["page"].encode()).hexdigest(), 16) % FOLDS for r in train}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(FOLDS):
            fit = [r for r in train if fold[r["page"]] != k]
            held = [r for r in train if fold[r["page"]] == k]
            part = Path(tmp) / str(k)
            ftmodel.train([r["text"] for r in fit], ["hq" if r["label"] else "lq" for r in fit], part / "web.ftz")
            NgramLM.train_calibrated([r["text"] for r in fit if r["label"]]).save(part / "lm.npz")
            shutil.copy(models / "edu.ftz", part / "edu.ftz")  # not calibrated: the shipped one will do
            if positives is None:
                for name in ("reference.ftz", "dsir.npz"):
                    shutil.copy(models / name, part / name)
            else:  # the raw pool's rows of this fold left out of the value models' negatives
                train_value_models(positives, [r["text"] for r in fit if r["kind"] in RAW_KINDS], part)
            tables.append(score_rows(held, part))
            labels += [r["label"] for r in held]
            log(f"  fold {k}: {len(held)} training rows scored out of fold")
    return pa.concat_tables(tables), np.array(labels)


def balanced_cutoffs(table: pa.Table, labels: np.ndarray, calibration: dict) -> tuple[float, dict[str, int]]:
    """(the worse share, cut-offs): the default cut-offs with the top-three boundary (Medium) moved to
    the bucket that best balances clean documents in the top three tiers against junk in the bottom two
    on the reference (ties: the bucket nearest the default)."""
    from .tiers import DEFAULT_CUTOFFS, TierOptions, assign

    best: tuple | None = None
    for medium in range(DEFAULT_CUTOFFS["Medium-Low"] + 1, DEFAULT_CUTOFFS["Medium-High"]):
        cut = {**DEFAULT_CUTOFFS, "Medium": medium}
        _, _, tier, _ = assign(table, calibration, TierOptions(cutoffs=cut))
        worst = min((tier[labels == 1] <= 2).mean(), (tier[labels == 0] >= 3).mean())
        key = (round(float(worst), 6), -abs(medium - DEFAULT_CUTOFFS["Medium"]))
        if best is None or key > best[0]:
            best = (key, cut)
    return best[0][0], best[1]


# What build() writes into its folder (and all a folder given to `build-models --out` may hold;
# NOTICE is the package folder's own).
BUILT = frozenset({"web.ftz", "lm.npz", "edu.ftz", "calibration.json", "NOTICE"})


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
    positives = reference_rows(data)
    raw = [r["text"] for r in train if r["kind"] in RAW_KINDS]
    train_value_models(positives, raw, out)
    log(f"reference.ftz, dsir.npz: {len(positives)} reference pages against {len(raw)} raw web rows")
    calib = read_jsonl_gz(data / "contrast-calib.jsonl.gz")
    table, labels = reference(calib, train, out, log, positives)
    weights = balanced_weights(table, labels)
    state = fit_histograms(table, list(scorers_used + value_scorers), None, weights=weights)
    code_rows = _code_rows(out)
    code_state = fit_histograms(code_rows, ["code"], None)  # code is scored on code files only
    code_state.pop(JOINT)  # the ensemble's percentiles stay those of the balanced web reference
    best: tuple | None = None
    for method in ENSEMBLES:
        candidate = make_calibration([state, code_state], method, scorers=list(scorers_used + value_scorers) + ["code"],
                                     value=list(value_scorers))
        worst, candidate["cutoffs"] = balanced_cutoffs(table, labels, candidate)
        log(f"ensemble {method}: worse of clean top three / junk bottom two on the reference {worst:.4f}")
        if best is None or worst > best[0]:
            best = (worst, candidate)
    calibration = best[1]
    calibration["reference"] = {"rows": table.num_rows, "clean_rows": int(labels.sum()),
                                "source": "quality/data/contrast-calib.jsonl.gz, and contrast-train.jsonl.gz scored out of fold",
                                "weighting": "tokens, clean and junk halves equal"}
    atomic_write_text(out / "calibration.json", json.dumps(calibration, sort_keys=True) + "\n")
    log(f"calibration.json: {table.num_rows} reference rows, scorers {sorted(calibration['scorers'])}, "
        f"ensemble {calibration['ensemble']}, cut-offs {calibration['cutoffs']}")
    return calibration


def _code_rows(models: Path) -> pa.Table:
    """The bundled sample's Python files (examples/sample/code) as the code scorer's reference."""
    from .code_rules import CodeRules

    root = Path(__file__).resolve().parents[1] / "examples" / "sample" / "code"
    rows = [{"text": p.read_text(encoding="utf-8"), "source": "code", "content_type": "code", "url": str(p.relative_to(root))}
            for p in sorted(root.rglob("*.py"))]
    return CodeRules().process(make_docs(rows))
