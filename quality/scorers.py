"""Fast quality scorers: each a map stage writing `quality_<name>` in [0, 1] (higher is better) and
deciding nothing. Models load in setup() once per worker and are released in teardown().

Shipped models (quality/models/, rebuilt by `assay quality build-models`):
* `web.ftz`: fastText, clean main content vs full pages, shuffled words and keyword spam (DCLM-style);
* `edu.ftz`: fastText distilled from graded labels (`assay quality annotate`, FineWeb-Edu recipe);
* `lm.npz`: the reference bigram language model (lm.py), CCNet-style;
* `reference.ftz`: fastText, reference-like text (documentation and explanations, reference.py) vs the
  raw web pool, DCLM's recipe: a value signal, where web.ftz is a junk detector;
* `dsir.npz`: importance towards the same reference target vs the raw pool (dsir.py, DSIR).
The heuristic pass fraction (`filter.rules`) and code quality (`quality.code_rules`) are the other two
default scorers; `quality.math` is math/STEM density.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline.errors import UserError
from assay.pipeline.stage import MapStage, NoParams, Params, register, set_column, with_rejects

from assay.filters import textops as T

MODELS = Path(__file__).resolve().parent / "models"
SHIPPED = {"web": MODELS / "web.ftz", "edu": MODELS / "edu.ftz", "lm": MODELS / "lm.npz",
           "reference": MODELS / "reference.ftz", "dsir": MODELS / "dsir.npz"}
SCORE_EDGES = [i / 20 for i in range(21)]


def resolve_model(value: str) -> Path:
    """A shipped model's name (web, edu, lm, reference, dsir) or a path. Recipes and the CLI turn every path param into
    an absolute path, so a bare shipped name arrives as <dir>/<name>: its last part decides. A URL
    (s3://...) is read from its local copy (pipeline/storage.py), made once per object version."""
    from assay.pipeline import storage

    if storage.is_url(value):
        if not storage.is_file(value):
            raise UserError(f"model {value!r} not found (no such object)")
        return storage.local_file(value)
    path = Path(value)
    if not path.exists() and path.name in SHIPPED:
        path = SHIPPED[path.name]
    if not path.exists():
        raise UserError(f"model {value!r} not found (shipped: {', '.join(SHIPPED)}; or give a file path)")
    return path


def _put(stage: MapStage, table: pa.Table, column: str, values: np.ndarray) -> pa.Table:
    values = np.clip(np.nan_to_num(values, nan=0.0), 0, 1).astype(np.float32)
    stage.stats.histogram(column, values, SCORE_EDGES)
    stage.stats.sketch(column, values)
    return set_column(table, column, pa.array(values, pa.float32()))


class FastTextParams(Params):
    model: str = Field("web", description="Shipped model name (web, edu, reference) or a .bin/.ftz path from `assay quality train`")
    name: str = Field("fasttext", pattern=r"^[a-z][a-z0-9_]*$", description="Writes quality_<name>")
    positive: str = Field("hq", description="The positive label of a binary model (graded models use the expected grade)")
    max_chars: int = Field(20_000, ge=1, description="Judge each document by its first max_chars characters (the "
                           "shipped models were trained on the same 20,000-character heads); a shorter head scores "
                           "faster, in proportion, but drops what comes after it, often the footer and link lists "
                           "that tell a full page from its main text (benchmarks/quality.py measures the agreement)")


@register("quality.fasttext")
class FastTextScorer(MapStage):
    """Score documents with a fastText classifier: quality_<name> = P(positive) or expected grade / max.

    Example: assay quality fasttext runs/x/in runs/x/scored --model my_model.ftz --name dclm
    """

    Params = FastTextParams
    reads = {"model": "file"}
    requires = ("fasttext_new",)
    batch_rows = 10_000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.columns = {f"quality_{self.params.name}": pa.float32()}

    def read_files(self) -> dict[str, list[str]]:
        return {"model": [str(resolve_model(self.params.model))]}  # a shipped name: the shipped file

    def setup(self) -> None:
        from .ftmodel import Classifier

        self.model = Classifier(resolve_model(self.params.model))

    def teardown(self) -> None:
        self.model = None

    def scores(self, text: pa.Array) -> np.ndarray:
        return self.model.score(text, self.params.positive, self.params.max_chars)

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        table = _put(self, table, f"quality_{self.params.name}", self.scores(T.text_column(table)))
        return with_rejects(table, [None] * table.num_rows)


class LMParams(Params):
    model: str = Field("lm", description="Shipped reference model (lm) or an .npz from `assay quality build-models`")


@register("quality.lm")
class LMScorer(MapStage):
    """Reference language-model score (CCNet-style): how much a bigram model trained on clean prose lowers
    the text's perplexity against its unigram model, squashed to quality_lm in [0, 1].

    Example: assay quality lm runs/x/in runs/x/scored
    """

    Params = LMParams
    reads = {"model": "file"}
    columns = {"quality_lm": pa.float32()}
    batch_rows = 10_000

    def read_files(self) -> dict[str, list[str]]:
        return {"model": [str(resolve_model(self.params.model))]}

    def setup(self) -> None:
        from .lm import NgramLM

        self.model = NgramLM.load(resolve_model(self.params.model))

    def teardown(self) -> None:
        self.model = None

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        table = _put(self, table, "quality_lm", self.model.score(T.text_column(table)))
        return with_rejects(table, [None] * table.num_rows)


class DSIRParams(Params):
    model: str = Field("dsir", description="Shipped importance model (dsir) or an .npz from dsir.Importance.save")


@register("quality.dsir")
class DSIRScorer(MapStage):
    """Importance towards a target distribution (DSIR / Moore-Lewis): the log-likelihood ratio per token
    of hashed word and bigram bag models, target against raw pool, squashed to quality_dsir in [0, 1].
    The shipped target is documentation and explanatory prose (quality/data/reference.jsonl.gz), never
    an evaluation item.

    Example: assay quality dsir runs/x/in runs/x/scored
    """

    Params = DSIRParams
    reads = {"model": "file"}
    columns = {"quality_dsir": pa.float32()}
    batch_rows = 10_000

    def read_files(self) -> dict[str, list[str]]:
        return {"model": [str(resolve_model(self.params.model))]}

    def setup(self) -> None:
        from .dsir import Importance

        self.model = Importance.load(resolve_model(self.params.model))

    def teardown(self) -> None:
        self.model = None

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        table = _put(self, table, "quality_dsir", self.model.score(T.text_column(table)))
        return with_rejects(table, [None] * table.num_rows)


STEM_TERMS = (r"(?i)\b(theorem|lemma|proof|equation|integral|derivative|matrix|vector|eigen\w*|probability|"
              r"variance|algorithm|polynomial|function|variable|hypothesis|experiment|molecule|protein|enzyme|"
              r"electron|quantum|velocity|acceleration|energy|entropy|theory|coefficient|logarithm|calculus|"
              r"algebra|geometry|statistics|physics|chemistry|biology|formula|compute|solve|prove)\b")
MATH_MARKUP = r"\\[A-Za-z]+|\$[^$\n]{1,200}\$|[∑∫√≤≥≠±×÷∞∂∇∈∀∃≈∝]|\b[a-z]\s*[=^]\s*[-\w(]"


def math_scores(text: pa.Array) -> np.ndarray:
    """Math/STEM density in [0, 1]: markup and STEM vocabulary per 100 words, saturating."""
    words = T.count(text, r"\S+")
    density = T.ratio(T.count(text, MATH_MARKUP) * 2 + T.count(text, STEM_TERMS), words) * 100
    return 1 - np.exp(-density / 6)


@register("quality.math")
class MathScorer(MapStage):
    """Math/STEM density: quality_math in [0, 1] from LaTeX and math symbols, formulas and STEM terms
    per 100 words (about 0.5 at 4 per 100 words).

    Example: assay quality math runs/x/in runs/x/scored
    """

    Params = NoParams
    columns = {"quality_math": pa.float32()}

    def process(self, table: pa.Table) -> pa.Table:
        table = _put(self, table, "quality_math", math_scores(T.text_column(table)))
        return with_rejects(table, [None] * table.num_rows)


def approx_tokens(table: pa.Table) -> np.ndarray:
    """Tokens for weighting: bytes / 4, the usual BPE ratio for English (no tokenizer needed)."""
    return np.maximum(T._np(pc.binary_length(T.text_column(table))).astype(np.float64) / 4, 1)
