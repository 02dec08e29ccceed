"""``glue-sparse pretrain`` (issue #36) on a tiny Llama config and synthetic C4-format shards: dense and
gated twins write curves and a model that ``glue-sparse perplexity`` scores identically, a resumed run
equals the uninterrupted one, two torchrun processes equal one, and bad shards are refused in one line."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from glue_sparse.cli.main import main
from glue_sparse.pretrain.data import PretrainDataError
from glue_sparse.pretrain.options import PretrainOptions, PretrainReportOptions
from glue_sparse.pretrain.report import write_pretrain_report
from glue_sparse.pretrain.run import PretrainError, run_pretrain

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the a cat dog sat ran on under mat tree quickly slowly big small red green house river and then it "
         "was is saw".split())


def _docs(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):  # a little grammar, so a model can learn more than unigram frequencies
        out.append(" ".join(f"the {rng.choice(WORDS[2:6])} {rng.choice(WORDS[6:8])} on the {rng.choice(WORDS[8:10])}."
                            for _ in range(rng.randint(3, 12))))
    return out


def _write(path: Path, docs: list[str]) -> Path:
    lines = "".join(json.dumps({"text": t, "url": "u", "timestamp": "t"}) + "\n" for t in docs)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(lines.encode(), mtime=0))
    else:
        path.write_text(lines)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A data folder (c4/validation_sample.jsonl), two training shards and a tiny Llama config."""
    root = tmp_path_factory.mktemp("pretrain_data")
    (root / "c4").mkdir()
    _write(root / "c4" / "validation_sample.jsonl", _docs(120, 0))
    shards = root / "shards"
    shards.mkdir()
    for i in range(2):
        _write(shards / f"c4-train.{i:05d}-of-00002.json.gz", _docs(60, 10 + i))
    config = root / "llama_tiny.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                                  "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
                                  "vocab_size": 32000, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
                                  "tie_word_embeddings": False, "initializer_range": 0.02}))
    return root


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _options(corpus: Path, out: Path, **kw) -> PretrainOptions:
    base = dict(out_dir=str(out), model_config=str(corpus / "llama_tiny.json"), tokenizer="bpe:320",
                data_dir=str(corpus), hub=False, train_docs="0:100", eval_docs="100:120", tokens=12 * 4 * 32,
                seqlen=32, batch_size=4, lr=1e-2, eval_every=4, eval_tokens=500, save_steps=4, warmup=0.1)
    return PretrainOptions(**{**base, **kw})


