#!/usr/bin/env bash
# The committed CPU pre-training result (benchmarks/results/pretrain_c4_cpu): a short sweep of the
# weights' lr and the BPE vocabulary (dense), a sweep of the reference recipe's gate lr, then dense and
# gated twins of llama_9m at equal tokens, then the report. Each run resumes where it stopped (its
# out-dir), so the script can be run again in parts. Usage: bash benchmarks/pretrain_cpu.sh OUT_ROOT [DATA_DIR]
set -euo pipefail
out=${1:?usage: pretrain_cpu.sh OUT_ROOT [DATA_DIR]}
data=${2:-../shared/data}
common=(--model-config llama_9m --data-dir "$data" --no-hub --train-docs 0:1800 --eval-docs 1800:2000
        --seqlen 128 --batch-size 16 --eval-tokens 65536)
sweep_tokens=500000
# 1. the weights' lr and the vocabulary, dense (8192 was tried at 0.001 only: 4096 had shown lr 0.001 best)
for run in 4096:0.001 4096:0.003 4096:0.01 8192:0.001 2048:0.001 2048:0.003 1024:0.001 1024:0.003 1024:0.0003; do
  vocab=${run%%:*} lr=${run##*:}
  glue-sparse pretrain "${common[@]}" --tokenizer bpe:$vocab --lr $lr --tokens $sweep_tokens --eval-every 61 \
    --output "$out/sweep/dense-bpe$vocab-lr$lr"
done
# 2. the reference recipe's gate lr (gates, target sparsity 0.4, lambda 100, on after the warm-up),
#    at the chosen vocabulary and weights' lr
best=(--tokenizer bpe:1024 --lr 0.001)
for gate_lr in 0.001 0.01 0.1; do
  glue-sparse pretrain "${common[@]}" "${best[@]}" --tokens $sweep_tokens --eval-every 61 --method gates \
    --recipe reference --sparsity-from-step 24 --gate-lr $gate_lr --output "$out/sweep/reference-glr$gate_lr"
done
# 3. the twins at equal tokens: dense, removal 20% and 40% of gated weights, and the reference recipe
tokens=2000000
twins=(--tokens $tokens --eval-every 98)
glue-sparse pretrain "${common[@]}" "${best[@]}" "${twins[@]}" --output "$out/dense"
for removal in 0.2 0.4; do
  glue-sparse pretrain "${common[@]}" "${best[@]}" "${twins[@]}" --method gates --target-removal $removal \
    --output "$out/gates-removal$removal"
done
# the removal recipe at the reference twin's gate lr (one change: --gate-lr 0.1 instead of travel 1 / removal steps)
glue-sparse pretrain "${common[@]}" "${best[@]}" "${twins[@]}" --method gates --target-removal 0.4 --gate-lr 0.1 \
  --output "$out/gates-removal0.4-glr0.1"
glue-sparse pretrain "${common[@]}" "${best[@]}" "${twins[@]}" --method gates --recipe reference \
  --sparsity-from-step 98 --gate-lr 0.1 --output "$out/gates-reference"
# 4. the report (time it on an otherwise idle machine)
glue-sparse pretrain-report --runs "$out/dense,$out/gates-removal0.2,$out/gates-removal0.4,$out/gates-removal0.4-glr0.1,$out/gates-reference" \
  --speed-rounds 21 --output "$out/report"
# 5. the sweep as a table (final validation perplexity against the unigram perplexity of the same targets)
python - "$out" <<'PY'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
rows = []
for run in sorted((root / "sweep").glob("*/run.json")):
    r = json.loads(run.read_text())
    o = r["options"]
    rows.append({"run": run.parent.name, "method": o["method"], "recipe": o["recipe"] if o["method"] == "gates" else "",
                 "vocab": r["tokenizer"]["vocab_size"], "lr": o["lr"], "gate_lr": r["gate_learning_rate"],
                 "tokens": r["train_tokens"], "val_perplexity": r["final"]["val_perplexity"],
                 "unigram_perplexity": r["unigram_perplexity"],
                 "ratio_to_unigram": r["final"]["val_perplexity"] / r["unigram_perplexity"],
                 "removed_share_of_gated": (r["accounting"] or {}).get("removed_share_of_gated", 0.0)})
(root / "sweep.json").write_text(json.dumps(rows, indent=1) + "\n")
lines = ["| run | vocab | lr | gate lr | tokens | val ppl | unigram ppl | x unigram | removed % gated |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for x in rows:
    glr = "" if x["gate_lr"] is None else f"{x['gate_lr']:g}"
    lines.append(f"| {x['run']} | {x['vocab']} | {x['lr']:g} | {glr} | {x['tokens']:,} | {x['val_perplexity']:.1f} | "
                 f"{x['unigram_perplexity']:.1f} | {x['ratio_to_unigram']:.3f} | {x['removed_share_of_gated']:.1%} |")
(root / "sweep.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
