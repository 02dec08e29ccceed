"""Damaged files never crash or poison a run (issue #65): every cache entry is checked when opened and rebuilt
when damaged (truncated, same-size garbage, a missing file, another format), giving the undamaged result
exactly; a killed build leaves nothing that is read; two processes end with one good entry; ``glue-sparse
cache`` lists, verifies and clears; damaged model weights stop a command in one line naming the file, before
any folder is made."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from glue_sparse.cli.main import main
from glue_sparse.common.cache import MANIFEST, CacheEntryError, damage, open_entry
from glue_sparse.finetune.options import FinetuneConfig
from glue_sparse.finetune.run import run_finetune
from tests.tiny_models import save_tiny_classifier

DAMAGES = ("truncated", "garbage", "missing", "format")


def _damage(folder: Path, how: str, name: str) -> None:
    """Damage one entry the way a full disk, a bad copy, a lost file or an old version would."""
    target = folder / name
    if how == "truncated":
        target.write_bytes(target.read_bytes()[: max(1, target.stat().st_size // 3)])
    elif how == "garbage":
        target.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(target.stat().st_size)))
    elif how == "missing":
        target.unlink()
    else:
        record = json.loads((folder / MANIFEST).read_text())
        (folder / MANIFEST).write_text(json.dumps({**record, "format": record["format"] - 1}))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_token_entry_is_rebuilt_and_gives_the_same_tokens(how, cache, tmp_path):
    import logging

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # our logger may not propagate (the CLI's)
    logging.getLogger("glue_sparse").addHandler(handler)
    try:
        _rebuild_tokens(how, tmp_path, said)
    finally:
        logging.getLogger("glue_sparse").removeHandler(handler)


def _rebuild_tokens(how: str, tmp_path: Path, said: list[str]) -> None:
    from glue_sparse.pretrain.token_cache import shard_tokens, tokenizer_fingerprint
    from transformers import AutoTokenizer

    from glue_sparse.common.packaged import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    shard = tmp_path / "c4-train.00000-of-00001.json"
    shard.write_text("".join(json.dumps({"text": f"document {i} about cats and dogs " * (i + 1)}) + "\n"
                             for i in range(12)))
    fingerprint = tokenizer_fingerprint(tokenizer)
    first = shard_tokens(shard, tokenizer, fingerprint)
    tokens, ends = np.array(first.tokens), np.array(first.doc_ends)
    folder = Path(first.tokens.filename).parent
    del first
    _damage(folder, how, "tokens.bin")
    again = shard_tokens(shard, tokenizer, fingerprint)  # checked (size, or the once-recorded checksum), rebuilt
    assert np.array_equal(np.array(again.tokens), tokens) and np.array_equal(np.array(again.doc_ends), ends)
    assert any(f"cache entry {folder} is damaged" in line for line in said)
    assert damage(folder, check="content") is None


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_teacher_entry_is_rebuilt_and_the_run_is_the_same(how, cache, glue_fixture_dir, tmp_path):
    from safetensors.torch import load_file

    base = save_tiny_classifier(tmp_path / "base", 2, seed=3)
    teacher = save_tiny_classifier(tmp_path / "teacher", 2, seed=4, task="rte")
    config = FinetuneConfig(task="rte", method="gates", base_model=str(base), train_limit=16, epochs=1, batch_size=8,
                            max_length=32, distill=True, teacher=str(teacher))
    run_finetune(config, tmp_path / "a", data_dir=str(glue_fixture_dir), use_hub=False)
    folder = next((cache / "teacher_logits").iterdir())
    _damage(folder, how, "logits.json")
    run_finetune(config, tmp_path / "b", data_dir=str(glue_fixture_dir), use_hub=False)
    a, b = (load_file(str(tmp_path / x / "rte" / "adapter_model.safetensors")) for x in "ab")
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)  # trained on the same logits
    assert damage(folder, check="content") is None


def test_an_entry_that_cannot_be_rebuilt_stops_in_one_line_naming_it(cache, tmp_path):
    source = tmp_path / "source.txt"
    source.write_text("the data an entry is built from")
    build = lambda staging: (staging / "copy.txt").write_text(source.read_text()) and None  # noqa: E731
    folder = open_entry("tokenizers", "k", build, "test")
    _damage(folder, "truncated", "copy.txt")
    source.unlink()  # the source is gone
    with pytest.raises(CacheEntryError) as caught:
        open_entry("tokenizers", "k", build, "test")
    assert f"cache entry {folder} is damaged" in str(caught.value) and "glue-sparse cache clear --kind tokenizers" \
        in str(caught.value) and "\n" not in str(caught.value)


BUILD = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    from glue_sparse.common.cache import open_entry

    def build(staging):
        for i in range(20):
            with open(staging / f"part-{i}.bin", "wb") as out:
                out.write(os.urandom(0) + bytes([i]) * 50_000)
            time.sleep(float(sys.argv[1]))
        return {"parts": 20}

    print(open_entry("tokenizers", "slow", build, "test"))
''')


def test_a_build_killed_at_random_points_is_built_again(cache):
    env = {**os.environ, "GLUE_SPARSE_CACHE": str(cache)}
    rng = random.Random(1)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", BUILD, "0.02"], env=env, stdout=subprocess.PIPE)
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        folder = cache / "tokenizers" / "slow"
        assert not folder.exists() or damage(folder) is None  # nothing half-built under the entry's name
    done = subprocess.run([sys.executable, "-c", BUILD, "0"], env=env, capture_output=True, text=True, check=True)
    folder = Path(done.stdout.strip())
    assert damage(folder) is None and len(list(folder.glob("part-*.bin"))) == 20


def test_two_processes_wanting_one_missing_entry_end_with_one_good_entry(cache):
    env = {**os.environ, "GLUE_SPARSE_CACHE": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, "0.01"], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate()[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs) and outs[0] == outs[1]
    assert damage(Path(outs[0])) is None
    assert [p.name for p in (cache / "tokenizers").iterdir()] == ["slow"]  # no staging folder left behind


def test_a_shard_hash_is_remembered_across_processes_until_the_shard_changes(cache, tmp_path):
    """Issue #65, item 3: a later process names a shard by the hash an earlier one remembered, without reading
    it (shown by bytes changed behind an unchanged size, mtime and inode), and hashes it again once it changed;
    every hash a process made reaches the cache, the ones held back to spare rewrites included."""
    import hashlib

    shards = [tmp_path / f"c4-train.{i:05d}-of-00003.json" for i in range(3)]
    for i, shard in enumerate(shards):
        shard.write_text(f"shard {i}\n")
    code = ("import sys\nfrom glue_sparse.common.cache_root import file_sha256\n"
            "print(' '.join(file_sha256(path) for path in sys.argv[1:]))")

    def hashes() -> list[str]:
        done = subprocess.run([sys.executable, "-c", code, *map(str, shards)], capture_output=True, text=True,
                              check=True, env={**os.environ, "GLUE_SPARSE_CACHE": str(cache)})
        return done.stdout.split()

    first = hashes()
    assert first == [hashlib.sha256(f"shard {i}\n".encode()).hexdigest() for i in range(3)]
    assert len(json.loads((cache / "file_hashes.json").read_text())) == 3  # three hashed within a second
    before = os.stat(shards[0])
    with shards[0].open("r+b") as handle:  # other bytes, same size, inode and mtime
        handle.write(b"SHARD")
    os.utime(shards[0], ns=(before.st_atime_ns, before.st_mtime_ns))
    assert hashes() == first  # remembered: not read again
    os.utime(shards[0], ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))  # now it changed
    assert hashes()[0] == hashlib.sha256(b"SHARD 0\n").hexdigest()


def test_cache_verify_names_each_damage_and_clear_removes_only_what_it_names(cache, capsys):
    made = {}
    for kind, key in (("tokens", "a"), ("tokens", "b"), ("teacher_logits", "c"), ("tokenizers", "d"), ("models", "e")):
        made[key] = open_entry(kind, key, lambda s: (s / "f.bin").write_bytes(b"x" * 1000) and None, "test")
    for how, key in zip(DAMAGES, "abcd"):
        _damage(made[key], how, "f.bin")
    assert main(["cache", "verify"]) == 1
    out = capsys.readouterr().out
    assert all(f"DAMAGED {made[k].parent.name}/{k}" in out for k in "abcd") and "models/e" not in out
    assert "1 of 5 entries whole" in out
    assert main(["cache", "list"]) == 0 and "5 entries" in capsys.readouterr().out
    assert main(["cache", "clear", "--kind", "tokens"]) == 0
    assert not made["a"].exists() and not made["b"].exists() and made["c"].exists() and made["e"].exists()
    assert main(["cache", "clear", "--older-than", "1d"]) == 0 and made["c"].exists()  # all younger than a day
    assert main(["cache", "clear", "--kind", "nonsense"]) == 2


@pytest.fixture
def damaged_models(glue_fixture_dir, tmp_path_factory):
    """A model folder, a finished run (a checkpoint and a teacher) and a gates adapter, each with its weights
    file truncated."""
    root = tmp_path_factory.mktemp("damaged")
    common = dict(task="rte", train_limit=16, epochs=1, batch_size=8, max_length=32)
    base = save_tiny_classifier(root / "base", 2, seed=5)
    run_finetune(FinetuneConfig(method="full", base_model=str(base), **common), root / "run",
                 data_dir=str(glue_fixture_dir), use_hub=False)
    run_finetune(FinetuneConfig(method="gates", base_model=str(base), **common), root / "adapter",
                 data_dir=str(glue_fixture_dir), use_hub=False)
    broken = save_tiny_classifier(root / "broken", 2, seed=6)
    for weights in (broken / "model.safetensors", root / "run" / "rte" / "model.safetensors",
                    root / "adapter" / "rte" / "adapter_model.safetensors"):
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    return root, base, broken


def test_damaged_weights_stop_each_command_in_one_line_naming_the_file(damaged_models, glue_fixture_dir, tmp_path,
                                                                      capsys):
    root, base, broken = damaged_models
    common = ["--tasks", "rte", "--train-limit", "16", "--epochs", "1", "--max-length", "32", "--data-dir",
              str(glue_fixture_dir), "--no-hub"]
    cases = [
        (["finetune", "--method", "full", "--model", str(broken), *common], broken / "model.safetensors"),
        (["finetune", "--method", "magnitude", "--from", str(root / "run"), "--model", str(base), *common],
         root / "run" / "rte" / "model.safetensors"),
        (["finetune", "--method", "gates", "--distill", "--teacher", str(root / "run" / "rte"), "--model", str(base),
          *common], root / "run" / "rte" / "model.safetensors"),
        (["predict", "--run", str(root / "adapter"), "--split", "validation", "--data-dir", str(glue_fixture_dir)],
         root / "adapter" / "rte" / "adapter_model.safetensors"),
    ]
    for i, (args, file) in enumerate(cases):
        out = tmp_path / f"out{i}"
        assert main([*args, "--output", str(out)]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert str(file) in err and "truncated" in err and "download or copy it again" in err, err
        assert not out.exists(), args  # refused before any folder was made
