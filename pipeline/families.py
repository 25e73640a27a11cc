"""Stage families plug in from their own packages; `pipeline/` names none of them.

A family is a package listed under the entry-point group `assay.families` (Assay's own families are
listed in pyproject.toml; a third-party package lists itself the same way). The entry point's name is
the family's CLI group (`assay <family> ...`). Importing the package registers its stages; the
package may also define:

* `register_commands(cli: click.Group)`: commands not shaped like a stage (`assay mix plan ...`);
* `REPORT_SECTIONS`: "module:function" references, each `function(run_dir, stages) -> html | None`,
  imported only when a report is written;
* `REPORT_SUMMARY`: "module:function" references, each `function(run_dir) -> list of html lines`,
  the family's lines in the summary a report opens with (an ablation's verdict).

`ASSAY_FAMILIES` (comma-separated `name=module` pairs) adds families without installing anything,
for notebooks and tests.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

ENTRY_POINT_GROUP = "assay.families"
# Top-level commands a family adds (`assay train`): listed here they appear in `assay --help` and run
# without importing every family. name = "module:attribute" of a click command.
COMMANDS_GROUP = "assay.commands"
CORE_MODULES = ("assay.pipeline.readers",)  # the core's own readers (read.jsonl, read.text, ...)
CORE_FAMILY = "read"  # the CLI group of the core's readers


@dataclass(frozen=True)
class Family:
    name: str
    module: ModuleType

    @property
    def package(self) -> str:
        return self.module.__name__

    def report_sections(self) -> list[str]:
        return list(getattr(self.module, "REPORT_SECTIONS", ()))

    def report_summary(self) -> list[str]:
        return list(getattr(self.module, "REPORT_SUMMARY", ()))

    def register_commands(self, cli) -> None:
        hook = getattr(self.module, "register_commands", None)
        if hook is not None:
            hook(cli)


_LOADED: dict[str, Family] | None = None


_ENTRY_POINTS: metadata.EntryPoints | None = None


def _entry_points(group: str) -> metadata.EntryPoints:
    """Entry points of `group`; every installed distribution's metadata is read once per process (each
    read costs ~5 ms of start-up, and `assay CMD` asks three times)."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        _ENTRY_POINTS = metadata.entry_points()
    return _ENTRY_POINTS.select(group=group)


def _declared() -> list[tuple[str, str]]:
    pairs = [(ep.name, ep.value) for ep in _entry_points(ENTRY_POINT_GROUP)]
    for item in filter(None, os.environ.get("ASSAY_FAMILIES", "").split(",")):
        name, _, module = item.partition("=")
        pairs.append((name.strip(), module.strip()))
    return pairs


def load_families(reload: bool = False) -> dict[str, Family]:
    """Import every family once per process (registering its stages) and return them by name."""
    global _LOADED, _ENTRY_POINTS
    if _LOADED is not None and not reload:
        return _LOADED
    if reload:
        _ENTRY_POINTS = None  # a distribution installed since is seen
    for module in CORE_MODULES:
        importlib.import_module(module)
    found: dict[str, Family] = {}
    for name, module_name in sorted(set(_declared())):
        if name in found and found[name].package != module_name:
            raise ValueError(f"two families are called {name!r}: {found[name].package} and {module_name}")
        found[name] = Family(name, importlib.import_module(module_name))
    _LOADED = found
    return found


def family_names() -> set[str]:
    """Names of the declared families, read from metadata: nothing is imported."""
    return {name for name, _ in _declared()}


def declared_commands() -> dict:
    """The click commands families declare under `assay.commands` (their modules must be light)."""
    out = {}
    for ep in sorted(_entry_points(COMMANDS_GROUP), key=lambda e: e.name):
        out[ep.name] = ep.load()
    return out


def load_family(name: str) -> Family | None:
    """Import one family (and the core readers) without the others: `assay extract html ...` need
    not pay for importing torch or Spark. None when no family has that name (the core's readers
    are imported all the same)."""
    if _LOADED is not None:
        return _LOADED.get(name)
    for module in CORE_MODULES:
        importlib.import_module(module)
    modules = sorted({module for family, module in _declared() if family == name})
    if len(modules) != 1:
        return None
    return Family(name, importlib.import_module(modules[0]))


def family_of(stage_cls) -> str | None:
    """The family whose package defines a stage class (None for the core's own stages)."""
    module = stage_cls.__module__
    for family in load_families().values():
        if module == family.package or module.startswith(family.package + "."):
            return family.name
    return None
