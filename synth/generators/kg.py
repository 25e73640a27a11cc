"""Multi-hop questions from knowledge-graph walks (Step 3.5 builds search-agent queries from walks on
Wikidata5m; here any triple file works).

Input: tab-separated `head<TAB>relation<TAB>tail` lines ('#' comments). An item starts at a random
entity, walks `hops` edges without revisiting an entity, and asks for the end of the relation path
as a nested description ("the birthplace of the founder of X"). The answer is every entity the
relation path reaches from the start over the whole graph, so a many-valued relation cannot make the
stated answer incomplete; walks with more than `max_answers` answers are redrawn. With
`include_facts` the question lists the triples it needs plus distractors, so it is answerable without
outside knowledge (the bundled graph is fictional on purpose: no model can know its facts).

`synth/data/kg_fictional.tsv` is made by `build_fictional_kg()` (deterministic) and bundled.
"""
from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from pydantic import Field

from assay.pipeline.errors import UserError
from assay.pipeline.stage import register

from .base import GeneratorParams, GeneratorStage, Item

BUNDLED = Path(__file__).resolve().parent.parent / "data" / "kg_fictional.tsv"

# relation -> (noun phrase for "the <rel> of x", fact sentence)
PHRASES = {
    "capital": ("the capital of {x}", "{t} is the capital of {h}."),
    "in_country": ("the country that {x} lies in", "{h} lies in {t}."),
    "currency": ("the currency of {x}", "The currency of {h} is the {t}."),
    "borders": ("a country bordering {x}", "{h} borders {t}."),
    "born_in": ("the birthplace of {x}", "{h} was born in {t}."),
    "lives_in": ("the city where {x} lives", "{h} lives in {t}."),
    "works_for": ("the employer of {x}", "{h} works for {t}."),
    "studied_at": ("the university where {x} studied", "{h} studied at {t}."),
    "spouse": ("the spouse of {x}", "{h} is married to {t}."),
    "headquarters": ("the city where {x} is headquartered", "{h} is headquartered in {t}."),
    "founder": ("the founder of {x}", "{h} was founded by {t}."),
    "campus": ("the city where {x} has its campus", "{h} has its campus in {t}."),
}

PERSON_RELATIONS = {"founder", "spouse"}  # their tails are people: "Who is ...?"


def phrase(relation: str, x: str) -> str:
    template = PHRASES.get(relation, ("the {r} of {x}",))[0]
    return template.format(x=x, r=relation.replace("_", " "))


def fact(h: str, relation: str, t: str) -> str:
    template = PHRASES.get(relation, (None, "{h} -- {r} -- {t}."))[1]
    return template.format(h=h, t=t, r=relation.replace("_", " "))


def load_triples(paths: list[str]) -> list[tuple[str, str, str]]:
    triples = []
    from assay.pipeline import storage

    for path in paths:
        with open(storage.local_file(path), encoding="utf-8") as fh:  # a URL: its local copy
            for n, line in enumerate(fh, 1):
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                parts = line.split("\t")
                if len(parts) != 3 or not all(p.strip() for p in parts):
                    raise UserError(f"{path}:{n}: expected head<TAB>relation<TAB>tail, got {line[:80]!r}")
                triples.append(tuple(p.strip() for p in parts))
    return sorted(set(triples))


class KGParams(GeneratorParams):
    paths: list[str] = Field(default_factory=lambda: [str(BUNDLED)],
                             description="Triple files (head<TAB>relation<TAB>tail); default: the bundled fictional graph")
    min_hops: int = Field(2, ge=1, le=6, description="Fewest edges on a walk")
    max_hops: int = Field(3, ge=1, le=6, description="Most edges on a walk")
    max_answers: int = Field(1, ge=1, description="Redraw walks whose relation path reaches more entities")
    include_facts: bool = Field(True, description="List the needed triples (and distractors) in the question")
    distractors: int = Field(4, ge=0, description="Unrelated facts mixed into the list")


