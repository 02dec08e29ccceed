"""One prepared GPU check (issue #49, item 4): the real commands at GPU size, with the targets they must meet,
in one JSON and one Markdown table. One H200 runs ``--size full`` in under 7 minutes; ``--size tiny`` runs
the same code on the CPU in the default test suite (``benchmarks/run.py gpu-check --smoke``).

Sections (each reports its own error and the rest go on):
- ``gates_and_pruning``: bf16 gate gradients and gated == pruned on the device (BERT and Llama shapes);
- ``pretrain``: ``glue-sparse pretrain`` llama_60m, dense and gates 40% (bf16 on a GPU), tokens/s and
  model-FLOPs utilisation, against a plain PyTorch loop of the same model, batch and data (no Trainer);
- ``finetune``: ``glue-sparse finetune`` full, LoRA and gates on a BERT-base-shaped model: s/step, samples/s,
  peak memory;
- ``speed``: ``glue-sparse speed`` BERT-base-shaped and Llama-shaped, 20/40/60% removed, batch 32 and 128,
  bf16 on a GPU;
- ``lm_eval``: ``lm_eval --model hf-classifier`` on the gates checkpoint and ``--model hf`` on the dense
  pre-trained model, through the CLI, on ``glue_sparse_sst2``; and our classifier model on the device
  against the CPU in fp32.

No download: random weights, tokenizers trained here, and a data folder holding ``glue/sst2/{train,
validation}.jsonl[.gz]`` and ``c4/validation_sample.jsonl`` (``--data-dir``; without one, synthetic text).
``--prepare DIR`` fills DIR with that data and the wheels a bare GPU machine lacks; see
``docs/gpu-check.md`` for the device command.

    python benchmarks/gpu_check.py --size full --data-dir gpu_carry/data --out gpu_check.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pretrain_pipeline import synthetic_corpus  # noqa: E402  (this folder: the script's own sys.path[0])

from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: what a bare GPU machine with torch, transformers, peft and accelerate lacks (docs/gpu-check.md)
CARRY_PACKAGES = ("lm-eval", "datasets", "evaluate", "transformers", "peft", "pytablewriter", "pytz")
#: their dependencies that the device image (device/KINDS.md, 2026-11-17) does not hold, or holds too old
CARRY_DEPENDENCIES = ("huggingface-hub", "kernels", "dill", "multiprocess", "more-itertools", "DataProperty",
                      "mbstrdecoder", "pathvalidate", "tabledata", "tcolorpy", "typepy", "chardet", "nltk")
#: bf16 dense peak of a card, TFLOP/s (vendor figures), for model-FLOPs utilisation
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0}
TARGETS = {"pretrain_vs_plain": 0.9, "pretrain_mfu": 0.30, "gates_over_full_step": 1.3, "bert_speedup_40_b128": 1.3}


@dataclass(frozen=True)
class Size:
    """Every size the check runs at; ``--set FIELD=VALUE`` changes one for a run (e.g. a CPU dry run)."""

    pretrain_config: str  # a GaLore size, or "tiny" (written here)
    pretrain_steps: int
    seqlen: int
    pretrain_batch: int
    pretrain_tokenizer: str
    train_docs: str
    eval_docs: str
    encoder: dict
    wordpiece_vocab: int
    finetune_steps: int
    finetune_batch: int
    speed_batches: str  # batch sizes timed
    speed_rounds: int  # timing rounds
    speed_round_batches: int  # batches per timing round
    causal_config: str
    eval_limit: int


SIZES = {
    "full": Size("llama_60m", 150, 256, 64, "bpe:16384", "0:1800", "1800:2000",
                 {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
                 8192, 100, 32, "32,128", 5, 4, "llama_350m", 872),
    "tiny": Size("tiny", 6, 32, 4, "bpe:300", "0:300", "300:400",
                 {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64},
                 400, 3, 8, "2", 1, 1, "tiny", 16),
}


def with_settings(size: Size, settings: list[str]) -> Size:
    """``size`` with each ``FIELD=VALUE`` of ``--set`` applied (the value cast to the field's type)."""
    changes = {}
    for item in settings:
        name, _, value = item.partition("=")
        current = getattr(size, name, None)
        if current is None or isinstance(current, dict) or not value:
            raise SystemExit(f"gpu_check.py: --set {item!r}: expected FIELD=VALUE with FIELD one of "
                             f"{', '.join(f.name for f in dataclasses.fields(Size) if f.name != 'encoder')}")
        changes[name] = type(current)(value)
    return dataclasses.replace(size, **changes)


TINY_LLAMA = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": 512,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": False}


