"""Credentials out of what Assay writes and says.

Input URLs may carry them (`https://user:pass@host/...`, a presigned `?X-Amz-Signature=...`,
`?sig=...`, `?token=...`): Assay reads such a URL as given but never writes the secret parts into a
manifest, marker, run log, report, cache or message: they become `***`. What counts as secret is the
user-info of a URL and the value of a query parameter whose name says signature, token, credential,
key, secret or password.
"""
from __future__ import annotations

import re

MASK = "***"
# scheme://USERINFO@host: the user-info, up to the first '@' before the host's end
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://)([^/\s@'\"<>?#]+)@")
# ?name=VALUE or &name=VALUE (also `&amp;` in HTML and `;` separators) with a secret-sounding name
_SECRET_PARAM = re.compile(
    r"([?&;](?:[\w.\-]*?(?:signature|sig|token|credential|secret|password|passwd|pwd|api[_\-]?key|apikey|"
    r"access[_\-]?key|accesskeyid|auth)[\w.\-]*)=)([^&#\s'\"<>\\]+)", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with every URL credential masked."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m.group(1)}{MASK}", text)
