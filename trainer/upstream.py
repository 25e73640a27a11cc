"""Task files in their upstream formats, converted to the task schema (tasks.py).

`convert(path, name)` reads a file (or, for MMLU, a folder or glob of CSVs) through pipeline/storage
and turns it into items. The format is detected from the file (the keys of its first record, or its
suffix), or named with `upstream=`:

| format | records | item |
|---|---|---|
| `schema` | `{id, benchmark, split, context, choices, gold, kind, meta}` | as it is |
| `arc` | ARC / OpenBookQA / CommonsenseQA JSONL: `question.stem`, `question.choices[{text, label}]`, `answerKey` | choices in file order; `meta.labels` |
| `obqa_tsv` | OpenBookQA `Main/*.tsv`: `Question Stem`, `Choices` "(A) .. (B) ..", `Answer Key` | |
| `hellaswag` | rowanz JSONL (`activity_label`, `ctx`, `endings`, `label`) | context `activity: ctx`, bracketed tags removed |
| `hellaswag_txt` | six lines an item: `activity: ctx`, label, four endings | |
| `piqa` | `{goal, sol1, sol2}` + a labels file (`valid-labels.lst`) | |
| `winogrande` | `{sentence, option1, option2, answer}` (or a labels file) | `meta.partial_contexts`, `meta.continuation` |
| `winogrande_partial` | llm-foundry `{context_options, continuation, gold}` | choices = the options after the shared prefix |
| `boolq` | SuperGLUE / original `{question, passage, label or answer}` | context passage + question?, choices [no, yes] |
| `copa` | SuperGLUE `{premise, choice1, choice2, question, label}` | context `premise because/therefore` |
| `siqa` | `{context, question, answerA..C}` + a labels file (1-3), or `label` | |
| `lambada` | `{context, continuation}`, or `{text}` (the last word is the continuation) | cloze |
| `triviaqa` | llm-foundry `{context: "Question: ..\\nAnswer:", answer, aliases}` | generation |
| `nq_open` | `{question, answer: [...]}` | generation, first answer gold |
| `mbpp` | `{text, code, task_id, test_list}` | generation; task ids 11-510 (the test split) when present |
| `mmlu` | MMLU-Redux CSV (`question, choices, answer, error_type`) or hendrycks CSV (no header) | Redux: only items whose error_type is ok |

Labels files sit beside their records (`dev.jsonl` -> `dev-labels.lst`, compressed or not) unless
`labels=` names one. Ids follow the eval pack's convention: the upstream id where the file has one
(ARC, OpenBookQA, CSQA, `mbpp-<task_id>`), `<subject>/<row>` for MMLU, else
`<benchmark>-<split>-<row>` (BoolQ and COPA: SuperGLUE's `idx`), zero-padded to the digits of the
item count. Anything malformed is a one-line error naming the file and line.
"""
from __future__ import annotations

import ast
import csv
import glob
import io
import json
import re
from pathlib import PurePosixPath
from typing import Any, Callable

from assay.pipeline import storage
from assay.pipeline.errors import UserError

from .tasks import Item, item_from_record, read_jsonl, read_lines

LETTERS = "ABCDEFGHIJ"


def _split(name: str, split: str | None) -> str:
    from .tasks import SHIPPED

    return split or SHIPPED.get(name, "test")


def _row_id(benchmark: str, split: str, row: int, count: int) -> str:
    return f"{benchmark}-{split}-{row:0{len(str(count))}d}"


def _need(rec: Any, keys: tuple[str, ...], where: str) -> dict:
    if not isinstance(rec, dict):
        raise UserError(f"{where}: expected a JSON object")
    missing = [k for k in keys if k not in rec]
    if missing:
        raise UserError(f"{where}: missing {', '.join(missing)}")
    return rec