# ------------------------------------------------------------------------------------------ inputs
def data_folder(data_dir: str | None, scratch: Path) -> Path:
    """The data folder the commands read: the one given, or synthetic SST-2 and C4 text."""
    if data_dir:
        return Path(data_dir)
    root = scratch / "data"
    synthetic_corpus(root / "c4", 400).rename(root / "c4" / "validation_sample.jsonl")
    words = "the a film was good bad great awful river house fine dull".split()
    for split, n in (("train", 256), ("validation", 64)):
        rows = [{"sentence": " ".join(words[(i * 5 + j) % len(words)] for j in range(4 + i % 7)), "label": i % 2,
                 "idx": i} for i in range(n)]
        (root / "glue" / "sst2").mkdir(parents=True, exist_ok=True)
        (root / "glue" / "sst2" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def encoder_folder(folder: Path, data: Path, size: Size) -> Path:
    """A random BERT-shaped classifier with a WordPiece tokenizer trained on the SST-2 sentences."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from glue_sparse_tasks.data import load_glue_split

    texts = list(load_glue_split("sst2", "train", data_dir=str(data / "glue"))["sentence"])
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(texts, vocab_size=size.wordpiece_vocab)
    folder.mkdir(parents=True, exist_ok=True)
    wordpiece.save_model(str(folder))
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512,
                                                     num_labels=2, **size.encoder))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def causal_folder(folder: Path, tokenizer_folder: Path, config_name: str) -> Path:
    """A random Llama of a GaLore size (or tiny) with the pre-training run's tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from glue_sparse.pretrain.run import model_config_path

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    config = (LlamaConfig(**{**TINY_LLAMA, "vocab_size": len(tokenizer)}) if config_name == "tiny" else
              LlamaConfig.from_json_file(str(model_config_path(config_name))))
    config.vocab_size = len(tokenizer)
    config.eos_token_id = config.bos_token_id = tokenizer.eos_token_id
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# ------------------------------------------------------------------------------------------ sections
def check_gates_and_pruning(device: str) -> dict:
    import peft
    from transformers import BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForCausalLM

    from glue_sparse.speed.timing import set_random_gate_pattern
    from sparse_models import SparseGatesConfig, parameter_accounting

    out = {}
    torch.manual_seed(0)
    for name, model, task in (
        ("bert", BertForSequenceClassification(BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2,
                                                          num_attention_heads=4, intermediate_size=128)), "SEQ_CLS"),
        ("llama", LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2,
                                               intermediate_size=128)), "CAUSAL_LM"),
    ):
        gated = peft.get_peft_model(model.to(device), SparseGatesConfig(task_type=task))
        ids = torch.randint(1, 300, (4, 16), device=device)
        gated.train()
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
            logits = gated(input_ids=ids).logits
        loss = logits.float().mean() + gated.sparsity_loss()
        loss.backward()
        grads = [p.grad for n, p in gated.named_parameters() if "sparse_gates_" in n]
        set_random_gate_pattern(gated, 0.3)
        gated.eval()
        with torch.no_grad():
            expected = gated(input_ids=ids).logits
        removed = parameter_accounting(gated).removed_share_of_gated
        pruned = gated.merge_and_unload()
        with torch.no_grad():
            got = pruned(input_ids=ids).logits
        out[name] = {"bf16_train_loss_finite": bool(torch.isfinite(loss)),
                     "gate_grads_present": bool(grads) and all(g is not None for g in grads),
                     "removed_share_of_gated": removed,
                     "pruned_vs_gated_max_abs_diff": float((got - expected).abs().max()),
                     "pruned_devices": sorted({str(p.device) for p in pruned.parameters()})}
    return out