@pytest.fixture(scope="module")
def twins(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("twins")
    os.environ["GLUE_SPARSE_CACHE"] = str(tmp_path_factory.getbasetemp() / "cache")
    dense = run_pretrain(_options(corpus, root / "dense"))
    gated = run_pretrain(_options(corpus, root / "gates", method="gates", target_removal=0.4))
    return root, dense, gated


def test_twins_write_curves_and_a_model_that_perplexity_scores_identically(twins, corpus, tmp_path, capsys):
    root, dense, gated = twins
    for record in (dense, gated):
        assert record["status"] == "complete" and record["steps"] == 12 and record["train_tokens"] == 12 * 4 * 32
        assert [p["step"] for p in record["curve"]] == [4, 8, 12]
        assert [p["tokens"] for p in record["curve"]] == [4 * 128, 8 * 128, 12 * 128]
        assert record["curve"][0]["train_flops"] > 0 and record["final"]["tokens_scored"] == 500
        assert record["curve"][-1]["val_perplexity"] < record["curve"][0]["val_perplexity"]  # it learns
        assert record["tokenizer"]["kind"].startswith("bpe") and 256 < record["tokenizer"]["vocab_size"] <= 320
        assert not (root / ("dense" if record is dense else "gates") / "checkpoints").exists()
    assert dense["final"]["model_class"] == "LlamaForCausalLM" and dense["accounting"] is None
    acc = gated["accounting"]
    assert gated["final"]["model_class"] == "SparsePrunedForCausalLM"
    assert acc["removed_share_of_gated"] == pytest.approx(0.4, abs=0.03)
    assert acc["removed_share_of_gated"] > acc["removed_share_of_nonembedding"] > acc["removed_share_of_total"] > 0
    # pruned equals gated: the last curve point was scored on the gated model, final on the pruned one
    assert gated["final"]["val_perplexity"] == pytest.approx(gated["curve"][-1]["val_perplexity"], rel=1e-5)
    for name, record in (("dense", dense), ("gates", gated)):
        argv = shlex.split(record["reproduce_perplexity"])[1:] + ["--output", str(tmp_path / f"{name}.json")]
        assert main(argv) == 0
        scored = json.loads((tmp_path / f"{name}.json").read_text())["packed"]
        assert scored["tokens_scored"] == 500
        assert scored["perplexity"] == pytest.approx(record["final"]["val_perplexity"], rel=1e-6)
    again = run_pretrain(_options(corpus, root / "dense"))  # finished: returned, not retrained
    assert again["curve"] == dense["curve"]
    with pytest.raises(PretrainError, match="different run .*seed: 0 there vs 1 now"):
        run_pretrain(_options(corpus, root / "dense", seed=1))


def test_report_tables_twins_with_speed_plot_and_targets(twins, tmp_path):
    root, dense, gated = twins
    result = write_pretrain_report(PretrainReportOptions(runs=f"{root / 'dense'},{root / 'gates'}", out=str(tmp_path),
                                                         speed_rounds=1, speed_batches=1, speed_batch_size=2))
    text = (tmp_path / "results.md").read_text()
    assert "| gates | gates, removal 40% |" in text and "dense floor (<= 0.5x)" in text
    assert re.search(r"- gates: perplexity [\d.]+x dense at 40\.\d% of gated weights removed .*: (MET|MISSED)", text)
    assert re.search(r"- gates: forward tokens/s [\d.]+x dense .*: (MET|MISSED)", text)
    assert result["rows"][1]["speedup"] > 0 and (tmp_path / "curves.png").stat().st_size > 5000
    assert result["unigram_perplexity"] == pytest.approx(dense["unigram_perplexity"])


def test_unigram_perplexity_is_the_entropy_of_the_scored_targets():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from glue_sparse.perplexity.protocols import unigram_perplexity

    vocab = {"a": 0, "b": 1, "<e>": 2}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<e>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<e>")
    # stream: a b <e> a b <e> ...; targets (first id dropped) of a budget of 6: b <e> a b <e> a -> uniform over 3
    assert unigram_perplexity(tokenizer, ["a b"] * 5, 6) == pytest.approx(3.0)


class _StopAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


@pytest.mark.parametrize("kw", [dict(method="gates", target_removal=0.4),
                                dict(method="gates", recipe="reference", sparsity_from_step=3, gate_lr=0.05),
                                dict(method="dense")], ids=["gates-removal", "gates-reference", "dense"])
def test_a_resumed_run_equals_the_uninterrupted_one(kw, corpus, tmp_path):
    """Killed after step 6 with checkpoints every 4: resumed from checkpoint-4 (weights, optimiser,
    scheduler, RNG, data position, removal sums) it has the same curve and the same final weights."""
    full = run_pretrain(_options(corpus, tmp_path / "full", **kw))
    stopped = run_pretrain(_options(corpus, tmp_path / "cut", keep_checkpoints=True, **kw), callbacks=[_StopAt(6)])
    assert stopped == {"status": "interrupted", "global_step": 6}
    assert not (tmp_path / "cut" / "run.json").exists() and not (tmp_path / "cut" / "model").exists()
    import shutil

    shutil.rmtree(tmp_path / "cut" / "checkpoints" / "checkpoint-6", ignore_errors=True)  # a killed process has none
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir())[-1] == "checkpoint-4"
    resumed = run_pretrain(_options(corpus, tmp_path / "cut", **kw))
    assert resumed["resumed_from_step"] == 4
    assert [p["val_perplexity"] for p in resumed["curve"]] == pytest.approx(
        [p["val_perplexity"] for p in full["curve"]], rel=1e-6)
    a, b = (load_file(str(tmp_path / run / "model" / "model.safetensors")) for run in ("full", "cut"))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("lanes", [1, 2], ids=["main-process-reads", "each-rank-reads-its-shard"])
