#!/usr/bin/env bash
# The README's main job on the embedded default: a smoke-sized offline benchmark (packaged MiniLM,
# local GLUE data): RTE, STS-B and SST-2, limited regime, gates vs full, one seed, bounded steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
glue-sparse demo --data-dir "${GLUE_SPARSE_DATA_DIR:-../shared/data/glue}" --output "${DEMO_OUT:-demo_out}"