class StepClock:
    """Host time at the end of every optimiser step; the median interval is the steady step time."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def step_seconds(self, skip: int = 3) -> float:
        gaps = [b - a for a, b in zip(self.ends, self.ends[1:])][skip:]
        return statistics.median(gaps or [float("nan")])


def plain_loop(options, blocks, tokenizer, steps: int, device: str, precision: str) -> tuple[float, int]:
    """Median step seconds of forward, backward, clip, AdamW over the same model and batches, no Trainer;
    and the model's parameter count."""
    from glue_sparse.pretrain.run import build_model
    from sparse_models.runtime.devices import autocast

    model = build_model(options, tokenizer).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, fused=device.startswith("cuda"))
    loader = iter(torch.utils.data.DataLoader(blocks, batch_size=options.batch_size, pin_memory=device != "cpu"))
    clock = StepClock()
    for _ in range(steps):
        batch = {k: v.to(device, non_blocking=True) for k, v in next(loader).items()}
        with autocast(torch.device(device), precision):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        clock.ends.append(time.perf_counter())
    return clock.step_seconds(), sum(p.numel() for p in model.parameters())


def check_pretrain(size: Size, data: Path, scratch: Path, device: str, peak_tflops: float | None) -> dict:
    from transformers import TrainerCallback

    from glue_sparse.pretrain.data import PackedBlocks, lane_sources, load_tokenizer, train_source
    from glue_sparse.pretrain.options import PretrainOptions
    from glue_sparse.pretrain.run import run_pretrain
    from sparse_models.runtime.devices import resolve_device, resolve_precision

    config = size.pretrain_config
    if config == "tiny":
        config = str(scratch / "llama_tiny.json")
        Path(config).write_text(json.dumps(TINY_LLAMA))
    precision = resolve_precision("auto", resolve_device(device))
    tokens = size.pretrain_steps * size.pretrain_batch * size.seqlen
    out: dict = {"model_config": size.pretrain_config, "precision": precision, "seqlen": size.seqlen,
                 "batch": size.pretrain_batch, "steps": size.pretrain_steps}
    for arm, extra in (("dense", {}), ("gates40", {"method": "gates", "target_removal": 0.4})):
        options = PretrainOptions(out_dir=str(scratch / f"pretrain_{arm}"), model_config=config, data_dir=str(data),
                                  hub=False, tokenizer=size.pretrain_tokenizer, train_docs=size.train_docs,
                                  eval_docs=size.eval_docs, tokens=tokens, seqlen=size.seqlen, batch_size=size.pretrain_batch,
                                  eval_every=size.pretrain_steps, eval_tokens=8 * size.seqlen,
                                  save_steps=10 * size.pretrain_steps, device=device, **extra)
        clock = StepClock()

        class Clock(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                clock.ends.append(time.perf_counter())

        record = run_pretrain(options, callbacks=[Clock()])
        source = train_source(None, str(data), options.train_docs)
        tokenizer, _ = load_tokenizer(options.tokenizer, source)
        plain, params = plain_loop(options, PackedBlocks(lane_sources(source, 1), tokenizer, size.seqlen), tokenizer,
                           size.pretrain_steps, device, precision)
        per_step = size.pretrain_batch * size.seqlen
        trainer_tps, plain_tps = per_step / clock.step_seconds(), per_step / plain
        mfu = 6 * params * trainer_tps / (peak_tflops * 1e12) if peak_tflops else None
        out[arm] = {"parameters": params, "trainer_tokens_per_s": trainer_tps, "plain_loop_tokens_per_s": plain_tps,
                    "trainer_over_plain": trainer_tps / plain_tps, "mfu": mfu,
                    "final_perplexity": record["final"]["val_perplexity"],
                    "removed_share_of_gated": (record["accounting"] or {}).get("removed_share_of_gated")}
    out["model_dir"] = str(scratch / "pretrain_dense" / "model")
    return out


def check_finetune(size: Size, data: Path, encoder: Path, scratch: Path, device: str) -> dict:
    from glue_sparse.finetune.options import FinetuneConfig
    from glue_sparse.finetune.run import run_finetune

    out = {}
    for method in ("full", "lora", "gates"):
        extra = {"target_removal": 0.3} if method == "gates" else {}
        config = FinetuneConfig(task="sst2", method=method, seed=1, base_model=str(encoder), max_steps=size.finetune_steps,
                                batch_size=size.finetune_batch, train_limit=size.finetune_steps * size.finetune_batch,
                                device=device, **extra)
        record = run_finetune(config, scratch / f"finetune_{method}", data_dir=str(data / "glue"), use_hub=False)
        step = record["seconds_per_step"]
        out[method] = {"seconds_per_step": step, "samples_per_s": size.finetune_batch / step,
                       "peak_gpu_mb": (record.get("peak_gpu_bytes") or 0) / 2**20 or None,
                       "peak_rss_mb": record["peak_rss_bytes"] / 2**20, "accuracy": record.get("final_score"),
                       "device": record.get("device")}
    out["gates_over_full_step"] = out["gates"]["seconds_per_step"] / out["full"]["seconds_per_step"]
    out["gates_dir"] = str(scratch / "finetune_gates" / "sst2")
    return out


def check_speed(size: Size, data: Path, encoder: Path, causal: Path, scratch: Path, device: str) -> dict:
    from glue_sparse.speed.causal import run_causal_speed
    from glue_sparse.speed.options import SpeedOptions
    from glue_sparse.speed.run import run_speed

    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    common = {"removed": "0.2,0.4,0.6", "batch_sizes": size.speed_batches, "device": device,
              "precision": "bf16" if device.startswith("cuda") else "fp32",
              "batches": size.speed_round_batches, "rounds": size.speed_rounds}
    encoder_rows = run_speed(SpeedOptions(model=str(encoder), data_dir=str(data / "glue"), layouts="auto",
                                          output=str(scratch / "speed_bert"), **common))
    causal_rows = run_causal_speed(SpeedOptions(model=str(causal), data_dir=str(data), causal=True,
                                                causal_seqlen=size.seqlen, **common))
    pick = lambda r: {k: r.get(k) for k in ("batch_size", "closed_share_of_gated", "removed_share_of_gated",  # noqa: E731
                                             "dense_ms", "pruned_ms", "latency_ratio", "target_removal")}
    return {"dtype": dtype, "bert": [pick(r) for r in encoder_rows], "llama": [pick(r) for r in causal_rows]}


def _cli(args: list[str], out: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "glue_sparse.cli.main", *args, "--output_path", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=900)
    if done.returncode:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-1500:]}")
    found = sorted(out.rglob("results_*.json"))
    scores = json.loads(found[-1].read_text())["results"]["glue_sparse_sst2"]
    return {"seconds": time.perf_counter() - started,
            "scores": {k: v for k, v in scores.items() if isinstance(v, float) and "stderr" not in k}}


