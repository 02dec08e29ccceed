"""One prepared accelerator check: the GPU paths of sparse gates, pruning, the Trainer and hf-classifier.

Needs only torch, transformers, peft, tokenizers and lm_eval (no weights, no data: tiny random models
and a tokenizer trained here). Runs on CPU too (``--device cpu``) so it can be tried before a lease.

    python benchmarks/gpu_check.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = "the a film cat dog sat ran on mat good bad great awful river house yes no".split()


def tokenizer_here(folder: Path):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([" ".join(WORDS)] * 20, vocab_size=300, special_tokens=["<pad>", "<s>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>", eos_token="<s>")
    tok.save_pretrained(folder)
    return tok


def check_gates_and_pruning(device: str) -> dict:
    import peft
    from transformers import BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForCausalLM

    from glue_sparse.experiments.speed import set_random_gate_pattern
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
        accounting = parameter_accounting(gated)
        pruned = gated.merge_and_unload()
        with torch.no_grad():
            got = pruned(input_ids=ids).logits
        devices = {str(b.device) for b in pruned.buffers()} | {str(p.device) for p in pruned.parameters()}
        out[name] = {"bf16_train_loss_finite": bool(torch.isfinite(loss)),
                     "gate_grads_present": all(g is not None for g in grads) and len(grads) > 0,
                     "removed_share_of_gated": accounting.removed_share_of_gated,
                     "pruned_vs_gated_max_abs_diff": float((got - expected).abs().max()),
                     "pruned_devices": sorted(devices)}
    return out


def check_trainer(device: str) -> dict:
    import peft
    from transformers import BertConfig, BertForSequenceClassification, TrainingArguments

    from sparse_models import SparseGatesConfig
    from sparse_models.trainer import SparseGatesTrainer

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"input_ids": torch.randint(1, 300, (12,), generator=g), "labels": torch.tensor(i % 2)}

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2,
                                                     num_attention_heads=4, intermediate_size=128))
    gated = peft.get_peft_model(model, SparseGatesConfig(task_type="SEQ_CLS"))
    before = {n: p.detach().clone() for n, p in gated.named_parameters() if "sparse_gates_" in n}
    args = TrainingArguments(output_dir="/tmp/gpu_check_trainer", max_steps=8, per_device_train_batch_size=16,
                             learning_rate=1e-3, bf16=device.startswith("cuda"), report_to="none",
                             save_strategy="no", logging_steps=2, use_cpu=not device.startswith("cuda"))
    trainer = SparseGatesTrainer(model=gated, args=args, train_dataset=Rows(), gate_learning_rate=0.05)
    result = trainer.train()
    moved = max(float((p.detach().cpu() - before[n].cpu()).abs().max())
                for n, p in gated.named_parameters() if n in before)
    return {"device": str(trainer.args.device), "bf16": args.bf16, "train_loss": result.training_loss,
            "gate_logits_max_change": moved,
            "sparsity_loss_logged": any("sparsity_loss" in e for e in trainer.state.log_history)}


def check_lm_eval_model(device: str, folder: Path) -> dict:
    from lm_eval.api.instance import Instance
    from transformers import BertConfig, BertForSequenceClassification

    from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM

    tokenizer_here(folder)
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2,
                                             num_attention_heads=4, intermediate_size=128,
                                             num_labels=2)).save_pretrained(folder)
    docs = [{"sentence": " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(5 + i % 9)), "label": i % 2,
             "idx": i, "glue_task": "sst2"} for i in range(200)]
    requests = [Instance("loglikelihood", doc, ("", f" {c}"), idx=c, metadata=("glue_sparse_sst2", i, 1))
                for i, doc in enumerate(docs) for c in (0, 1)]
    for r in requests:
        r.task_name, r.doc_id = "glue_sparse_sst2", r.metadata[1]
    out = {}
    for label, dev, dtype in (("cpu_fp32", "cpu", "float32"), ("device_auto", device, "auto")):
        lm = HFClassifierLM(pretrained=str(folder), device=dev, dtype=dtype, batch_size="auto",
                           results_json=str(folder / f"{label}.json"))
        start = time.perf_counter()
        answers = lm.loglikelihood(requests)
        out[label] = {"device": lm.device_name, "dtype": str(lm.dtype), "seconds": time.perf_counter() - start,
                      "batch_size": lm.report["sst2"]["batch_size"], "answers": answers}
    a, b = out["cpu_fp32"].pop("answers"), out["device_auto"].pop("answers")
    out["argmax_agreement"] = statistics.fmean(x[1] == y[1] for x, y in zip(a, b))
    out["max_abs_logprob_diff"] = max(abs(x[0] - y[0]) for x, y in zip(a, b))
    return out


def check_pruned_speed(device: str) -> dict:
    import peft
    from transformers import BertConfig, BertForSequenceClassification

    from glue_sparse.experiments.speed import calibrate_closed_fraction, time_forwards
    from sparse_models import SparseGatesConfig

    torch.manual_seed(0)
    config = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    dense = BertForSequenceClassification(config).to(device).eval()
    rows = {}
    for removed in (0.4, 0.6):
        gated = peft.get_peft_model(BertForSequenceClassification(config).to(device), SparseGatesConfig())
        gated.base_model.model.load_state_dict(dense.state_dict(), strict=False)
        calibrate_closed_fraction(gated, removed)
        pruned = gated.eval().merge_and_unload()
        for bs in (32, 256):
            batches = [{"input_ids": torch.randint(1, 30000, (bs, 128), device=device)} for _ in range(10)]
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            secs = time_forwards([dense, pruned], batches, rounds=5)
            rows[f"removed{removed}_batch{bs}"] = {"dense_ms": 1000 * secs[0] / 10, "pruned_ms": 1000 * secs[1] / 10,
                                                  "latency_ratio": secs[0] / secs[1]}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--skip-speed", action="store_true", help="skip the (slow on CPU) speed section")
    args = parser.parse_args()
    report = {"torch": torch.__version__, "device": args.device,
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    for name, fn in (("gates_and_pruning", lambda: check_gates_and_pruning(args.device)),
                     ("trainer", lambda: check_trainer(args.device)),
                     ("lm_eval_model", lambda: check_lm_eval_model(args.device, Path("/tmp/gpu_check_model"))),
                     ("pruned_speed", lambda: {} if args.skip_speed else check_pruned_speed(args.device))):
        start = time.perf_counter()
        try:
            report[name] = fn()
        except Exception as exc:  # noqa: BLE001  (report every failure, keep checking the rest)
            import traceback

            report[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
        report[name + "_seconds"] = time.perf_counter() - start
        print(name, json.dumps(report[name], default=str)[:600], flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