def test_two_torchrun_processes_equal_one_process_at_the_same_global_batch(lanes, corpus, tmp_path):
    """One lane: the main process reads and dispatches each global batch. Two lanes: each rank reads only
    its own shard; one process with the same two lanes trains on the same batches."""
    kw = dict(method="gates", target_removal=0.4, train_data=str(corpus / "shards"), train_docs=":", data_lanes=lanes)
    one = run_pretrain(_options(corpus, tmp_path / "one", **kw))
    two_options = _options(corpus, tmp_path / "two", batch_size=2, **kw)
    argv = ["pretrain", "--output", two_options.out_dir, "--model-config", two_options.model_config,
            "--tokenizer", "bpe:320", "--data-dir", str(corpus), "--no-hub", "--train-data", str(corpus / "shards"),
            "--train-docs", ":", "--eval-docs", "100:120", "--tokens", str(two_options.tokens), "--seqlen", "32",
            "--batch-size", "2", "--lr", "0.01", "--eval-every", "4", "--eval-tokens", "500", "--save-steps", "4",
            "--warmup", "0.1", "--method", "gates", "--target-removal", "0.4", "--data-lanes", str(lanes)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           "-m", "glue_sparse.cli.main", *argv]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    two = json.loads((tmp_path / "two" / "run.json").read_text())
    assert two["world_size"] == 2 and two["global_batch"] == one["global_batch"] == 4
    assert two["steps"] == one["steps"] and two["train_data"]["doc_counts"] == [60, 60]
    assert one["train_data"]["lanes_read_by_main_process"] == ([0] if lanes == 1 else [0, 1])
    assert two["train_data"]["lanes_read_by_main_process"] == [0]  # with two lanes: rank 0 read shard 0 only
    assert [p["val_perplexity"] for p in two["curve"]] == pytest.approx(
        [p["val_perplexity"] for p in one["curve"]], rel=1e-4)
    assert two["accounting"]["removed_parameters"] == one["accounting"]["removed_parameters"]
    assert two["final"]["val_perplexity"] == pytest.approx(one["final"]["val_perplexity"], rel=1e-4)
    # the same pruned network (its storage layout is chosen per process from timed costs, so compare outputs)
    from transformers import AutoModelForCausalLM

    ids = torch.randint(0, 250, (2, 24), generator=torch.Generator().manual_seed(0))
    logits = [AutoModelForCausalLM.from_pretrained(str(tmp_path / run / "model")).eval()(input_ids=ids).logits
              for run in ("one", "two")]
    torch.testing.assert_close(logits[1], logits[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("config", ["ddp", "fsdp2_llama"])
def test_accelerate_launch_on_two_cpu_processes_equals_one_process(config, corpus, tmp_path):
    """``accelerate launch`` with the documented configs (docs/accelerate/), on CPU processes: DDP as it is,
    and the FSDP config, for which accelerate builds no FSDP on a CPU backend (it shards only on GPU
    backends) and trains data-parallel; the run record says which, and both equal one process."""
    import yaml

    settings = yaml.safe_load((REPO / "docs" / "accelerate" / f"{config}.yaml").read_text())
    # on CPU processes: the same configs with use_cpu (accelerate launches MULTI_GPU and FSDP configs through
    # torchrun either way; its state then turns both into MULTI_CPU, gloo)
    settings.update(use_cpu=True, mixed_precision="no", num_processes=2, main_process_port=_free_port())
    (tmp_path / "launch.yaml").write_text(yaml.safe_dump(settings))
    kw = dict(method="gates", target_removal=0.4)
    one = run_pretrain(_options(corpus, tmp_path / "one", **kw))
    argv = ["pretrain", "--output", str(tmp_path / "two"), "--model-config", str(corpus / "llama_tiny.json"),
            "--tokenizer", "bpe:320", "--data-dir", str(corpus), "--no-hub", "--train-docs", "0:100", "--eval-docs",
            "100:120", "--tokens", str(12 * 4 * 32), "--seqlen", "32", "--batch-size", "2", "--lr", "0.01",
            "--eval-every", "4", "--eval-tokens", "500", "--save-steps", "4", "--warmup", "0.1", "--method", "gates",
            "--target-removal", "0.4"]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(tmp_path / "launch.yaml"),
           "-m", "glue_sparse.cli.main", *argv]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    two = json.loads((tmp_path / "two" / "run.json").read_text())
    assert one["parallelism"] == "NO" and two["parallelism"] == "MULTI_CPU" and two["world_size"] == 2
    assert [p["val_perplexity"] for p in two["curve"]] == pytest.approx(
        [p["val_perplexity"] for p in one["curve"]], rel=1e-4)
    assert two["final"]["val_perplexity"] == pytest.approx(one["final"]["val_perplexity"], rel=1e-4)


@pytest.mark.parametrize("damage, message", [
    ("truncated", r"c4-train\.00001-of-00002\.json\.gz: truncated or corrupt gzip file after line \d+"),
    ("not-json", r"c4-train\.00001-of-00002\.json\.gz:3: malformed JSON"),
    ("no-text", r"c4-train\.00001-of-00002\.json\.gz:3: expected an object with a string 'text' field"),
])
def test_a_bad_shard_is_named_in_one_line_before_the_model_loads(damage, message, corpus, tmp_path, capsys):
    shards = tmp_path / "shards"
    shards.mkdir()
    _write(shards / "c4-train.00000-of-00002.json.gz", _docs(10, 1))
    lines = [json.dumps({"text": t}) for t in _docs(10, 2)]
    if damage == "not-json":
        lines[2] = "{not json"
    if damage == "no-text":
        lines[2] = json.dumps({"content": "x"})
    blob = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    (shards / "c4-train.00001-of-00002.json.gz").write_bytes(blob[:len(blob) // 2] if damage == "truncated" else blob)
    out = tmp_path / "out"
    code = main(["pretrain", "--output", str(out), "--train-data", str(shards), "--train-docs", ":",
                 "--data-dir", str(corpus), "--no-hub", "--model-config", str(corpus / "llama_tiny.json"),
                 "--tokenizer", "bpe:320", "--seqlen", "32", "--tokens", "1000"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and re.search(message, err), err
    assert not out.exists()  # nothing half-written


def test_bad_options_are_refused_in_one_line(corpus, tmp_path):
    with pytest.raises(PretrainError, match="--method 'sparse': expected one of dense, gates"):
        run_pretrain(_options(corpus, tmp_path / "a", method="sparse"))
    with pytest.raises(PretrainError, match="--model-config 'llama_7m': not a shipped size .*llama_9m"):
        run_pretrain(_options(corpus, tmp_path / "a", model_config="llama_7m"))
    with pytest.raises(PretrainDataError, match="--eval-docs '90:120' overlaps --train-docs"):
        run_pretrain(_options(corpus, tmp_path / "a", eval_docs="90:120"))
    with pytest.raises(PretrainError, match="hub read the Hugging Face Hub, which --no-hub forbids"):
        run_pretrain(_options(corpus, tmp_path / "a", train_data="hub"))
    with pytest.raises(PretrainDataError, match="--data-lanes 2 needs at least 2 local shard files, got 1"):
        run_pretrain(_options(corpus, tmp_path / "a", data_lanes=2))
    with pytest.raises(PretrainDataError, match="--data-lanes > 1 splits whole shards"):
        run_pretrain(_options(corpus, tmp_path / "a", data_lanes=2, train_data=str(corpus / "shards")))
    with pytest.raises(PretrainError, match="--seqlen 200: the model has 128 positions"):
        run_pretrain(_options(corpus, tmp_path / "a", seqlen=200))
    with pytest.raises(PretrainDataError, match="--tokenizer 'bpe:12'"):
        run_pretrain(_options(corpus, tmp_path / "a", tokenizer="bpe:12"))
    assert not (tmp_path / "a").exists()


def test_the_documented_gpu_command_runs_at_tiny_size_on_cpu(corpus, tmp_path):
    """docs/pretraining.md's GaLore-recipe command (llama_60m, torchrun), with sizes shrunk and the hub
    sources replaced by local files: the same flags parse and train."""
    doc = (REPO / "docs" / "pretraining.md").read_text()
    command = re.search(r"```bash\n(torchrun [^`]*?glue_sparse\.cli\.main pretrain[^`]*?)```", doc).group(1)
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:3] == ["torchrun", "--nproc_per_node", "8"] and "llama_60m" in argv
    shrink = {"--nproc_per_node": "1", "--model-config": str(corpus / "llama_tiny.json"), "--tokens": "512",
              "--seqlen": "32", "--batch-size": "2", "--eval-tokens": "200", "--eval-every": "4",
              "--warmup": "2", "--train-data": str(corpus / "shards"),
              "--eval-data": str(corpus / "c4" / "validation_sample.jsonl"), "--tokenizer": "bpe:320",
              "--output": str(tmp_path / "o"), "--eval-docs": "0:20"}
    for flag, value in shrink.items():
        argv[argv.index(flag) + 1] = value
    cmd = [sys.executable, "-m", "torch.distributed.run", *argv[1:3], "--master_port", str(_free_port()), *argv[3:]]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd + ["--no-hub"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "o" / "run.json").read_text())
    assert record["options"]["method"] == "gates" and record["options"]["lr"] == 0.01
    assert record["final"]["model_class"] == "SparsePrunedForCausalLM"


def test_the_bpe_tokenizer_is_trained_once_per_content_and_deterministic(corpus, tmp_path, monkeypatch):
    from glue_sparse.pretrain.data import load_tokenizer, train_source

    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    source = train_source(None, str(corpus), "0:50")
    first, record = load_tokenizer("bpe:300", source)
    folders = list((tmp_path / "cache" / "tokenizers").iterdir())
    assert len(folders) == 1 and record["trained_on_docs"] == 50 and first.eos_token == "<|endoftext|>"
    import shutil

    shutil.rmtree(folders[0])  # trained again from the same documents: the same merges
    again, again_record = load_tokenizer("bpe:300", source)
    assert again.get_vocab() == first.get_vocab() and again_record == record
    other, other_record = load_tokenizer("bpe:300", train_source(None, str(corpus), "0:40"))
    assert other_record["content_sha256_16"] != record["content_sha256_16"]
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 2


def _first_blocks(blocks, n: int) -> list:
    stream = iter(blocks)
    return [next(stream) for _ in range(n)]


@pytest.mark.parametrize("lanes, docs", [(1, "5:100"), (2, ":")])
def test_cached_token_blocks_equal_the_tokenised_blocks_past_a_full_pass(lanes, docs, corpus, tmp_path, monkeypatch):
    """The token cache (issue #49) gives block for block what tokenising while training gives, across the
    wrap to a second pass, for a document slice over one lane and for whole shards over two lanes."""
    from glue_sparse.pretrain.data import PackedBlocks, lane_sources, load_tokenizer, train_source

    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    source = train_source(str(corpus / "shards"), None, docs)
    tokenizer, _ = load_tokenizer("bpe:320", source)
    cached = PackedBlocks(lane_sources(source, lanes), tokenizer, 32, chunk=2)
    streamed = PackedBlocks(lane_sources(source, lanes), tokenizer, 32, chunk=2, token_cache=False)
    assert cached.fingerprint and streamed.fingerprint is None
    one_pass = sum(len(tokenizer(t, add_special_tokens=False).input_ids) + 1 for t in source.documents()) // 32
    n = 2 * one_pass + 3
    got, expected = _first_blocks(cached, n), _first_blocks(streamed, n)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
               for a, b in zip(got, expected))
    assert got[0]["input_ids"].dtype == torch.long
    built = sorted(p.name for p in (tmp_path / "cache" / "tokens").iterdir())
    assert len(built) == 2 and not any(name.startswith(".") for name in built)  # one per shard, no staging left


def test_the_token_cache_is_keyed_by_shard_content_and_tokenizer(corpus, tmp_path, monkeypatch):
    from glue_sparse.pretrain.data import load_tokenizer, train_source
    from glue_sparse.pretrain.token_cache import shard_tokens, tokenizer_fingerprint

    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    shard = _write(tmp_path / "c4-train.00000-of-00001.json", _docs(20, 3))
    tokenizer, _ = load_tokenizer("bpe:320", train_source(str(shard), None, ":"))
    fingerprint = tokenizer_fingerprint(tokenizer)
    first = shard_tokens(shard, tokenizer, fingerprint)
    assert len(first.doc_ends) == 20 and first.tokens.dtype == "uint16" and int(first.doc_ends[-1]) == len(first.tokens)
    assert first.tokens[int(first.doc_ends[0]) - 1] == tokenizer.eos_token_id
    entry = next((tmp_path / "cache" / "tokens").iterdir())
    assert shard_tokens(shard, tokenizer, fingerprint).tokens.filename == first.tokens.filename  # read, not rebuilt
    _write(shard, _docs(21, 3))  # new content: a new entry, the old one untouched
    assert len(shard_tokens(shard, tokenizer, fingerprint).doc_ends) == 21 and entry.is_dir()
    other, _ = load_tokenizer("bpe:320", train_source(str(corpus / "shards"), None, ":"))  # other merges
    assert tokenizer_fingerprint(other) != fingerprint
    shard_tokens(shard, other, tokenizer_fingerprint(other))
    assert len(list((tmp_path / "cache" / "tokens").iterdir())) == 3