def check_lm_eval(size: Size, data: Path, gates_dir: str, causal_model: str, scratch: Path, device: str) -> dict:
    metadata = json.dumps({"data_dir": str(data / "glue")})
    common = ["--tasks", "glue_sparse_sst2", "--device", device, "--limit", str(size.eval_limit), "--metadata", metadata]
    return {
        "hf_classifier": _cli(["eval", "--model", "hf-classifier", "--model_args", f"pretrained={gates_dir}",
                               "--batch_size", "64", *common], scratch / "lm_eval_classifier"),
        "hf": _cli(["eval", "--model", "hf", "--model_args", f"pretrained={causal_model},dtype=auto",
                    "--batch_size", "32", *common], scratch / "lm_eval_hf"),
        "classifier_device_vs_cpu": classifier_agreement(gates_dir, data, device),
    }


def classifier_agreement(checkpoint: str, data: Path, device: str) -> dict:
    """Our lm-eval model on the device (dtype auto) against the CPU in fp32, on the same requests."""
    from lm_eval.api.instance import Instance

    from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM
    from glue_sparse_tasks.data import load_glue_split

    docs = [{**row, "glue_task": "sst2"} for row in load_glue_split("sst2", "validation", data_dir=str(data / "glue"))]
    requests = [Instance("loglikelihood", doc, ("", f" {c}"), idx=c, metadata=("glue_sparse_sst2", i, 1))
                for i, doc in enumerate(docs) for c in (0, 1)]
    for r in requests:
        r.task_name, r.doc_id = "glue_sparse_sst2", r.metadata[1]
    answers = {}
    for label, dev, dtype in (("cpu_fp32", "cpu", "float32"), ("device_auto", device, "auto")):
        lm = HFClassifierLM(pretrained=checkpoint, device=dev, dtype=dtype, batch_size="auto")
        answers[label] = lm.loglikelihood(requests)
    a, b = answers["cpu_fp32"], answers["device_auto"]
    return {"argmax_agreement": statistics.fmean(x[1] == y[1] for x, y in zip(a, b)),
            "max_abs_logprob_diff": max(abs(x[0] - y[0]) for x, y in zip(a, b))}


