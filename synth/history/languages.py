"""Programming language of a changed file, from its extension (or its well-known file name).

The record filters keep commits and PRs that touch at least one file in an allowed language; the
default is every language listed here (about 30 mainstream ones). Documentation and configuration
files stay inside a record (they are part of the change) but do not count as code.
"""
from __future__ import annotations

import posixpath

# extension (lower case, with the dot) -> language
EXTENSIONS: dict[str, str] = {}
for _lang, _exts in {
    "Python": ".py .pyi .pyx",
    "Java": ".java",
    "C": ".c .h",
    "C++": ".cc .cpp .cxx .c++ .hpp .hh .hxx .h++ .ipp",
    "C#": ".cs",
    "Go": ".go",
    "Rust": ".rs",
    "JavaScript": ".js .mjs .cjs .jsx",
    "TypeScript": ".ts .tsx .mts .cts",
    "PHP": ".php",
    "Ruby": ".rb .rake",
    "Kotlin": ".kt .kts",
    "Swift": ".swift",
    "Scala": ".scala .sc",
    "Shell": ".sh .bash .zsh",
    "SQL": ".sql",
    "R": ".r",
    "Lua": ".lua",
    "Perl": ".pl .pm",
    "Haskell": ".hs",
    "OCaml": ".ml .mli",
    "Julia": ".jl",
    "Dart": ".dart",
    "Elixir": ".ex .exs",
    "Erlang": ".erl .hrl",
    "Clojure": ".clj .cljs .cljc",
    "Objective-C": ".m .mm",
    "F#": ".fs .fsi .fsx",
    "Zig": ".zig",
    "Vue": ".vue",
    "Groovy": ".groovy .gradle",
    "Fortran": ".f90 .f95 .f03",
}.items():
    for _ext in _exts.split():
        EXTENSIONS[_ext] = _lang

FILENAMES = {"makefile": "Makefile", "dockerfile": "Dockerfile", "cmakelists.txt": "CMake"}

# Not code, but text worth keeping inside a record.
TEXT_EXTENSIONS = {
    ".md": "Markdown", ".rst": "reStructuredText", ".txt": "Text", ".yml": "YAML", ".yaml": "YAML",
    ".json": "JSON", ".toml": "TOML", ".cfg": "INI", ".ini": "INI", ".xml": "XML", ".html": "HTML",
    ".css": "CSS", ".scss": "CSS", ".cmake": "CMake",
}

CODE_LANGUAGES = tuple(sorted(set(EXTENSIONS.values())))


def language_of(path: str) -> str | None:
    """The language of a path, or None when neither its extension nor its name is known."""
    name = posixpath.basename(path).lower()
    if name in FILENAMES:
        return FILENAMES[name]
    ext = posixpath.splitext(name)[1]
    return EXTENSIONS.get(ext) or TEXT_EXTENSIONS.get(ext)


def is_code(language: str | None, allowed: frozenset[str] | None = None) -> bool:
    """True for a programming language (one in `allowed` when given)."""
    if language is None:
        return False
    return language in allowed if allowed is not None else language in _CODE_SET


_CODE_SET = frozenset(CODE_LANGUAGES)