def _labels(path: str, explicit: str | None, count: int) -> list[str]:
    """The label lines of `path`'s labels file (explicit, or its sibling NAME-labels.lst[.gz])."""
    candidates = [explicit] if explicit else []
    if not explicit:
        stem = re.sub(r"\.jsonl(\.gz|\.zst)?$", "", str(path))
        candidates = [f"{stem}-labels.lst{ext}" for ext in ("", ".gz", ".zst")]
    for cand in candidates:
        if storage.exists(storage.as_path(cand)):
            lines = [x.strip() for x in read_lines(cand) if x.strip()]
            if len(lines) != count:
                raise UserError(f"{cand}: {len(lines)} labels for {count} items in {path}")
            return lines
    raise UserError(f"{path}: these records carry no answers and no labels file was found "
                    f"(looked for {candidates[0]}); give it with `labels:`")


def _int_label(value: str, base: int, n: int, where: str) -> int:
    try:
        gold = int(value) - base
    except ValueError:
        raise UserError(f"{where}: label {value!r} is not a number") from None
    if not 0 <= gold < n:
        raise UserError(f"{where}: label {value!r} is out of range")
    return gold


# ---- one converter per format: (records, path, name, split, labels) -> items ---------------------

def _schema(recs, path, name, split, labels):
    return [item_from_record(r, f"{path}:{n}", name) for n, r in recs]


def _arc(recs, path, name, split, labels):
    out = []
    for n, r in recs:
        where = f"{path}:{n}"
        _need(r, ("question", "answerKey"), where)
        q = _need(r["question"], ("stem", "choices"), where)
        texts = [c["text"] for c in q["choices"]]
        tags = [str(c["label"]) for c in q["choices"]]
        if str(r["answerKey"]) not in tags:
            raise UserError(f"{where}: answerKey {r['answerKey']!r} is not one of the labels {tags}")
        meta = {"question_concept": q["question_concept"]} if "question_concept" in q else {"labels": tags}
        out.append(Item(str(r.get("id", _row_id(name, split, n - 1, len(recs)))), name, split, q["stem"], texts,
                        tags.index(str(r["answerKey"])), "multiple_choice", meta))
    return out


def _hellaswag(recs, path, name, split, labels):
    out = []
    for n, r in recs:
        where = f"{path}:{n}"
        _need(r, ("ctx", "endings", "label"), where)
        ctx = r["ctx"] if "ctx" in r else f"{r['ctx_a']} {r['ctx_b'].capitalize()}"
        text = _hellaswag_clean(f"{r.get('activity_label', '')}: {ctx}")
        out.append(Item(_row_id(name, split, n - 1, len(recs)), name, split, text,
                        [_hellaswag_clean(e) for e in r["endings"]], _int_label(str(r["label"]), 0, len(r["endings"]), where),
                        "multiple_choice"))
    return out