# ------------------------------------------------------------------------------------------ report
def judged(report: dict) -> list[tuple[str, float | None, float, bool | None]]:
    """(target, measured, threshold, met) for every target the issue states."""
    rows = []
    for arm in ("dense", "gates40"):
        entry = (report.get("pretrain") or {}).get(arm) or {}
        rows.append((f"pretrain {arm}: trainer / plain loop tokens/s", entry.get("trainer_over_plain"),
                     TARGETS["pretrain_vs_plain"], None))
        rows.append((f"pretrain {arm}: model-FLOPs utilisation", entry.get("mfu"), TARGETS["pretrain_mfu"], None))
    rows.append(("finetune: gates step / full step (at most)", (report.get("finetune") or {}).get("gates_over_full_step"),
                 TARGETS["gates_over_full_step"], None))
    bert = [r for r in (report.get("speed") or {}).get("bert", [])
            if r["batch_size"] == max(r2["batch_size"] for r2 in report["speed"]["bert"])
            and abs((r["closed_share_of_gated"] or 0) - 0.4) < 0.05]
    rows.append(("speed: BERT-base-shaped pruned / dense at 40%, largest batch", bert[0]["latency_ratio"] if bert
                 else None, TARGETS["bert_speedup_40_b128"], None))
    out = []
    for name, value, threshold, _ in rows:
        at_most = "(at most)" in name
        met = None if value is None else (value <= threshold if at_most else value >= threshold)
        out.append((name, value, threshold, met))
    return out


def markdown(report: dict) -> str:
    lines = [f"# GPU check: {report['gpu'] or 'CPU'} ({report['size']} size)", "",
             f"torch {report['torch']}, device {report['device']}, peak {report['peak_tflops']} TFLOP/s bf16 "
             f"for model-FLOPs utilisation (6 x parameters x tokens/s); {report['seconds']:.0f} s in all."
             + (" Tiny size: a smoke run of the same code; the targets are meant for --size full on a GPU."
                if report["size"] == "tiny" else ""), "",
             "| target | measured | threshold | met |", "|---|---:|---:|---|"]
    for name, value, threshold, met in judged(report):
        lines.append(f"| {name} | {'–' if value is None else f'{value:.3f}'} | {threshold:g} | "
                     f"{'–' if met is None else ('met' if met else 'missed')} |")
    errors = [k for k, v in report.items() if isinstance(v, dict) and "error" in v]
    lines += ["", f"Sections that failed: {', '.join(errors) or 'none'}.", ""]
    return "\n".join(lines)


