#!/usr/bin/env bash
# Issue #51's rows of the converged MiniLM grid (benchmarks/minilm_converged.json), one task and seed per
# call (a part): the three distilled arms at r0.3 and mask-search r0.3, into bench/converged-kd-TASK-sSEED.
# The store is first primed with the committed rows of that task (ROWS), so the full arm's cell counts as
# done; its run is trained once more, by the first distilled cell, as the teacher and the source that the
# new arms need (the converged grid's run folders were not kept), and reproduces the committed full row.
# Resumable: run it again after an interruption. Cells run one after another (local executor, 2 threads).
# Usage: bash benchmarks/minilm_converged_kd.sh TASK SEED ROWS
set -euo pipefail
task=${1:?usage: minilm_converged_kd.sh TASK SEED ROWS}
seed=${2:?usage: minilm_converged_kd.sh TASK SEED ROWS}
rows=${3:?usage: minilm_converged_kd.sh TASK SEED ROWS}
out=bench/converged-kd-$task-s$seed
mkdir -p "$out"
[ -f "$out/results.jsonl" ] || cp "$rows" "$out/results.jsonl"
glue-sparse bench --config benchmarks/minilm_converged.json --only-tasks "$task" --only-seeds "$seed" \
  --only-arms "gates r0.3 distill,gates+full r0.3 distill,magnitude r0.3 distill,mask-search r0.3" --output "$out"
