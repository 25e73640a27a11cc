"""One interface for every LLM: `chat(request) -> response`, both in the OpenAI chat-completions shape.

* `HTTPBackend`: any OpenAI-compatible server (`OpenAIClient`).
* `LocalBackend`: a transformers model inside this worker (default SmolLM2-135M-Instruct), with
  request batching; CUDA when present. On Ray it lives in the stage's actor pool (`holds_model`).

Stages never see which one they talk to: the request cache, retries and statistics of the service
base work the same for both, and `assay serve` makes a local model an HTTP one.
"""
from __future__ import annotations

import os
import threading
from typing import Protocol

from assay.pipeline.service import PermanentError


class ChatBackend(Protocol):
    name: str

    def chat(self, request: dict) -> dict: ...

    def identity(self) -> str: ...  # what answers: part of every request-cache key

    def close(self) -> None: ...


class HTTPBackend:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0, model: str = ""):
        from .client import OpenAIClient

        self.name, self.model = base_url, model
        self.client = OpenAIClient(base_url, api_key=api_key, timeout_s=timeout_s)

    def chat(self, request: dict) -> dict:
        return self.client.chat(request)

    def identity(self) -> str:
        """The address and the model the server says it serves (GET /models: the configured name's
        entry, or the only one; `assay serve` adds its weights' digest), else the configured name. A
        server that cannot say (down, or no /models) is known by address and name only, which is
        another key than the one it had when it could: its cached answers are not assumed its own."""
        served = self.client.models()
        entry = next((m for m in served if m.get("id") == self.model), served[0] if len(served) == 1 else None)
        if entry is None:
            return f"{self.name} model={self.model}"
        weights = entry.get("assay_weights")
        return f"{self.name} model={entry.get('id')}" + (f" weights={weights}" if weights else "")

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

    def identity(self) -> str:
        return f"local weights={weights_identity(self._model_path)}"

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


def weights_identity(model_path: str | None) -> str:
    """The local model's weights: the bundled SmolLM2's published SHA-256, else the content digest of
    the .gguf file or model folder (remembered by file stat, so a large model is read once)."""
    from pathlib import Path

    from assay.pipeline.io import content_digest

    from .weights import DEFAULT_MODEL, SMOLLM2_SHA256

    if model_path in (None, "", DEFAULT_MODEL):
        return f"sha256:{SMOLLM2_SHA256}"
    return f"sha256:{content_digest(Path(model_path).expanduser())}"


def open_backend(url: str | None, *, model: str, model_path: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 120.0, device: str = "auto", max_batch: int = 8,
                 threads: int | None = None) -> ChatBackend:
    """HTTP when `url` is given (the API key is read from the environment variable `api_key_env`,
    never from a recipe), else the local model."""
    if url:
        return HTTPBackend(url, api_key=os.environ.get(api_key_env) if api_key_env else None, timeout_s=timeout_s,
                           model=model)
    return LocalBackend(model_path, name=model, device=device, max_batch=max_batch, threads=threads)