@register("synth.kg")
class KGWalks(GeneratorStage):
    """Multi-hop questions with answers from random walks over a triple file.

    Example: assay synth kg runs/x/kg --count 500 --max-hops 4"""

    Params = KGParams
    task_name = "kg"
    reads = {"paths": "file"}

    def triple_files(self) -> list[str]:
        from assay.pipeline.io import expand_paths

        return expand_paths(self.params.paths)

    def matched_files(self) -> list[str]:
        if getattr(self, "_matched", None) is None:  # the triples and the generator's code
            files = self.triple_files()
            self._matched = files + super().matched_files() if files else []
        return self._matched

    def setup(self) -> None:
        triples = load_triples(self.triple_files())
        if not triples:
            raise UserError(f"stage {self.stage_id!r}: no triples in {self.params.paths}")
        self.triples = triples
        self.out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for h, r, t in triples:
            self.out[h][r].append(t)
        self.heads = sorted(self.out)

    def reach(self, start: str, relations: list[str]) -> list[str]:
        frontier = {start}
        for r in relations:
            frontier = {t for h in frontier for t in self.out.get(h, {}).get(r, ())}
        return sorted(frontier)

    def make(self, rng: random.Random, index: int) -> Item:
        p = self.params
        for _ in range(200):
            start = rng.choice(self.heads)
            hops = rng.randint(min(p.min_hops, p.max_hops), max(p.min_hops, p.max_hops))
            path, seen, here = [], {start}, start
            for _ in range(hops):
                steps = [(r, t) for r, ts in sorted(self.out.get(here, {}).items()) for t in ts if t not in seen]
                if not steps:
                    break
                r, t = rng.choice(steps)
                path.append((here, r, t))
                seen.add(t)
                here = t
            if len(path) < hops:
                continue
            relations = [r for _, r, _ in path]
            answers = self.reach(start, relations)
            if start in answers or len(answers) > p.max_answers:
                continue
            return self._item(rng, start, path, relations, answers)
        raise UserError(f"stage {self.stage_id!r}: no walk of {p.min_hops}-{p.max_hops} hops with at most "
                        f"{p.max_answers} answers found in 200 tries; is the graph that small?")

    def _item(self, rng, start, path, relations, answers) -> Item:
        described = start
        for r in relations:
            described = phrase(r, described)
        needed = set(path)
        frontier = {start}
        for r in relations:  # every edge the full answer depends on, not only the walked one
            needed |= {(h, r, t) for h in frontier for t in self.out.get(h, {}).get(r, ())}
            frontier = {t for h in frontier for t in self.out.get(h, {}).get(r, ())}
        question = f"{'Who' if relations[-1] in PERSON_RELATIONS else 'What'} is {described}?"
        facts = []
        if self.params.include_facts:
            others = [tr for tr in self.triples if tr not in needed]
            facts = sorted(needed) + rng.sample(others, min(self.params.distractors, len(others)))
            rng.shuffle(facts)
            question = "Facts:\n" + "\n".join(f"- {fact(*f)}" for f in facts) + f"\n\nQuestion: {question}"
        lines = [f"{fact(h, r, t)}" for h, r, t in path]
        answer = ", ".join(answers)
        if len(answers) > 1:
            lines.append(f"Following the same relations through every matching fact gives {answer}.")
        lines.append(f"Answer: {answer}")
        return Item(question, "\n".join(lines), answer, "entity_set",
                    {"start": start, "relations": relations, "path": [list(t) for t in path],
                     "answers": answers, "facts": [list(f) for f in facts]})


# ---- the bundled fictional graph ---------------------------------------------------------------

_SYL = ("ka", "lo", "mer", "vin", "do", "ra", "sel", "tor", "an", "bel", "cor", "el", "fen", "gal", "is", "ju",
        "lan", "mo", "nor", "pel", "quin", "ros", "sta", "ul", "var", "wen", "yor", "zan")


def _name(rng: random.Random, used: set[str], parts: int, suffix: str = "") -> str:
    while True:
        name = "".join(rng.choice(_SYL) for _ in range(parts)).capitalize() + suffix
        if name not in used:
            used.add(name)
            return name


def build_fictional_kg(seed: int = 0) -> list[tuple[str, str, str]]:
    """A small invented world: countries, cities, currencies, universities, companies and people."""
    rng = random.Random(f"assay-kg:{seed}")
    used: set[str] = set()
    countries = [_name(rng, used, 3, "ia") for _ in range(8)]
    triples: set[tuple[str, str, str]] = set()
    cities: dict[str, list[str]] = {}
    for country in countries:
        cities[country] = [_name(rng, used, 2) for _ in range(3)]
        triples.add((country, "capital", cities[country][0]))
        triples.add((country, "currency", _name(rng, used, 2, " mark")))
        for city in cities[country]:
            triples.add((city, "in_country", country))
    for a, b in zip(countries, countries[1:]):  # a chain of borders plus a few extra
        triples |= {(a, "borders", b), (b, "borders", a)}
    for a, b in rng.sample(list(zip(countries, countries[3:])), 2):
        triples |= {(a, "borders", b), (b, "borders", a)}
    all_cities = [c for cs in cities.values() for c in cs]
    universities = [f"University of {_name(rng, used, 2)}" for _ in range(6)]
    for u in universities:
        triples.add((u, "campus", rng.choice(all_cities)))
    people = [f"{_name(rng, used, 2)} {_name(rng, used, 2)}" for _ in range(40)]
    companies = [_name(rng, used, 2, rng.choice((" Works", " Labs", " Group", " Foods"))) for _ in range(12)]
    for company in companies:
        triples.add((company, "headquarters", rng.choice(all_cities)))
        triples.add((company, "founder", rng.choice(people)))
    for person in people:
        triples.add((person, "born_in", rng.choice(all_cities)))
        triples.add((person, "lives_in", rng.choice(all_cities)))
        triples.add((person, "works_for", rng.choice(companies)))
        triples.add((person, "studied_at", rng.choice(universities)))
    couples = rng.sample(people, 20)
    for a, b in zip(couples[::2], couples[1::2]):
        triples |= {(a, "spouse", b), (b, "spouse", a)}
    return sorted(triples)


def write_fictional_kg(path: Path = BUNDLED, seed: int = 0) -> None:
    lines = ["# A fictional world for multi-hop questions (assay.synth.generators.kg.build_fictional_kg, seed 0)"]
    lines += ["\t".join(t) for t in build_fictional_kg(seed)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

