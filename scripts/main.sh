#!/usr/bin/env bash
# The README's main job on the embedded default (packaged MiniLM, GLUE SST-2): full fine-tuning vs sparse gates vs
# magnitude pruning vs mask search (post-training) at 30% removal, one seed; prints the table (scores, chance,
# removal, measured speed-up) and where the report and plots are. -v: library logs.
# GLUE data: $GLUE_SPARSE_DATA_DIR, else ../shared/data/glue beside this checkout, else the Hugging Face Hub; with
# none of the three it stops here, before installing anything.
set -euo pipefail
cd "$(dirname "$0")/.."
data_args=()
if [ -n "${GLUE_SPARSE_DATA_DIR:-}" ]; then
  [ -d "$GLUE_SPARSE_DATA_DIR" ] || { echo "error: GLUE_SPARSE_DATA_DIR=$GLUE_SPARSE_DATA_DIR is not a folder" >&2; exit 2; }
  data_args=(--data-dir "$GLUE_SPARSE_DATA_DIR")
elif [ -d ../shared/data/glue ]; then
  data_args=(--data-dir ../shared/data/glue)
elif curl -fsSI --max-time 5 https://huggingface.co/api/datasets/nyu-mll/glue >/dev/null 2>&1; then
  data_args=()  # the Hub answers: the demo downloads SST-2 there
else
  echo "error: no GLUE data: set GLUE_SPARSE_DATA_DIR to a GLUE folder, or put one at ../shared/data/glue, or give this machine the Hugging Face Hub (huggingface.co did not answer)" >&2
  exit 2
fi
bash scripts/setup.sh
export TOKENIZERS_PARALLELISM=false
if [ ${#data_args[@]} -gt 0 ]; then export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1; fi
glue-sparse demo "$@" "${data_args[@]}" --output "${DEMO_OUT:-demo_out}"
