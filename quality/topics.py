"""`quality.topics`: `topic` and `format` tags on a WebOrganizer-style taxonomy, with site and
category shares in the statistics so the mixer can cap over-represented ones. It writes only its own
columns: `domain` (the site, set by extraction) is left as it is.

Offline default: nearest prototype under all-MiniLM-L6-v2 (embed.py) of the document's first
`max_tokens` tokens, a prototype being a label's description (Assay's own words, below) averaged with
the embeddings of labelled examples. The shipped examples (quality/data/topic-seeds.jsonl.gz, made by
reference.py) are documentation pages of seven software projects labelled software_dev: on
descriptions alone, documentation was tagged adult, fashion_beauty or travel (on 120 held-out
documentation pages: 81.7% software_dev or software, 4 adult/fashion_beauty; with the seeds 98.3%, none).
A team's own labels (`--labels my.jsonl`: text and a `topic` and/or `format` field) add examples, and
labels of their own. Replaceable by trained classifiers: `--model` / `--format-model` take a fastText
model whose labels are the slugs (`assay quality train topics.ftz --labelled tagged.jsonl --label-key
topic`), which runs at fastText speed instead of MiniLM's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.filters import textops as T
from assay.pipeline.errors import UserError
from assay.pipeline.stage import MapStage, Params, Task, add_columns, register, set_column, with_rejects

from .scorers import approx_tokens

TOPICS: dict[str, str] = {
    "adult": "Explicit sex: porn videos, nude girls, naked models, sex cams, escorts and erotic adult chat.",
    "art_design": "Art and design: painting, sculpture, photography, museums, galleries, graphic and interior design.",
    "software_dev": "Programming and source code: def function return, import, class, variables, Python, JavaScript, debugging and compilers.",
    "crime_law": "Crime and law: the court, the judge and the jury, lawsuits, police arrests, criminal charges, lawyers and legal rights.",
    "education_jobs": "Education and jobs: schools, universities, teaching, students, careers, hiring and job applications.",
    "hardware": "Computer hardware and electronics: processors, graphics cards, laptops, phones, circuits and devices.",
    "entertainment": "Entertainment: movies, television shows, music, celebrities, concerts and streaming.",
    "social_life": "Social life: friendship, relationships, parenting, weddings, family and everyday personal life.",
    "fashion_beauty": "Fashion and beauty: clothing, style, makeup, skincare, hair and accessories.",
    "finance_business": "Finance and business: companies, markets, stocks, banking, investing, money and the economy.",
    "food_dining": "Food and dining: recipes, cooking, ingredients, baking, restaurants and drinks.",
    "games": "Games: video games, board games, gaming consoles, players, levels and esports.",
    "health": "Health and medicine: diseases, symptoms, treatment, doctors, hospitals, nutrition and mental health.",
    "history": "History: past centuries, ancient civilisations, wars, empires, kings and historical events.",
    "home_hobbies": "Home and hobbies: gardening, DIY, home improvement, crafts, pets and collecting.",
    "industrial": "Industry: manufacturing, construction, energy, mining, agriculture, factories and engineering plants.",
    "literature": "Literature: a novel and its author, poetry, books, chapters, literary criticism and reading.",
    "politics": "Politics: government, elections, political parties, policy, diplomacy and public affairs.",
    "religion": "Religion and spirituality: God, faith, church, scripture, prayer and religious traditions.",
    "science_tech": "Science and technology: physics, chemistry, biology, mathematics, research, experiments and theories.",
    "software": "Software products and the internet: apps, websites, operating systems, online services and how to use them.",
    "sports_fitness": "Sports and fitness: the team won the match, the player scored a goal, league season, coach, football, tennis, athletes, workouts.",
    "transportation": "Transportation: cars, vehicles, trains, aviation, shipping, roads and traffic.",
    "travel": "Travel and tourism: destinations, hotels, trips, sightseeing, flights and vacations.",
}

FORMATS: dict[str, str] = {
    "academic_writing": "Abstract. In this paper we propose a method; experiments and results show; related work [1]; conclusion and references.",
    "content_listing": "Home | Categories | Latest posts | Archives: links to article titles, tags, page 1 2 3 next, search results.",
    "creative_writing": "Once upon a time she walked into the dark forest, and he whispered; a short story, fiction, a poem with verses.",
    "customer_support": "Need help? Contact customer service to reset your password, track your order, request a refund or troubleshoot your account.",
    "comment_section": "Comments: great post, thanks for sharing! Reply. Posted by user 3 hours ago. I disagree. Reply. Like.",
    "faq": "Frequently asked questions. Q: How do I ...? A: You can ... Q: What is ...? A: It is ...",
    "truncated": "A short fragment of a page cut off mid-sentence ... read more, continue reading.",
    "knowledge_article": "An encyclopedia article: the subject is defined, its history, characteristics and classification explained neutrally, like Wikipedia.",
    "legal_notices": "Terms of service and privacy policy: by using this site you agree; we use cookies; disclaimer; all rights reserved; license.",
    "listicle": "Top 10 best tips: 1. first item, 2. second item, 3. third item; here are seven reasons why you should.",
    "news_article": "News report: officials said on Tuesday, according to a statement; the minister told reporters; police reported; the vote was held yesterday.",
    "nonfiction_writing": "An essay or opinion column: I argue that our society should reconsider; long-form commentary and reflection on an idea.",
    "about_org": "About us: our company was founded in 2005; our mission, our team and the services we offer to clients.",
    "news_org": "Press release: the company today announced the launch of its new product and a partnership; for media inquiries contact.",
    "about_personal": "About me: I am a designer and photographer based in London; my biography, resume, skills and portfolio.",
    "personal_blog": "My blog post: last weekend I went with my kids, and honestly I loved it; in this post I share my experience.",
    "product_page": "Product details: price $29.99, add to cart, in stock, free shipping, specifications, size, color, customer rating.",
    "qa_forum": "Question asked by a user in a forum thread: how do I fix this error? Answer: try this. Accepted answer, upvotes.",
    "spam_ads": "Buy cheap pills online best price casino bonus click here free download win money now keyword keyword.",
    "structured_data": "Table of data: name, date, value, score; rows of statistics, records, schedules and numeric fields.",
    "documentation": "API reference documentation: parameters, return value, type, default, example usage of the function and its options.",
    "audio_transcript": "Transcript: HOST: Welcome to the podcast. GUEST: Thanks for having me. [laughter] Interview, speech or video transcript.",
    "tutorial": "How-to tutorial: step 1, open the settings; step 2, click; then add the ingredients and follow these step by step instructions.",
    "user_review": "My review: 4 out of 5 stars; I bought this product and the quality is good, pros and cons, would recommend.",
}


class TopicsParams(Params):
    model: str = Field("minilm", description="'minilm' (zero-shot over the topic descriptions) or a fastText topic model path")
    format_model: str = Field("minilm", description="'minilm' (zero-shot over the format descriptions) or a fastText format model path")
    max_tokens: int = Field(128, ge=8, le=512, description="MiniLM reads the first this many tokens of each document")
    min_site_docs: int = Field(2, ge=1, description="Sites with fewer documents in a batch are counted together as site._other")
    labels: str = Field("default", description="Labelled examples (JSON Lines or a dataset: text, and a topic and/or format "
                        "field) averaged into the zero-shot prototypes; new label names become labels. 'default': the "
                        "shipped documentation seeds; 'none': descriptions alone")


SEEDS = Path(__file__).resolve().parent / "data" / "topic-seeds.jsonl.gz"


def labelled_examples(value: str, field: str) -> dict[str, list[str]]:
    """label -> example texts from the `labels` param's rows that have `field`."""
    if Path(value).name == "none" and not Path(value).exists():
        return {}
    if Path(value).name == "default" and not Path(value).exists():  # path params arrive made absolute
        value = str(SEEDS)
    from .commands import _read_texts

    out: dict[str, list[str]] = {}
    for row in _read_texts(value):
        if row.get(field):
            out.setdefault(str(row[field]), []).append(row["text"])
    return out


