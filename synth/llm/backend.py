"""One interface for every LLM: `chat(request) -> response`, both in the OpenAI chat-completions shape.

* `HTTPBackend`: any OpenAI-compatible server (`OpenAIClient`).
* `LocalBackend`: a transformers model inside this worker (default SmolLM2-135M-Instruct), with
  request batching; CUDA when present. On Ray it lives in the stage's actor pool (`holds_model`).

Stages never see which one they talk to: the request cache, retries and statistics of the service
base work the same for both, and `assay serve` makes a local model an HTTP one.
"""
from __future__ import annotations

import os
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
    def __init__(self, model_path: str | None = None, name: str = "smollm2-135m-instruct", device: str = "auto",
                 max_batch: int = 8, threads: int | None = None):
        from .local import LocalChatModel

        self.model = LocalChatModel(model_path, name=name, device=device, max_batch=max_batch, threads=threads)
        self.name = f"local:{name}"

    def chat(self, request: dict) -> dict:
        from .local import BadRequest

        try:
            return self.model.chat(request)
        except BadRequest as exc:
            raise PermanentError(str(exc), reason="bad_request") from None

    def close(self) -> None:
        self.model.close()


def open_backend(url: str | None, *, model: str, model_path: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 120.0, device: str = "auto", max_batch: int = 8,
                 threads: int | None = None) -> ChatBackend:
    """HTTP when `url` is given (the API key is read from the environment variable `api_key_env`,
    never from a recipe), else the local model."""
    if url:
        return HTTPBackend(url, api_key=os.environ.get(api_key_env) if api_key_env else None, timeout_s=timeout_s)
    return LocalBackend(model_path, name=model, device=device, max_batch=max_batch, threads=threads)
