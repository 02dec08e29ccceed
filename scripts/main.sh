#!/usr/bin/env bash
# The README's main job on the embedded default (packaged MiniLM, local GLUE data): full fine-tuning vs
# sparse gates vs magnitude pruning vs mask search (post-training) at 30% removal on SST-2, one seed; prints the table
# (scores, chance, removal, measured speed-up) and where the report and plots are. -v: library logs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
glue-sparse demo "$@" --data-dir "${GLUE_SPARSE_DATA_DIR:-../shared/data/glue}" --output "${DEMO_OUT:-demo_out}"