def prepare(folder: Path, shared: Path) -> None:
    """Fill ``folder`` (git-ignored; carried to the device) with the data and the wheels a bare machine
    lacks: pure-Python wheels of CARRY_PACKAGES at the versions installed here, and their small deps."""
    from importlib import metadata

    (folder / "data" / "glue").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "c4").mkdir(parents=True, exist_ok=True)
    shutil.copytree(shared / "glue" / "sst2", folder / "data" / "glue" / "sst2", dirs_exist_ok=True)
    shutil.copy(shared / "c4" / "validation_sample.jsonl", folder / "data" / "c4" / "validation_sample.jsonl")
    # what the image (device/KINDS.md's package list) lacks, at the versions this project runs with here
    pins = [f"{name}=={metadata.version(name)}" for name in (*CARRY_PACKAGES, *CARRY_DEPENDENCIES)]
    source_only = ["sqlitedict", "rouge-score", "word2number"]  # pure Python, published as sdists: built here
    wheels = str(folder / "wheels")
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64", "--dest", wheels,
                    *pins], check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "--wheel-dir", wheels, *source_only], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="full" if torch.cuda.is_available() else "tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--data-dir", help="folder with glue/sst2/ and c4/validation_sample.jsonl (default: synthetic)")
    parser.add_argument("--peak-tflops", type=float, help="the device's bf16 dense peak (default: by its name)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="change one field of the size for this run (repeatable), e.g. pretrain_steps=30")
    parser.add_argument("--sections", default="gates_and_pruning,pretrain,finetune,speed,lm_eval")
    parser.add_argument("--out", default="gpu_check.json", help="the JSON; the Markdown table goes beside it")
    parser.add_argument("--prepare", metavar="DIR", help="only fill DIR with the data and wheels to carry, and stop")
    parser.add_argument("--shared", default=str(REPO.parent / "shared" / "data"), help="with --prepare: the data")
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(Path(args.prepare), Path(args.shared))
        return 0
    size, device = with_settings(SIZES[args.size], args.set), args.device
    gpu = torch.cuda.get_device_name() if device.startswith("cuda") else None
    peak = args.peak_tflops or next((v for k, v in PEAK_TFLOPS.items() if gpu and k in gpu), None)
    scratch = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    os.environ.setdefault("GLUE_SPARSE_CACHE", str(scratch / "cache"))
    data = data_folder(args.data_dir, scratch)
    report: dict = {"torch": torch.__version__, "device": device, "gpu": gpu, "size": args.size,
                    "set": args.set, "size_fields": dataclasses.asdict(size), "peak_tflops": peak}
    started = time.perf_counter()
    state: dict = {}

    def run(name: str, fn) -> None:
        if name not in args.sections.split(","):
            return
        begun = time.perf_counter()
        try:
            report[name] = fn()
        except Exception as exc:  # noqa: BLE001  (report every failure, keep checking the rest)
            report[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}
        report[name + "_seconds"] = time.perf_counter() - begun
        print(f"{name} ({report[name + '_seconds']:.0f} s)", json.dumps(report[name], default=str)[:800], flush=True)

    run("gates_and_pruning", lambda: check_gates_and_pruning(device))
    run("pretrain", lambda: check_pretrain(size, data, scratch, device, peak))
    state["encoder"] = encoder_folder(scratch / "encoder", data, size)
    tokenizer_source = Path((report.get("pretrain") or {}).get("model_dir") or state["encoder"])
    state["causal"] = causal_folder(scratch / "causal", tokenizer_source, size.causal_config)
    run("finetune", lambda: check_finetune(size, data, state["encoder"], scratch, device))
    run("speed", lambda: check_speed(size, data, state["encoder"], state["causal"], scratch, device))
    run("lm_eval", lambda: check_lm_eval(size, data, (report.get("finetune") or {}).get("gates_dir", ""),
                                         (report.get("pretrain") or {}).get("model_dir", str(state["causal"])),
                                         scratch, device))
    report["seconds"] = time.perf_counter() - started
    report["targets"] = [{"target": n, "measured": v, "threshold": t, "met": m} for n, v, t, m in judged(report)]
    write_json_atomic(Path(args.out), report)
    table = markdown(report)
    write_text_atomic(Path(args.out).with_suffix(".md"), table)
    print(table)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
