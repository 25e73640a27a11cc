"""Report section: rows seen and kept per language by `filter.rules` (its `lang.<code>.*` counters)."""
from __future__ import annotations

import html
import json
from pathlib import Path

from assay.pipeline.dataset import MANIFEST


def report_section(run_dir: Path) -> str | None:
    parts = []
    for path in sorted(Path(run_dir).glob(f"*/{MANIFEST}")):
        manifest = json.loads(path.read_text())
        if manifest.get("stage") != "filter.rules":
            continue
        counters = (manifest.get("statistics") or {}).get("counters") or {}
        docs = {k[5:-5]: v for k, v in counters.items() if k.startswith("lang.") and k.endswith(".docs")}
        if not docs:
            continue
        rows = []
        for lang, n in sorted(docs.items(), key=lambda kv: (-kv[1], kv[0])):
            kept = counters.get(f"lang.{lang}.kept", 0)
            rows.append(f"<tr><td>{html.escape(lang)}</td><td>{int(n):,}</td><td>{int(kept):,}</td>"
                        f"<td>{kept / n:.1%}</td></tr>" if n else "")
        parts.append(f"<h3>Rows kept per language (stage {html.escape(path.parent.name)}, per-language thresholds)</h3>"
                     "<table><tr><th>language</th><th>rows</th><th>kept</th><th>share kept</th></tr>"
                     + "".join(rows) + "</table>")
    return "<h2>Heuristic rules by language</h2>" + "".join(parts) if parts else None
