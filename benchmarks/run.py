"""The benchmark suite's one entry point: ``python benchmarks/run.py NAME [ARGS...]``.

``python benchmarks/run.py --list`` names every benchmark with what it measures. ARGS go to the
benchmark as they are. ``--smoke`` runs it at its smallest size instead (what the default test suite
does, so that no benchmark rots): ``--smoke DATA_DIR OUT_DIR``. Time only on an otherwise idle machine;
each benchmark prints both sides of what it compares and the ratio.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    script: str
    measures: str
    #: arguments of the smallest run; ``{data}`` is a GLUE data folder, ``{out}`` a scratch folder. None: a
    #: shell script whose smallest run is still hours; its smoke run checks its syntax (the test checks its flags)
    smoke: tuple[str, ...] | None = ()


SUITE: dict[str, Benchmark] = {
    "pruning-speed": Benchmark(
        "pruning_speed.py", "dense vs pruned MiniLM CPU latency per closed share and layout (glue-sparse speed)",
        ("--target-removal", "0.4", "--batch-sizes", "1", "--batches", "1", "--rounds", "1", "--layouts", "keep",
         "--data-dir", "{data}", "--output", "{out}/pruning_speed")),
    "lm-eval-throughput": Benchmark(
        "lm_eval_model_throughput.py", "lm-eval through our classifier model vs a plain transformers loop (SST-2)",
        ("--data-dir", "{data}", "--repeats", "1")),
    "predict-round-trip": Benchmark(
        "predict_round_trip.py", "glue-sparse predict's files read back and scored vs lm-eval's own scores (validation)",
        ("--run", "{out}/tiny_run", "--tiny-run", "--data-dir", "{data}", "--out", "{out}/round_trip")),
    "removal-drift": Benchmark("removal_drift.py", "removed share of gated weights vs the gate learning rate "
                               "(tiny BERT, fixture RTE): the removal recipe against gates shut by training",
                               ("--out", "{out}/drift", "--gate-lrs", "1", "--scores", "logit", "--epochs", "1")),
    "removal-ranking": Benchmark(
        "removal_ranking_by_module.py", "which kinds of gates (query, key, value, FFN...) a Taylor-ranked removal "
        "closes first, trained up to its first closing (or from kept checkpoints): importance per kind and share "
        "closed", ("--tiny", "--output", "{out}/ranking")),
    "thread-determinism": Benchmark(
        "thread_determinism.py", "MiniLM fine-tuning steps at 1 vs 2 intra-op threads: gradients, weights and "
        "validation logits that differ (why a re-trained teacher need not match its full row)",
        ("--data-dir", "{data}", "--out", "{out}/threads", "--steps", "1", "--batch-size", "2")),
    "shard-hashes": Benchmark("shard_hashes.py", "naming pre-training shards by content at start-up: re-hashing "
                              "every shard in every process vs the hashes remembered in the cache",
                              ("--shards", "4", "--mb", "0.1", "--runs", "1")),
    "cli-startup": Benchmark("cli_startup.py", "glue-sparse --help and subcommand --help vs python -c pass",
                             ("--runs", "1")),
    "startup-hook": Benchmark("startup_hook.py", "python start-up with the lazy lm-eval hook on vs off", ("1",)),
    "aggregation-speed": Benchmark("aggregation_speed.py",
                                   "our metric aggregations vs lm-eval's bootstrapped ones (CoLA, MRPC)"),
    "saved-activations": Benchmark("gates_saved_activations.py",
                                   "bytes autograd keeps per MiniLM training step: full, LoRA, gates",
                                   ("--batch", "1", "--length", "8")),
    "gpu-check": Benchmark("gpu_check.py", "the prepared GPU check: pretrain vs a plain loop (tokens/s, MFU), "
                           "finetune full/LoRA/gates, pruned speed, lm-eval on the device; targets judged",
                           ("--size", "tiny", "--device", "cpu", "--out", "{out}/gpu_check.json")),
    "smollm2-glue": Benchmark("smollm2_glue.py", "packaged SmolLM2-135M on the glue_sparse tasks via the lm_eval CLI",
                              ("--tasks", "rte", "--limit", "2", "--data-dir", "{data}")),
    "pretrain-pipeline": Benchmark(
        "pretrain_pipeline.py", "pre-training input pipeline: token cache vs tokenising while training (tokens/s, "
        "data wait per step)", ("--synthetic-docs", "60", "--tokenizer", "bpe:300", "--seqlen", "32", "--batch-size",
                                "2", "--batches", "5", "--steps", "2", "--out", "{out}/pipeline.json")),
    "onnx-speed": Benchmark(
        "onnx_speed.py", "MiniLM dense and magnitude-pruned at 30/50/70%: torch eager fp32 vs ONNX Runtime fp32 and "
        "int8 (glue-sparse speed --runtimes torch,onnxruntime's table; results/onnx_speed)",
        ("--levels", "0.5", "--batch-sizes", "2", "--batches", "1", "--rounds", "1", "--threads", "1", "--data-dir",
         "{data}", "--output", "{out}/onnx_speed")),
    "onnx-int8-scores": Benchmark(
        "onnx_int8_scores.py", "GLUE scores of full fine-tunes in torch fp32 vs ONNX Runtime fp32 and int8 (per "
        "matrix, per channel), through the same lm-eval tasks (results/onnx_int8_scores)",
        ("--out", "{out}/int8", "--tasks", "rte", "--train-limit", "16", "--epochs", "1", "--data-dir", "{data}")),
    "pretrain-cpu": Benchmark("pretrain_cpu.sh",
                              "the committed CPU pre-training sweep and twins (results/pretrain_c4_cpu)", None),
    "minilm-converged-kd": Benchmark("minilm_converged_kd.sh",
                                     "issue #51's arms of the converged MiniLM grid (distilled, mask-search), one "
                                     "task and seed per part (results/minilm_converged/kd-*)", None),
    "minilm-levels": Benchmark("minilm_levels.sh",
                               "issue #61's arms of the converged MiniLM grid at 30, 50 and 70% removed (gated arms "
                               "from the full run and from mask search's mask), one task, seed and level per part "
                               "(results/minilm_converged/levels-*)", None),
}


def command(name: str, args: list[str]) -> list[str]:
    bench = SUITE[name]
    runner = ["bash"] if bench.script.endswith(".sh") else [sys.executable]
    return [*runner, str(HERE / bench.script), *args]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print(__doc__.strip() + "\n")
        for name, bench in SUITE.items():
            print(f"  {name:20} {bench.measures}")
        return 0
    name, args = argv[0], argv[1:]
    if name not in SUITE:
        print(f"benchmarks/run.py: unknown benchmark {name!r}; known: {', '.join(SUITE)}", file=sys.stderr)
        return 2
    if args[:1] == ["--smoke"]:
        if len(args) != 3:
            print("benchmarks/run.py: --smoke takes DATA_DIR OUT_DIR", file=sys.stderr)
            return 2
        if SUITE[name].smoke is None:
            return subprocess.run(["bash", "-n", str(HERE / SUITE[name].script)]).returncode
        args = [a.format(data=args[1], out=args[2]) for a in SUITE[name].smoke]
    return subprocess.run(command(name, args)).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