class _ZeroShot:
    """Nearest prototype under the shared encoder: a label's description, averaged with its examples."""

    def __init__(self, encoder, labels: dict[str, str], examples: dict[str, list[str]] | None = None):
        examples = examples or {}
        self.names = list(labels) + sorted(set(examples) - set(labels))
        self.encoder = encoder
        described = encoder.encode(list(labels.values()))
        vectors = []
        for i, name in enumerate(self.names):
            parts = ([described[i]] if name in labels else []) + list(encoder.encode(examples[name]) if name in examples else [])
            v = np.sum(parts, axis=0) / len(parts)
            vectors.append(v / max(np.linalg.norm(v), 1e-12))
        vectors = np.array(vectors)
        # Centred: what the prototypes share (that they describe web pages) decides nothing.
        self.vectors = vectors - vectors.mean(axis=0)

    def predict(self, text: pa.Array, doc_vectors: np.ndarray | None) -> list[str]:
        sims = doc_vectors @ self.vectors.T
        return [self.names[i] for i in sims.argmax(axis=1)]


class _FastText:
    def __init__(self, path: Path):
        from .ftmodel import Classifier

        self.classifier = Classifier(path)

    def predict(self, text: pa.Array, doc_vectors: np.ndarray | None) -> list[str]:
        probs = self.classifier.probabilities(text)
        return [self.classifier.labels[i] for i in probs.argmax(axis=1)] if len(probs) else []


