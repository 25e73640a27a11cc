#!/usr/bin/env bash
# The trainer's GPU checks, as one script for a lent device machine (docs/trainer.md, "GPU"): the CUDA
# tests, the MoE proxy's MFU (benchmarks/trainer.py --only gpu) and the ranking benchmark on the GPU.
# The machine has PyTorch but not Assay's other needs, so this first installs the wheels carried in
# .whl/ (pydantic and its parts) and makes the top-level folders importable as assay.* without an
# install. Ranking data is built beforehand where ../shared and the quality models are
# (`python benchmarks/ranking.py --corpus mixed --prepare-only`, then tar the folder into .devdata/).
# Results go to $OUT (the device tool brings them back).
set -u
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
# assay.<name> -> its folder, as pyproject's package-dir maps them (nested ones come with their parent)
python3 - <<'PY' || exit 1
import os, tomllib
dirs = tomllib.load(open("pyproject.toml", "rb"))["tool"]["setuptools"]["package-dir"]
os.makedirs("/tmp/ns/assay", exist_ok=True)
for name, folder in dirs.items():
    if name.count(".") == 1:
        link = "/tmp/ns/" + name.replace(".", "/")
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(folder), link)
PY
export PYTHONPATH=/tmp/site:/tmp/ns
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.txt"
python3 -c "import torch, assay.trainer.train as t; print('torch', torch.__version__, torch.cuda.get_device_name(0))" || exit 1

step() { echo "== $1 ($(date +%T))"; }
step "cuda tests"
timeout "${TEST_S:-120}" python3 -m pytest -q -p no:cacheprovider tests/test_trainer_cuda.py 2>&1 | tee "$OUT/pytest-cuda.txt" | tail -5
step "MoE proxy MFU"
timeout "${MFU_S:-240}" python3 benchmarks/trainer.py --only gpu --gpu-budget "${MFU_BUDGET_S:-150}" 2>&1 \
  | grep -v "^W[0-9]" | tee "$OUT/gpu.txt" | tail -8
cp benchmarks/results/trainer.json "$OUT/"
step "ranking on the GPU"
mkdir -p .bench/ranking/mixed && tar -xzf .devdata/ranking-mixed.tgz -C .bench/ranking/mixed
timeout "${RANK_S:-200}" python3 benchmarks/ranking.py --corpus mixed --from-prepared --seeds 5 --larger-seeds 3 \
  --workers "${RANK_WORKERS:-8}" > "$OUT/ranking.txt" 2>&1
tail -3 "$OUT/ranking.txt"
cp .bench/ranking/mixed/runs-*-gpu.jsonl benchmarks/results/ranking.json "$OUT/" 2>/dev/null
step "done"