def _hellaswag_clean(text: str) -> str:
    """WikiHow step tags out ("[title]" ends a sentence; "[step]" and the like are dropped)."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return re.sub(r"  +", " ", text).strip()


def _piqa(recs, path, name, split, labels):
    gold = _labels(path, labels, len(recs)) if "label" not in recs[0][1] else [str(r["label"]) for _, r in recs]
    return [Item(_row_id(name, split, i, len(recs)), name, split, _need(r, ("goal", "sol1", "sol2"), f"{path}:{n}")["goal"],
                 [r["sol1"], r["sol2"]], _int_label(g, 0, 2, f"{path}:{n}"), "multiple_choice")
            for i, ((n, r), g) in enumerate(zip(recs, gold))]


def _winogrande(recs, path, name, split, labels):
    answers = [str(r.get("answer", "")) for _, r in recs]
    if not all(answers):
        answers = _labels(path, labels, len(recs))
    out = []
    for i, ((n, r), answer) in enumerate(zip(recs, answers)):
        where = f"{path}:{n}"
        _need(r, ("sentence", "option1", "option2"), where)
        sentence = r["sentence"]
        if sentence.count("_") != 1:
            raise UserError(f"{where}: the sentence must hold one blank `_`")
        cut = sentence.index("_")
        options = [r["option1"], r["option2"]]
        meta = {"partial_contexts": [sentence[:cut] + o for o in options], "continuation": sentence[cut + 1:].strip()}
        out.append(Item(str(r.get("qID") or _row_id(name, split, i, len(recs))), name, split, sentence, options,
                        _int_label(answer, 1, 2, where), "multiple_choice", meta))
    return out


def _winogrande_partial(recs, path, name, split, labels):
    """llm-foundry's partial-scoring form: the sentence up to the blank filled with each option, the
    rest after it. The options are what follows the longest shared prefix ending at a space."""
    out = []
    for i, (n, r) in enumerate(recs):
        where = f"{path}:{n}"
        _need(r, ("context_options", "continuation", "gold"), where)
        opts = r["context_options"]
        if len(opts) != 2:
            raise UserError(f"{where}: expected two context_options")
        shared = len(opts[0])
        while not (opts[1].startswith(opts[0][:shared]) and (shared == 0 or opts[0][shared - 1] == " ")):
            shared -= 1
        rest = r["continuation"]
        glue = "" if not rest or rest[0] in ".,;:!?'" else " "
        out.append(Item(_row_id(name, split, i, len(recs)), name, split, opts[0][:shared] + "_" + glue + rest,
                        [o[shared:] for o in opts], _int_label(str(r["gold"]), 0, 2, where), "multiple_choice",
                        {"partial_contexts": list(opts), "continuation": rest}))
    return out


def _boolq(recs, path, name, split, labels):
    out = []
    for i, (n, r) in enumerate(recs):
        where = f"{path}:{n}"
        _need(r, ("question", "passage"), where)
        label = r.get("label", r.get("answer"))
        if isinstance(label, str):
            label = {"true": True, "false": False}.get(label.strip().lower(), label)
        if not isinstance(label, bool) and label not in (0, 1):
            raise UserError(f"{where}: no true/false label or answer")
        row = int(r.get("idx", i))
        out.append(Item(_row_id(name, split, row, len(recs)), name, split, f"{r['passage']}\n{r['question']}?",
                        ["no", "yes"], int(bool(label)), "multiple_choice",
                        {"passage": r["passage"], "question": r["question"]}))
    return out


def _copa(recs, path, name, split, labels):
    out = []
    for i, (n, r) in enumerate(recs):
        where = f"{path}:{n}"
        _need(r, ("premise", "choice1", "choice2", "question", "label"), where)
        joiner = {"cause": "because", "effect": "therefore"}.get(r["question"])
        if joiner is None:
            raise UserError(f"{where}: question must be cause or effect")
        lower = lambda c: c[:1].lower() + c[1:]  # noqa: E731 - "The toilet" -> "the toilet" after the joiner
        out.append(Item(_row_id(name, split, int(r.get("idx", i)), len(recs)), name, split,
                        f"{r['premise'].strip().rstrip('.')} {joiner}", [lower(r["choice1"]), lower(r["choice2"])],
                        _int_label(str(r["label"]), 0, 2, where), "multiple_choice",
                        {k: r[k] for k in ("premise", "question", "choice1", "choice2")}))
    return out


def _siqa(recs, path, name, split, labels):
    keys = ("label", "correct")
    inline = next((k for k in keys if k in recs[0][1]), None)
    gold = [str(r[inline]) for _, r in recs] if inline else _labels(path, labels, len(recs))
    out = []
    for i, ((n, r), g) in enumerate(zip(recs, gold)):
        where = f"{path}:{n}"
        _need(r, ("context", "question", "answerA", "answerB", "answerC"), where)
        g = str(LETTERS.index(g) + 1) if g in "ABC" and g else g
        out.append(Item(_row_id(name, split, i, len(recs)), name, split, f"{r['context']} {r['question']}",
                        [r["answerA"], r["answerB"], r["answerC"]], _int_label(g, 1, 3, where), "multiple_choice",
                        {"context": r["context"], "question": r["question"]}))
    return out


def _lambada(recs, path, name, split, labels):
    out = []
    for i, (n, r) in enumerate(recs):
        where = f"{path}:{n}"
        if "text" in r and "context" not in r:
            context, _, word = r["text"].rstrip().rpartition(" ")
        else:
            context, word = _need(r, ("context", "continuation"), where)["context"], r["continuation"]
        if not context or not word:
            raise UserError(f"{where}: empty context or last word")
        out.append(Item(_row_id(name, split, i, len(recs)), name, split, context, [word], 0, "cloze"))
    return out


def _triviaqa(recs, path, name, split, labels):
    out = []
    for i, (n, r) in enumerate(recs):
        _need(r, ("context", "answer"), f"{path}:{n}")
        question = r["context"].strip()
        question = question.removeprefix("Question:").removesuffix("Answer:").strip()
        out.append(Item(_row_id(name, split, i, len(recs)), name, split, question, [r["answer"]], 0, "generation",
                        {"aliases": r.get("aliases", [r["answer"]])}))
    return out


def _nq_open(recs, path, name, split, labels):
    out = []
    for i, (n, r) in enumerate(recs):
        _need(r, ("question", "answer"), f"{path}:{n}")
        answers = r["answer"] if isinstance(r["answer"], list) else [r["answer"]]
        if not answers:
            raise UserError(f"{path}:{n}: no answer")
        out.append(Item(_row_id(name, split, i, len(recs)), name, split, r["question"], [answers[0]], 0, "generation",
                        {"answers": answers}))
    return out


def _mbpp(recs, path, name, split, labels):
    ids = {int(_need(r, ("text", "code", "task_id"), f"{path}:{n}")["task_id"]) for n, r in recs}
    test = ids & set(range(11, 511))  # the test split (google-research mbpp README); 1-10 are prompt examples
    return [Item(f"mbpp-{r['task_id']}", name, split, r["text"], [r["code"]], 0, "generation",
                 {k: r[k] for k in ("task_id", "test_list", "test_setup_code", "challenge_test_list") if k in r})
            for _, r in recs if not test or int(r["task_id"]) in test]


JSONL: dict[str, Callable] = {
    "schema": _schema, "arc": _arc, "hellaswag": _hellaswag, "piqa": _piqa, "winogrande": _winogrande,
    "winogrande_partial": _winogrande_partial, "boolq": _boolq, "copa": _copa, "siqa": _siqa, "lambada": _lambada,
    "triviaqa": _triviaqa, "nq_open": _nq_open, "mbpp": _mbpp,
}
FORMATS = (*JSONL, "obqa_tsv", "hellaswag_txt", "mmlu")


def detect(record: Any) -> str | None:
    """The upstream format of a JSON record, from its keys."""
    if not isinstance(record, dict):
        return None
    keys = set(record)
    for fmt, need in (("schema", {"context", "choices", "gold"}), ("winogrande_partial", {"context_options"}),
                      ("winogrande", {"sentence", "option1", "option2"}), ("copa", {"premise", "choice1"}),
                      ("siqa", {"answerA", "answerB"}), ("piqa", {"goal", "sol1", "sol2"}),
                      ("hellaswag", {"endings"}), ("boolq", {"passage", "question"}), ("mbpp", {"code", "task_id"}),
                      ("triviaqa", {"context", "answer"}), ("lambada", {"context", "continuation"}),
                      ("nq_open", {"question", "answer"}), ("lambada", {"text"})):
        if need <= keys:
            return fmt
    if isinstance(record.get("question"), dict) and "answerKey" in keys:
        return "arc"
    return None


def convert(path: str, name: str, upstream: str = "auto", labels: str | None = None,
            split: str | None = None) -> tuple[list[Item], dict[str, int]]:
    """(items, {reason: count} of records left out) of the task file(s) at `path`."""
    split = _split(name, split)
    if upstream != "auto" and upstream not in FORMATS:
        raise UserError(f"task {name!r}: upstream format {upstream!r} is not one of {', '.join(FORMATS)}")
    plain = re.sub(r"\.(gz|zst)$", "", PurePosixPath(str(path)).name)
    if upstream == "mmlu" or (upstream == "auto" and (plain.endswith(".csv") or storage.is_dir(storage.as_path(path)))):
        return _mmlu(path, name, split)
    if upstream == "obqa_tsv" or (upstream == "auto" and plain.endswith(".tsv")):
        return _obqa_tsv(path, name, split), {}
    if upstream == "hellaswag_txt" or (upstream == "auto" and plain.endswith(".txt")):
        return _hellaswag_txt(path, name, split), {}
    recs = read_jsonl(path)
    if not recs:
        return [], {}
    fmt = upstream if upstream != "auto" else detect(recs[0][1])
    if fmt is None:
        keys = sorted(recs[0][1]) if isinstance(recs[0][1], dict) else type(recs[0][1]).__name__
        raise UserError(f"{path}: records of an unknown format (keys {keys}); name it with upstream: "
                        f"({', '.join(FORMATS)})")
    return JSONL[fmt](recs, path, name, split, labels), {}


def _obqa_tsv(path: str, name: str, split: str) -> list[Item]:
    lines = read_lines(path)
    rows = list(csv.DictReader(io.StringIO("\n".join(lines)), delimiter="\t"))
    out = []
    for n, r in enumerate(rows, 2):
        where = f"{path}:{n}"
        _need(r, ("ID", "Question Stem", "Choices", "Answer Key"), where)
        parts = re.split(r"\(([A-J])\) ", r["Choices"].strip())[1:]
        tags, texts = parts[0::2], [t.strip() for t in parts[1::2]]
        if r["Answer Key"] not in tags:
            raise UserError(f"{where}: Answer Key {r['Answer Key']!r} is not one of {tags}")
        out.append(Item(r["ID"], name, split, r["Question Stem"], texts, tags.index(r["Answer Key"]), "multiple_choice"))
    return out


def _hellaswag_txt(path: str, name: str, split: str) -> list[Item]:
    lines = read_lines(path)
    if len(lines) % 6:
        raise UserError(f"{path}: {len(lines)} lines; the text form has six an item (context, label, four endings)")
    count = len(lines) // 6
    return [Item(_row_id(name, split, i, count), name, split, lines[6 * i].strip(),
                 [e.strip() for e in lines[6 * i + 2:6 * i + 6]], _int_label(lines[6 * i + 1].strip(), 0, 4, f"{path}:{6 * i + 2}"),
                 "multiple_choice") for i in range(count)]


def _mmlu(path: str, name: str, split: str) -> tuple[list[Item], dict[str, int]]:
    """MMLU-Redux CSVs (header row; `choices` a Python list literal; `error_type` kept only when ok) or
    hendrycks/test CSVs (no header: question, four options, answer letter), one file per subject."""
    target = storage.as_path(path)
    if storage.is_dir(target):
        files = sorted(storage.glob(target, "*.csv"))
    else:
        found = storage.expand_urls([str(path)]) if storage.is_url(path) else sorted(glob.glob(str(path)))
        files = [storage.as_path(p) for p in found]
    if not files:
        raise UserError(f"{path}: no MMLU CSV files")
    items, excluded = [], {}
    for file in files:
        subject = re.sub(r"^mmlu_|_(test|dev|val)$", "", PurePosixPath(str(file)).name.removesuffix(".csv"))
        text = _decode(storage.read_bytes(file))
        first = text.split("\n", 1)[0]
        delim = ";" if first.count(";") > first.count(",") and first.startswith("question;") else ","
        rows = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delim) if r]  # as DictReader: no blank rows
        if rows and rows[0][0].strip().lower() == "question":  # MMLU-Redux, with a header
            header = [c.strip() for c in rows[0]]
            for i, row in enumerate(rows[1:]):
                rec = dict(zip(header, row))
                where = f"{file}:{i + 2}"
                status = re.sub(r"[\s_]+", " ", (rec.get("error_type") or "ok").strip().lower())
                if status != "ok":
                    excluded[f"error_type {status}"] = excluded.get(f"error_type {status}", 0) + 1
                    continue
                try:
                    choices = [str(c) for c in ast.literal_eval(rec["choices"])]
                except (ValueError, SyntaxError, KeyError):
                    raise UserError(f"{where}: choices is not a list literal") from None
                items.append(Item(f"{subject}/{i}", name, split, rec["question"], choices,
                                  _int_label(rec.get("answer", ""), 0, len(choices), where), "multiple_choice",
                                  {"subject": subject}))
        else:
            for i, row in enumerate(rows):
                where = f"{file}:{i + 1}"
                if len(row) < 6 or row[-1].strip() not in LETTERS[:len(row) - 2]:
                    raise UserError(f"{where}: expected question, options and an answer letter")
                choices = row[1:-1]
                items.append(Item(f"{subject}/{i}", name, split, row[0], choices, LETTERS.index(row[-1].strip()),
                                  "multiple_choice", {"subject": subject}))
    return items, excluded


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")
