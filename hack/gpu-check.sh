#!/usr/bin/env bash
# The accelerator checks of docs/accelerators.md, in one run on a machine with a CUDA GPU:
# `make test-gpu`, `cascade bench engine --device cuda` (decode batch 1/16/64 and prefill,
# beside transformers on the same GPU and checkpoint) and `cascade bench sampling --device
# cuda`. (A UCX device-to-device transfer is not among them yet: docs/accelerators.md.)
# Figures go to $OUT (default /tmp/gpu-check) as JSON; tables and logs to stdout.
#
# Runs from a checkout without the project's venv too: PYTHON (default: .venv's python,
# else python3) with the component folders on PYTHONPATH, and wheels in .whl/ (carried
# where nothing can be installed from an index) unpacked first.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpu-check-site .whl/*.whl && export PYTHONPATH=/tmp/gpu-check-site
fi
for d in api protocol autoscaler simulator operator worker gateway devcluster cli bench planner; do
  PYTHONPATH="$PWD/$d${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONPATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
status=0
step() { echo "== $*"; "$@" || { echo "!! failed ($?): $*"; status=1; }; }

step nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
step "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
if command -v make >/dev/null; then
  step make -s test-gpu PYTEST="$PY -m pytest -s" 2>&1 | tee "$OUT/test-gpu.log"
else
  step "$PY" -m pytest -s -m gpu tests/unit/test_engine_cuda.py -q -p no:cacheprovider -rA \
    2>&1 | tee "$OUT/test-gpu.log"
fi
step "$PY" -m cascade_cli.main bench sampling --device cuda --batches 1,16,64 \
  --json "$OUT/sampling-cuda.json"
# A Llama-3.2-1B-shaped checkpoint (random weights; 16 layers, hidden 2048, GQA 32/8,
# 128k vocabulary, bfloat16): big enough that the GPU, not Python, sets the pace.
MODEL=${GPU_CHECK_MODEL:-/tmp/gpu-check-model}
[ -f "$MODEL/config.json" ] || step "$PY" -m cascade_cli.main model init "$MODEL" --arch llama \
  --layers 16 --hidden 2048 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256 \
  --max-positions 4096 --dtype bfloat16
step "$PY" -m cascade_cli.main bench engine --model "$MODEL" --device cuda \
  --paths eager,transformers --batches 1,16,64 --prompts 512,2048 --new-tokens 64 \
  --rounds 3 --no-compile-times --json "$OUT/engine-cuda.json"
exit $status
