"""Causal-LM perplexity protocols, the C4/WikiText-2 lm-eval tasks and gate post-training (tiny Llama)."""

from __future__ import annotations

import gzip
import json
import math
import random

import peft
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from glue_sparse.perplexity.options import PerplexityError
from glue_sparse.perplexity.protocols import galore_perplexity, sparsegpt_perplexity
from glue_sparse.posttrain.run import posttrain_gates
from glue_sparse_tasks.local_formats import GlueDataError
from glue_sparse_tasks.text_corpora import load_c4_texts, split_wikitext_pages
from sparse_models import SparseGatesConfig
from tests.lm_eval_helpers import TASKS_DIR
from tests.tiny_models import save_tiny_llama_with_tokenizer, set_gate_pattern, write_text_corpora

WORDS = "the a cat dog sat ran on under mat tree quickly slowly big small red green house river".split()


def _docs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))) + "." for _ in range(n)]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return save_tiny_llama_with_tokenizer(tmp_path_factory.mktemp("llama"), _docs(200))


@pytest.fixture(scope="module")
def c4_dir(tmp_path_factory):
    return write_text_corpora(tmp_path_factory.mktemp("ppl_data"), _docs(60, 1),
                              " \n = First = \n \n a b c . \n \n = = Section = = \n d e . \n = Second = \n f g h . \n")


def _load(path):
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def test_uniform_model_has_vocabulary_size_perplexity(tiny_llama):
    model, tokenizer = _load(tiny_llama)
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: next-token distribution uniform over the vocabulary
    vocab = model.config.vocab_size
    for result in (sparsegpt_perplexity(model, tokenizer, _docs(50), n_samples=3, seqlen=64),
                   galore_perplexity(model, tokenizer, _docs(10), max_length=32, batch_size=4)):
        assert result.perplexity == pytest.approx(vocab, rel=1e-5)


def test_protocol_token_counts_match_their_definitions(tiny_llama):
    model, tokenizer = _load(tiny_llama)
    docs = _docs(50)
    sg = sparsegpt_perplexity(model, tokenizer, docs, n_samples=4, seqlen=48, docs=30)
    assert sg.tokens_used == 4 * 48 and sg.tokens_scored == 4 * 47 and sg.windows == 4
    assert math.isfinite(sg.perplexity) and sg.perplexity > 1
    lengths = [min(len(tokenizer(d).input_ids), 32) for d in docs[:8]]
    ga = galore_perplexity(model, tokenizer, docs, max_length=32, token_budget=sum(lengths) - 1, batch_size=4)
    assert ga.tokens_used == sum(lengths)  # stops at the first batch that reaches the budget
    assert ga.tokens_scored == sum(n - 1 for n in lengths) and ga.windows == 2
    assert ga.settings["docs_used"] == 8 and ga.settings["budget_reached"]


def test_gated_and_pruned_perplexities_are_equal(tiny_llama):
    model, tokenizer = _load(tiny_llama)
    gated = peft.get_peft_model(model, SparseGatesConfig(task_type="CAUSAL_LM")).eval()
    set_gate_pattern(gated, closed=0.3)
    docs = _docs(40)
    before = {p: f(gated, tokenizer, docs, **kw).perplexity for p, f, kw in (
        ("sg", sparsegpt_perplexity, {"n_samples": 2, "seqlen": 64}),
        ("ga", galore_perplexity, {"max_length": 32}))}
    pruned = gated.merge_and_unload()
    after = {"sg": sparsegpt_perplexity(pruned, tokenizer, docs, n_samples=2, seqlen=64).perplexity,
             "ga": galore_perplexity(pruned, tokenizer, docs, max_length=32).perplexity}
    for key in before:
        assert after[key] == pytest.approx(before[key], rel=1e-4)


def test_bad_inputs(tiny_llama, tmp_path):
    model, tokenizer = _load(tiny_llama)
    with pytest.raises(PerplexityError, match="longer than the model's context \\(128"):
        sparsegpt_perplexity(model, tokenizer, _docs(50), n_samples=1, seqlen=4096)
    with pytest.raises(PerplexityError, match="are needed"):
        sparsegpt_perplexity(model, tokenizer, _docs(2), n_samples=64, seqlen=128)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(GlueDataError, match="empty.jsonl: the file holds no documents"):
        load_c4_texts(path=str(empty))
    no_text = tmp_path / "c4.json.gz"
    with gzip.open(no_text, "wt") as handle:
        handle.write(json.dumps({"text": "fine"}) + "\n" + json.dumps({"content": "x"}) + "\n")
    with pytest.raises(GlueDataError, match=r"c4.json.gz:2: expected an object with a string 'text' field"):
        load_c4_texts(path=str(no_text))


