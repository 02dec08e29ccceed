"""A pruned model leaves the package (issue #62): saved by the built wheel (not this checkout), its folder
carries ``auto_map`` and the pruned model's code, so a fresh environment with torch, transformers and
lm-eval but no glue-sparse loads it with ``trust_remote_code=True`` (Auto classes, ``pipeline``, lm-eval's
``hf`` model) and gets the package's logits; missing or altered code fails there, while the package still
loads the weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.no_weights_env import make_env

ARCHITECTURES = ("bert", "roberta", "deberta-v2", "llama")
#: run in the wheel's environment: tiny models of each architecture and the packaged MiniLM, gated, 30% of gated
#: weights closed, pruned and saved; then each reloaded through the package to record its logits
SAVE = textwrap.dedent('''
    import json, sys
    import peft, torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
    import sparse_models
    from sparse_models import SparseGatesConfig
    from sparse_models.removal import close_lowest
    sys.path.insert(0, sys.argv[3])
    from tiny_models import BUILDERS

    out, minilm, llama = sys.argv[1], sys.argv[2], sys.argv[4]
    ids = torch.tensor([[2, 7, 11, 19, 23, 29, 31, 3], [2, 5, 8, 13, 21, 34, 3, 0]])
    models = {t: BUILDERS[t]() if t != "llama" else AutoModelForCausalLM.from_pretrained(llama) for t in %r}
    torch.manual_seed(0)
    models["minilm"] = AutoModelForSequenceClassification.from_pretrained(minilm, num_labels=2)
    logits = {}
    for name, model in models.items():
        causal = name == "llama"
        gated = peft.get_peft_model(model.eval(), SparseGatesConfig(task_type="CAUSAL_LM" if causal else "SEQ_CLS",
                                                                    target_removal=0.3))
        close_lowest(gated, 0.3, snap_open=True)
        gated.merge_and_unload().eval().save_pretrained(f"{out}/{name}")
        auto = AutoModelForCausalLM if causal else AutoModelForSequenceClassification
        loaded = auto.from_pretrained(f"{out}/{name}").eval()  # through the package: no trust_remote_code
        with torch.no_grad():
            logits[name] = loaded(input_ids=ids).logits.tolist()
    AutoTokenizer.from_pretrained(minilm).save_pretrained(f"{out}/minilm")
    AutoTokenizer.from_pretrained(llama).save_pretrained(f"{out}/llama")
    print(json.dumps({"logits": logits, "package": sparse_models.__file__}))
''') % (ARCHITECTURES,)
#: run in the environment without glue-sparse
LOAD = textwrap.dedent('''
    import importlib.util, json, sys
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, pipeline

    assert importlib.util.find_spec("sparse_models") is None and importlib.util.find_spec("glue_sparse") is None
    out, names = sys.argv[1], sys.argv[2].split(",")
    ids = torch.tensor([[2, 7, 11, 19, 23, 29, 31, 3], [2, 5, 8, 13, 21, 34, 3, 0]])
    logits = {}
    for name in names:
        auto = AutoModelForCausalLM if name == "llama" else AutoModelForSequenceClassification
        model = auto.from_pretrained(f"{out}/{name}", trust_remote_code=True).eval()
        with torch.no_grad():
            logits[name] = model(input_ids=ids).logits.tolist()
        logits[name + ":class"] = type(model).__module__
    result = {"logits": logits}
    if "minilm" in names:
        classify = pipeline("text-classification", model=f"{out}/minilm", trust_remote_code=True)
        result["pipeline"] = classify(["a fine film", "a dull one"])
    print(json.dumps(result))
''')


def _python(bin_dir: Path, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(cwd / "hf_modules"), GLUE_SPARSE_NO_HOOK="1")
    return subprocess.run([str(bin_dir / "python"), "-c", code, *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, glue_sparse_wheel):
    """(the folders, the package's logits, the environment without glue-sparse, a scratch folder)."""
    from glue_sparse.common.packaged import minilm_path
    from tests.tiny_models import save_tiny_llama_with_tokenizer

    root = tmp_path_factory.mktemp("sharing")
    (root / "cwd").mkdir()
    llama = save_tiny_llama_with_tokenizer(root / "llama", ["the cat sat on the mat", "a dog ran under the tree"] * 20)
    with_package, without = make_env(root / "with", glue_sparse_wheel), make_env(root / "without", None)
    done = _python(with_package, SAVE, str(root / "models"), minilm_path(), str(Path(__file__).parent), str(llama),
                   cwd=root / "cwd")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert str(root / "with") in result["package"]  # saved by the installed wheel, not this checkout
    return root / "models", result["logits"], without, with_package, root / "cwd"


def test_every_pruned_folder_carries_its_code_and_auto_map(saved):
    models, _, _, _, _ = saved
    for name in (*ARCHITECTURES, "minilm"):
        config = json.loads((models / name / "config.json").read_text())
        assert config["auto_map"]["AutoConfig"] == "configuration_sparse_pruned.SparsePrunedConfig", name
        assert {"modeling_sparse_pruned.py", "configuration_sparse_pruned.py", "pruned_linear.py",
                "pruned_attention.py", "residual_add.py"} <= {p.name for p in (models / name).iterdir()}
        for code in (models / name).glob("*.py"):  # nothing of the package: torch, transformers and each other
            imports = [line for line in code.read_text().splitlines() if line.startswith(("import ", "from "))]
            assert not [line for line in imports if "sparse_models" in line or "glue_sparse" in line], code


def test_a_machine_without_glue_sparse_loads_each_with_the_packages_logits(saved):
    import torch

    models, expected, without, _, cwd = saved
    names = (*ARCHITECTURES, "minilm")
    done = _python(without, LOAD, str(models), ",".join(names), cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for name in names:
        assert result["logits"][name + ":class"].startswith("transformers_modules."), name  # the remote code ran
        torch.testing.assert_close(torch.tensor(result["logits"][name]), torch.tensor(expected[name]),
                                   rtol=1e-5, atol=1e-5)
    assert [r["label"] for r in result["pipeline"]] and all(0 <= r["score"] <= 1 for r in result["pipeline"])


def test_lm_evals_hf_model_loads_a_pruned_causal_lm_with_remote_code(saved):
    """lm-eval's own ``hf`` model (``--model hf --model_args pretrained=DIR,trust_remote_code=True``) scores
    the same log-likelihoods without glue-sparse as through the package."""
    models, _, without, with_package, cwd = saved
    code = textwrap.dedent('''
        import json, sys
        if sys.argv[2] == "package":
            import sparse_models  # registers the pruned classes: no remote code
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
        lm = HFLM(pretrained=sys.argv[1], trust_remote_code=sys.argv[2] != "package", device="cpu", batch_size=2)
        requests = [Instance("loglikelihood", {}, ("the cat", " sat on the mat"), 0),
                    Instance("loglikelihood", {}, ("a dog", " ran under"), 1)]
        print(json.dumps([list(r) for r in lm.loglikelihood(requests)]))
    ''')
    remote = _python(without, code, str(models / "llama"), "remote", cwd=cwd)
    package = _python(with_package, code, str(models / "llama"), "package", cwd=cwd)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert package.returncode == 0, package.stderr[-3000:]
    a, b = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (remote, package))
    assert [x[1] for x in a] == [x[1] for x in b]
    assert all(abs(x[0] - y[0]) < 1e-4 for x, y in zip(a, b)) and all(x[0] < 0 for x in a)


@pytest.mark.parametrize("damage", ["missing", "altered"])
def test_missing_or_altered_code_fails_remotely_while_the_package_still_loads(saved, damage, tmp_path):
    import torch
    from transformers import AutoModelForSequenceClassification

    import sparse_models  # noqa: F401  (registers the pruned classes)

    models, expected, without, _, cwd = saved
    folder = shutil.copytree(models / "bert", tmp_path / "bert")
    code = folder / "modeling_sparse_pruned.py"
    if damage == "missing":
        code.unlink()
    else:
        code.write_text(code.read_text() + "\nraise ImportError('this copy of the code was altered')\n")
    done = _python(without, LOAD, str(tmp_path), "bert", cwd=cwd)
    assert done.returncode != 0
    assert ("modeling_sparse_pruned.py" in done.stderr) if damage == "missing" else ("was altered" in done.stderr)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()  # the package: weights intact
    ids = torch.tensor([[2, 7, 11, 19, 23, 29, 31, 3], [2, 5, 8, 13, 21, 34, 3, 0]])
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, torch.tensor(expected["bert"]), rtol=1e-5, atol=1e-5)


def test_a_folder_saved_before_the_code_travelled_still_loads_through_the_package(saved, tmp_path):
    """Pruned folders written by an earlier version have no auto_map and no code beside them: the package loads
    them as before (the ``sparse_gated`` model type is registered on import)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    import sparse_models  # noqa: F401  (registers the pruned classes)

    models, expected, _, _, _ = saved
    folder = shutil.copytree(models / "roberta", tmp_path / "old")
    for code in folder.glob("*.py"):
        code.unlink()
    config = json.loads((folder / "config.json").read_text())
    del config["auto_map"]
    (folder / "config.json").write_text(json.dumps(config))
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    ids = torch.tensor([[2, 7, 11, 19, 23, 29, 31, 3], [2, 5, 8, 13, 21, 34, 3, 0]])
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, torch.tensor(expected["roberta"]), rtol=1e-5,
                                   atol=1e-5)
