#!/usr/bin/env bash
# The README's test command: set up, then the default (non-slow) suite, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python -m pytest -q -p no:cacheprovider tests "$@"
