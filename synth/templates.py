"""Prompt templates: YAML files users edit (bundled ones in synth/templates/, or any path).

A template names the record fields it needs, the prompt steps (each step may use the previous
step's output as `{{previous}}`), how the output becomes a document (chat, document or qa) and which
checks its generations must pass. Placeholders are `{{field}}` or `{{field:N}}` (first N characters,
so a long diff cannot push the instructions out of a small model's context).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.pipeline.errors import UserError

BUNDLED = Path(__file__).resolve().parent / "templates"
RULES = ("truncation", "repetition", "language", "claims")
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)(?::(\d+))?\s*\}\}")


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    system: str | None = None
    user: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    stop: list[str] | None = None  # generation ends at any of these (not included in the output)


class Template(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    output: Literal["chat", "document", "qa", "answer"] = "document"
    needs: list[str] = Field(default_factory=list, description="Record fields that must be present and non-empty")
    steps: list[Step] = Field(min_length=1)
    user_turn: str | None = None  # chat output: the user segment
    assistant_suffix: str = ""  # chat output: appended to the model's text (e.g. the real patch)
    sections: list[str] = Field(default_factory=list)  # headings the output must have, in order
    checks: list[Literal["truncation", "repetition", "language", "claims"]] = Field(default_factory=lambda: list(RULES))
    grounding: list[Literal["references", "quoted_code", "content", "qa_pairs"]] = Field(default_factory=list)
    min_chars: int = 40

    def placeholders(self) -> set[str]:
        texts = [s.system or "" for s in self.steps] + [s.user for s in self.steps]
        texts += [self.user_turn or "", self.assistant_suffix]
        return {m.group(1) for t in texts for m in _PLACEHOLDER.finditer(t)}


def template_path(name_or_path: str) -> Path:
    from assay.pipeline import storage

    if storage.is_url(name_or_path):  # a template on a store: its local copy
        if not storage.is_file(name_or_path):
            raise UserError(f"template {name_or_path!r}: no such object")
        return storage.local_file(name_or_path)
    path = Path(name_or_path).expanduser()
    if not path.suffix:  # a bundled name (recipes may have made it absolute against their directory)
        path = BUNDLED / f"{path.name}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in BUNDLED.glob("*.yaml")))
        raise UserError(f"template {name_or_path!r}: no such file (bundled templates: {known})")
    return path


def load_template(name_or_path: str) -> Template:
    path = template_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Template.model_validate(data)
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: invalid YAML: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(f"{path}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None


def render(text: str, fields: dict[str, str]) -> str:
    def fill(m: re.Match) -> str:
        value = str(fields.get(m.group(1)) or "")
        return value[: int(m.group(2))] if m.group(2) else value
    return _PLACEHOLDER.sub(fill, text)


def messages(step: Step, fields: dict[str, str]) -> list[dict]:
    out = [{"role": "system", "content": render(step.system, fields).strip()}] if step.system else []
    return out + [{"role": "user", "content": render(step.user, fields).strip()}]
