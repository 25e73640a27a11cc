"""One interface for every LLM: `chat(request) -> response`, both in the OpenAI chat-completions shape.

* `HTTPBackend`: any OpenAI-compatible server (`OpenAIClient`).
* `LocalBackend`: a transformers model inside this worker (default SmolLM2-135M-Instruct), with
  request batching; CUDA when present. On Ray it lives in the stage's actor pool (loaded once per actor).

Stages never see which one they talk to: the request cache, retries and statistics of the service
base work the same for both, and `assay serve` makes a local model an HTTP one. What answers (the
model a server says it serves, the local weights by content) is the stage's `service_identity`: part
of its fingerprint and the request cache's namespace.
"""
from __future__ import annotations

import os
import threading
from typing import Protocol

from assay.pipeline.service import PermanentError


class ChatBackend(Protocol):
    name: str

    def chat(self, request: dict) -> dict: ...

    def close(self) -> None: ...


class HTTPBackend:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0):
        from .client import OpenAIClient

        self.name = base_url
        self.client = OpenAIClient(base_url, api_key=api_key, timeout_s=timeout_s)

    def chat(self, request: dict) -> dict:
        return self.client.chat(request)

    def close(self) -> None:
        self.client.close()


class LocalBackend:
    """The model loads on the first request, so a worker whose requests are all cached (a rerun, the
    same recipe on another engine) never loads it."""

    def __init__(self, model_path: str | None = None, name: str = "smollm2-135m-instruct", device: str = "auto",
                 max_batch: int = 8, threads: int | None = None):
        self._options = dict(name=name, device=device, max_batch=max_batch, threads=threads)
        self._model_path = model_path
        self._model = None
        self._lock = threading.Lock()
        self.name = f"local:{name}"

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                from .local import LocalChatModel

                self._model = LocalChatModel(self._model_path, **self._options)
            return self._model

    def chat(self, request: dict) -> dict:
        from .local import BadRequest

        try:
            return self.model.chat(request)
        except BadRequest as exc:
            raise PermanentError(str(exc), reason="bad_request") from None

    def close(self) -> None:
        if self._model is not None:
            self._model.close()


# What a model list entry says about the weights behind a name: `assay serve` the weights' digest,
# vLLM and SGLang the checkpoint it loaded (`root`, `parent`), llama.cpp the model's shape and size
# (`meta`). Not `created`: vLLM and SGLang stamp it with the time of the request.
WEIGHTS_FIELDS = ("assay_weights", "root", "parent", "meta")


def served_model(base_url: str, model: str, api_key: str | None = None, timeout_s: float = 10.0) -> dict:
    """What the server says answers as `model` (GET /models: that name's entry, or the only one): its
    id and what the entry tells of its weights. {} from a server that cannot say (down, or no /models),
    which is another identity than the one it had when it could: its cached answers and its outputs
    are not assumed to be this server's."""
    from .client import OpenAIClient

    client = OpenAIClient(base_url, api_key=api_key, timeout_s=timeout_s)
    try:
        served = client.models()
    finally:
        client.close()
    entry = next((m for m in served if m.get("id") == model), served[0] if len(served) == 1 else None)
    return {} if entry is None else {k: entry[k] for k in ("id", *WEIGHTS_FIELDS) if k in entry}


def weights_identity(model_path: str | None) -> str:
    """The local model's weights: the bundled SmolLM2's published SHA-256, else the content digest of
    the .gguf file or model folder (through identity's stat-keyed file cache: a large model is read once)."""
    from assay.pipeline.identity import path_digest

    from .weights import DEFAULT_MODEL, SMOLLM2_SHA256

    if model_path in (None, "", DEFAULT_MODEL):
        return f"sha256:{SMOLLM2_SHA256}"
    return f"sha256:{path_digest(model_path)}"


def open_backend(url: str | None, *, model: str, model_path: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 120.0, device: str = "auto", max_batch: int = 8,
                 threads: int | None = None) -> ChatBackend:
    """HTTP when `url` is given (the API key is read from the environment variable `api_key_env`,
    never from a recipe), else the local model."""
    if url:
        return HTTPBackend(url, api_key=os.environ.get(api_key_env) if api_key_env else None, timeout_s=timeout_s)
    return LocalBackend(model_path, name=model, device=device, max_batch=max_batch, threads=threads)