def test_wikitext_pages_split_at_top_level_titles():
    pages = split_wikitext_pages(" \n = First = \n a . \n = = Sub = = \n b . \n = Second = \n c . \n")
    assert len(pages) == 2  # the blank preamble is not a page; "= = Sub = =" stays inside its article
    assert pages[0].startswith(" = First = ") and " = = Sub = = " in pages[0] and pages[1].startswith(" = Second")


def test_lm_eval_c4_and_wikitext_tasks_run_on_local_files(tiny_llama, c4_dir):
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata={"data_dir": str(c4_dir)})
    out = simple_evaluate(model=HFLM(pretrained=str(tiny_llama), device="cpu", batch_size=4),
                          tasks=["glue_sparse_c4", "glue_sparse_wikitext2"], task_manager=tm, limit=5)
    for task in ("glue_sparse_c4", "glue_sparse_wikitext2"):
        res = out["results"][task]
        assert res["word_perplexity,none"] > 1 and res["byte_perplexity,none"] > 1
        assert res["bits_per_byte,none"] == pytest.approx(math.log2(res["byte_perplexity,none"]), rel=1e-6)


def test_posttraining_trains_only_gates_and_prunes(tiny_llama, tmp_path):
    model, tokenizer = _load(tiny_llama)
    gated, info = posttrain_gates(model, tokenizer, _docs(30), str(tmp_path), target_sparsity=0.3, steps=3,
                                  seqlen=32, batch_size=2, reg_sigma=0.5, learning_rate=0.05)
    trainable = {n for n, p in gated.named_parameters() if p.requires_grad}
    assert trainable and all("sparse_gates_" in n for n in trainable)
    assert info["train_tokens"] == 3 * 2 * 32 and info["accounting"]["trainable_parameters"] == sum(
        p.numel() for n, p in gated.named_parameters() if "sparse_gates_" in n)
    assert len(info["loss_log"]) >= 1


def test_posttraining_with_a_target_removal_removes_that_share(tiny_llama, tmp_path):
    """Only gates train on a causal LM, so the removal is made final at the last step (after it there
    would be nothing left to train; freezing earlier used to end in a backward without gradients)."""
    model, tokenizer = _load(tiny_llama)
    gated, info = posttrain_gates(model, tokenizer, _docs(60), str(tmp_path), target_removal=0.2, steps=8,
                                  seqlen=32, batch_size=2, learning_rate=None)
    assert info["target_removal"] == 0.2 and info["learning_rate"] == pytest.approx(1.0 / 8)
    assert abs(info["accounting"]["removed_share_of_gated"] - 0.2) <= 0.03
    evals = torch.cat([torch.clamp(torch.tanh(p) + 0.5, 0, 1).flatten() for n, p in gated.named_parameters()
                       if "sparse_gates_" in n])
    assert set(evals.unique().tolist()) == {0.0, 1.0}


def test_perplexity_and_posttrain_commands(tiny_llama, c4_dir, tmp_path):
    from glue_sparse.cli.main import main

    out = tmp_path / "ppl.json"
    assert main(["perplexity", "--model", str(tiny_llama), "--data-dir", str(c4_dir), "--no-hub",
                 "--n-samples", "2", "--seqlen", "64", "--max-length", "32", "--token-budget", "500",
                 "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"sparsegpt", "galore"}
    assert result["sparsegpt"]["tokens_scored"] == 2 * 63 and result["sparsegpt"]["data"]["corpus"] == "c4"
    assert len(result["galore"]["data"]["range_sha256"]) == 64
    assert main(["perplexity", "--model", str(tiny_llama), "--data-dir", str(c4_dir), "--no-hub",
                 "--seqlen", "4096"]) == 2  # longer than the model's context: a clear error, no traceback
    assert main(["posttrain", "--model", str(tiny_llama), "--data-dir", str(c4_dir), "--no-hub",
                 "--train-docs", "0:30", "--eval-docs", "20:60", "--output", str(tmp_path / "p")]) == 2
    assert main(["posttrain", "--model", str(tiny_llama), "--data-dir", str(c4_dir), "--no-hub",
                 "--targets", "0.3", "--steps", "2", "--train-seqlen", "32", "--train-batch-size", "2",
                 "--n-samples", "2", "--seqlen", "64", "--max-length", "32", "--token-budget", "300",
                 "--train-docs", "0:30",
                 "--eval-docs", "30:60", "--output", str(tmp_path / "p")]) == 0
    record = json.loads((tmp_path / "p" / "results.json").read_text())
    assert "disjoint documents 30:60" in record["note"]
    target = record["target-0.3"]
    assert target["pruned"]["sparsegpt"]["tokens_scored"] == 2 * 63 and target["speedup"] > 0
    assert "| dense |" in (tmp_path / "p" / "results.md").read_text()
