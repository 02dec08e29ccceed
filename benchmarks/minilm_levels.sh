#!/usr/bin/env bash
# Issue #61's rows of the converged MiniLM grid (benchmarks/minilm_converged.json): one task, seed and removal
# level per call (a part), every arm of that level that is not yet committed, into bench/levels-TASK-sSEED
# (one store per task and seed, so the full run that every arm builds on and learns from trains once).
# The store is first primed with the committed rows of that task and seed, so the full arm's cell counts
# as done; its run is trained once more, by the first cell, as the teacher and the start of the gated arms.
# When the part ends, its rows go to benchmarks/results/minilm_converged/levels-TASK-seed-SEED/results.jsonl
# (merged by key with the parts already there). Resumable: run it again after an interruption.
# Usage: bash benchmarks/minilm_levels.sh TASK SEED LEVEL [ARMS]   (LEVEL 0.3, 0.5 or 0.7; ARMS: comma-separated
# labels, default every arm of the level that issue #61 adds)
set -euo pipefail
task=${1:?usage: minilm_levels.sh TASK SEED LEVEL [ARMS]}
seed=${2:?usage: minilm_levels.sh TASK SEED LEVEL [ARMS]}
level=${3:?usage: minilm_levels.sh TASK SEED LEVEL [ARMS]}
here=$(cd "$(dirname "$0")" && pwd)
results=$here/results/minilm_converged
out=bench/levels-$task-s$seed
dest=$results/levels-$task-seed-$seed/results.jsonl
case $level in
  0.3) arms="gates+full r0.3 from-full distill,gates+full r0.3 from-mask distill,gates r0.3 from-mask distill" ;;
  0.5|0.7) arms="mask-search r$level,magnitude r$level distill,gates r$level distill,gates+full r$level distill"
           arms="$arms,gates+full r$level from-full distill,gates+full r$level from-mask distill"
           arms="$arms,gates r$level from-mask distill" ;;
  *) echo "LEVEL must be 0.3, 0.5 or 0.7, got $level" >&2; exit 2 ;;
esac
arms=${4:-$arms}
mkdir -p "$out"
python - "$results" "$task" "$seed" "$out/results.jsonl" <<'EOF'
# prime the store with every committed row of this task and seed that it lacks (the full arm's above all)
import json, pathlib, sys
results, task, seed, store = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
have = [json.loads(line) for line in store.read_text().splitlines() if line.strip()] if store.is_file() else []
keys = {row["key"] for row in have}
for part in sorted(results.glob("*/results.jsonl")):
    for line in part.read_text().splitlines():
        row = json.loads(line) if line.strip() else None
        if row and row["task"] == task and row["seed"] == seed and row["key"] not in keys:
            have.append(row)
            keys.add(row["key"])
store.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in have))
EOF
glue-sparse bench --config "$here/minilm_converged.json" --only-tasks "$task" --only-seeds "$seed" \
  --only-arms "$arms" --output "$out"
python - "$out/results.jsonl" "$dest" "$arms" <<'EOF'
# this part's rows (its arms' labels) into the committed store of the task and seed, merged by key
import json, pathlib, sys
store, dest, arms = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), set(sys.argv[3].split(","))
read = lambda path: [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
rows = {row["key"]: row for row in read(dest)}  # the parts committed before
rows.update({row["key"]: row for row in read(store) if row["label"] in arms})
dest.parent.mkdir(parents=True, exist_ok=True)
tmp = dest.with_suffix(".tmp")
tmp.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows.values()))
tmp.replace(dest)
print(f"{dest}: {len(rows)} rows")
EOF
