#!/usr/bin/env bash
# GPU acceptance check of lucid-accel (issue 19): for each --accel flag and all flags together, a 20-step yolo26 n
# fit (batch 16, 640 px, bf16-mixed, MuSGD) on synthetic batches, native then accelerated in fresh processes;
# prints loss/state identity and the step-time ratios (CUDA-event medians, whole-fit wall time). Exit 1 when an
# accelerated run differs from its native run or the combined flags are < 1.3x faster per step.
#
# Usage: tools/gpu/check.sh [OUT_DIR]        (about 9 fits of ~20-40 s each; budget < 8 minutes)
#   PYTHON=...  interpreter to use (default: `uv run python` when uv and the workspace venv exist, else python3
#               with the workspace sources on PYTHONPATH, e.g. on the device machine)
#   ACCEL_CHECK_SMOKE=1  the same plumbing on the CPU at toy sizes (every flag falls back), to test the script
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT_DIR="${1:-/tmp/accel_check}"  # per-run JSON files; the report (+ merged JSON) is copied to $OUT if set
if [[ -z "${PYTHON:-}" ]]; then
  if command -v uv >/dev/null 2>&1 && [[ -d .venv ]]; then
    PYTHON="uv run python"
  else
    PYTHON="python3"
    export PYTHONPATH="$ROOT/packages/lucid-core/src:$ROOT/packages/lucid-data/src:$ROOT/packages/lucid-accel/src:$ROOT/packages/lucid-train/src${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$OUT_DIR/triton_cache}"
mkdir -p "$OUT_DIR"
$PYTHON -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), file=sys.stderr)"
set -o pipefail
status=0
$PYTHON tools/gpu/accel_check.py all --out "$OUT_DIR" --timeout 150 2>&1 | tee "$OUT_DIR/report.txt" || status=$?
$PYTHON -m pytest -q -p no:cacheprovider -m gpu tests/core/test_core_export_tensorrt.py 2>&1 | tee -a "$OUT_DIR/report.txt" || status=$?  # TensorRT export/load/predict (skips without tensorrt)
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  cp "$OUT_DIR/report.txt" "$OUT_DIR/results.json" "$OUT/" 2>/dev/null || true
fi
exit "$status"