def sites(table: pa.Table) -> np.ndarray:
    """The host of each document's url, lower-case and without www. ('' when there is none)."""
    if "url" not in table.column_names:
        return np.full(table.num_rows, "", dtype=object)
    url = pc.utf8_lower(pc.fill_null(table.column("url"), ""))
    host = pc.struct_field(pc.extract_regex(url, r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^@/]*@)?(?P<host>[^/:?#]*)"), [0])
    host = pc.replace_substring_regex(pc.fill_null(host, ""), r"^www\d?\.", "")
    return T._np(host)


@register("quality.topics")
class Topics(MapStage):
    """Tag each document's `topic` and `format` on a WebOrganizer-style taxonomy of 24 topics and 24
    formats: by MiniLM embedding similarity to label prototypes (descriptions averaged with labelled
    examples, `--labels`; offline), or with trained fastText classifiers. Leaves `domain` alone. Statistics: documents and tokens per topic and format, documents per
    site, for the mixer's caps. Drops nothing.

    With inputs `[documents, embeddings]` (a semantic.embed output of all-MiniLM-L6-v2) it tags from
    the stored vectors instead of encoding the documents again.

    Example: assay quality topics runs/x/tiered runs/x/tagged
    """

    Params = TopicsParams
    version = "2"  # 2: writes `topic` (not `domain`); prototypes from labelled examples
    reads = {"model": "file", "format_model": "file", "labels": "file"}
    columns = {"topic": pa.string(), "format": pa.string()}
    batch_rows = 1_000

    def read_files(self) -> dict[str, list[str]]:
        from assay.semantic.model import model_path

        files = {name: [model_path(None) if Path(value).name == "minilm" else value]
                 for name, value in (("model", self.params.model), ("format_model", self.params.format_model))}
        labels = self.params.labels
        if not (Path(labels).name == "none" and not Path(labels).exists()):
            files["labels"] = [str(SEEDS) if Path(labels).name == "default" and not Path(labels).exists() else labels]
        return files

    def setup(self) -> None:
        from assay.pipeline import storage

        encoder = None
        self.taggers = []
        for value, labels, field in ((self.params.model, TOPICS, "topic"), (self.params.format_model, FORMATS, "format")):
            if Path(value).name == "minilm" and not Path(value).exists():  # path params arrive made absolute
                if encoder is None:
                    from .embed import MiniLM

                    encoder = MiniLM(max_tokens=self.params.max_tokens)
                self.taggers.append(_ZeroShot(encoder, labels, labelled_examples(self.params.labels, field)))
            elif storage.is_file(value):  # a file, or a URL read from its local copy
                self.taggers.append(_FastText(storage.local_file(value)))
            else:
                raise UserError(f"topic model {value!r}: give 'minilm' or a fastText model file")
        self.encoder = encoder

    def teardown(self) -> None:
        self.taggers, self.encoder = [], None

    # Inputs `[documents, embeddings]` (a semantic.embed side dataset of the same model): the zero-shot
    # taggers read the stored vectors instead of encoding every document again.
    @staticmethod
    def _with_embeddings(schemas: Sequence[pa.Schema]) -> bool:
        return len(schemas) == 2 and "embedding" in schemas[1].names and "text" not in schemas[1].names

    def tasks(self, inputs: Sequence) -> list[Task]:
        if not self._with_embeddings([ds.schema for ds in inputs]):
            return super().tasks(inputs)
        from assay.semantic.side import WithEmbeddings

        return [Task(t.index, t.inputs, (("embeddings", True),)) for t in WithEmbeddings.tasks(self, inputs)]

    def output_schema(self, input_schemas: Sequence[pa.Schema]) -> pa.Schema:
        if self._with_embeddings(input_schemas):
            return add_columns(input_schemas[0], self.columns)
        return super().output_schema(input_schemas)

    def read_batches(self, task: Task, writer) -> Iterator[pa.Table]:
        self._stored = bool(task.get("embeddings"))
        if self._stored:
            from assay.semantic.side import WithEmbeddings

            yield from WithEmbeddings.read_batches(self, task, writer)  # sets self.batch_vectors per batch
        else:
            yield from super().read_batches(task, writer)

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        text = T.text_column(table)
        if getattr(self, "_stored", False):
            vectors = self.batch_vectors
            if self.encoder is not None and len(vectors) and vectors.shape[1] != self.encoder.dim:
                raise UserError(f"stage {self.stage_id!r}: the stored embeddings have {vectors.shape[1]} dimensions, "
                                f"the topic model {self.encoder.dim}: embed with the same model (all-MiniLM-L6-v2)")
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        else:
            vectors = self.encoder.encode(text.to_pylist()) if self.encoder is not None else None
        tokens = approx_tokens(table)
        for column, tagger in zip(("topic", "format"), self.taggers):
            labels = np.array(tagger.predict(text, vectors), dtype=object)
            table = set_column(table, column, pa.array(labels, pa.string()))
            for name in np.unique(labels):
                sel = labels == name
                self.stats.count(f"{column}_docs.{name}", int(sel.sum()))
                self.stats.count(f"{column}_tokens.{name}", float(tokens[sel].sum()))
        hosts = sites(table)
        names, counts = np.unique(hosts, return_counts=True)
        other = 0
        for name, count in zip(names, counts):
            if name and count >= self.params.min_site_docs:
                self.stats.count(f"site_docs.{name}", int(count))
            else:
                other += int(count)
        if other:
            self.stats.count("site_docs._other", other)
        return with_rejects(table, [None] * table.num_rows)
