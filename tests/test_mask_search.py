"""Mask search (Kwon et al. 2022) on tiny random encoders: the per-example Fisher gradients, the search's
exact removal share as ``parameter_accounting`` reports it, the rearrangement's objective, the least
squares tuning, the pruned model equal to the masked one, and the ``finetune --method mask-search`` run."""

from __future__ import annotations

import copy
import json

import peft
import pytest
import torch

from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError
from glue_sparse.finetune.run import run_finetune
from sparse_models import SparseGatesConfig, parameter_accounting
from sparse_models.mask_search import close_units, encoder_layers, mask_search
from sparse_models.mask_search.fisher import mask_gradients, masked
from sparse_models.mask_search.search import rearrange, search_counts
from sparse_models.mask_search.units import unit_costs
from sparse_models.removal import freeze_gates
from glue_sparse_tasks.errors import UserInputError
from sparse_models.architectures import ENCODER_LAYOUTS
from tests.tiny_models import MORE_ARCHITECTURES, VOCAB, save_tiny_classifier, save_tiny_encoder, tiny_bert, tiny_model


def _batches(count: int = 3, rows: int = 6, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(3, 90, (rows, 12), generator=generator)
        mask = torch.ones_like(ids)
        mask[: rows // 2, 8:] = 0  # padded rows: their tokens must not count
        labels = torch.randint(0, 2, (rows,), generator=generator)
        out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return out


def _gated(model, result):
    gated = peft.get_peft_model(model, SparseGatesConfig(task_type="SEQ_CLS", target_removal=0.3, bias_delta=False))
    close_units(gated, result)
    freeze_gates(gated)
    return gated.eval()


def test_fisher_gradients_are_each_examples_own():
    model = tiny_bert()
    layers = encoder_layers(model)
    batch = _batches(1)[0]
    together = mask_gradients(model, layers, [batch])
    for row in (0, 4):
        alone = mask_gradients(model, layers, [{k: v[row:row + 1] for k, v in batch.items()}])
        for layer in range(len(layers)):
            torch.testing.assert_close(together.heads[layer][row], alone.heads[layer][0], rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(together.channels[layer][row], alone.channels[layer][0], rtol=1e-4, atol=1e-6)
    assert together.head_importance().shape == (2, 4) and together.channel_importance().shape == (2, 64)


def test_a_zero_mask_removes_exactly_what_zeroed_output_columns_remove():
    model = tiny_bert()
    layer = encoder_layers(model)[1]
    inputs = {k: v for k, v in _batches(1)[0].items() if k != "labels"}
    heads = torch.ones(4)
    heads[2] = 0
    with torch.no_grad(), masked(model, [layer], [heads], [torch.ones(64)]):
        by_mask = model(**inputs).logits
    weight = model.get_submodule(layer.attention_output).weight
    with torch.no_grad():
        weight[:, 2 * layer.head_dim:3 * layer.head_dim] = 0
        torch.testing.assert_close(model(**inputs).logits, by_mask)


def test_search_removes_the_cheapest_units_nearest_the_budget():
    heads = torch.tensor([[5.0, 0.1], [3.0, 4.0]])  # one head costs 10 channels' weights
    channels = torch.tensor([[0.5, 0.2, 9.0], [0.3, 8.0, 7.0]])
    plan = search_counts(heads, channels, head_cost=10, channel_cost=1, budget=12)
    # head (0, 1) (0.1) plus the two cheapest channels (0.2, 0.3) beat twelve channels (more than there are)
    assert plan.heads == [[1], []] and plan.channels == [[1], [0]] and plan.removed_weights == 12
    plan = search_counts(heads, channels, head_cost=10, channel_cost=1, budget=3)
    assert plan.heads == [[], []] and plan.channels == [[0, 1], [0]] and plan.removed_weights == 3


def test_rearrangement_never_raises_the_block_fisher_objective():
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(200, 1, generator=generator)
    # units 0 and 1 move together (their removal costs more than their diagonals say); unit 3 is nearly free
    gradients = torch.cat([base, base, 0.9 * torch.randn(200, 1, generator=generator),
                           0.1 * torch.randn(200, 1, generator=generator)], 1)
    block = gradients.double().T @ gradients.double() / 200

    def rise(units):
        index = torch.tensor(units)
        return float(block[index][:, index].sum())

    diagonal = sorted(torch.argsort(block.diagonal())[:2].tolist())
    chosen = rearrange(gradients, diagonal)
    assert len(chosen) == 2 and rise(chosen) <= rise(diagonal)
    assert 3 in chosen and not {0, 1} <= set(chosen)


def _encoder(model_type: str):
    """A tiny random classifier of ``model_type``: the test helpers' own, else BERT's config under that type."""
    import transformers

    if model_type == "bert":
        return tiny_bert()
    if model_type in MORE_ARCHITECTURES:
        return tiny_model(model_type)
    classes = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta", "electra": "Electra"}[model_type]
    torch.manual_seed(0)
    config = getattr(transformers, f"{classes}Config")(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                                     num_attention_heads=4, intermediate_size=64,
                                                     max_position_embeddings=64, num_labels=2)
    return getattr(transformers, f"{classes}ForSequenceClassification")(config).eval()


@pytest.mark.parametrize("model_type", list(ENCODER_LAYOUTS))
def test_every_encoder_type_searches_prunes_and_reloads_as_masked(model_type, tmp_path):
    """Mask search covers every encoder type gates claim with six matrices per layer (issue #64): the removed
    share is exact, the pruned model equals the masked one, and it reloads from disk unchanged."""
    from transformers import AutoModelForSequenceClassification

    model = _encoder(model_type)
    dense = copy.deepcopy(model)
    batches = _batches()
    result = mask_search(model, batches, 0.3)
    layers = encoder_layers(model)
    _, channel_cost = unit_costs(model, layers[0])
    assert abs(result.removed_share - 0.3) <= channel_cost / 2 / result.unit_weights
    gated = _gated(model, result)
    accounting = parameter_accounting(gated)
    assert accounting.removed_share_of_gated == pytest.approx(result.removed_share)
    assert accounting.trainable_parameters is None or accounting.gated_weights == result.unit_weights
    inputs = {k: v for k, v in batches[0].items() if k != "labels"}
    with torch.no_grad():
        masked_logits = gated(**inputs).logits
        pruned = copy.deepcopy(gated).merge_and_unload().eval()
        torch.testing.assert_close(pruned(**inputs).logits, masked_logits, rtol=1e-4, atol=1e-5)
        assert not torch.allclose(masked_logits, dense(**inputs).logits)  # something was removed
        pruned.save_pretrained(tmp_path / "pruned")
        reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "pruned").eval()
        torch.testing.assert_close(reloaded(**inputs).logits, masked_logits, rtol=1e-4, atol=1e-5)
    assert sum(p.numel() for p in pruned.parameters()) < sum(p.numel() for p in dense.parameters())


def test_a_fused_encoder_is_refused_in_one_line_naming_the_covered_types():
    with pytest.raises(UserInputError, match=f"of {', '.join(ENCODER_LAYOUTS)} encoders .*'modernbert'") as caught:
        mask_search(tiny_model("modernbert"), _batches(), 0.3)
    assert "\n" not in str(caught.value)


def test_least_squares_tuning_brings_the_pruned_model_nearer_the_dense_one():
    dense = tiny_bert(seed=3)
    batches = _batches(count=4, rows=8, seed=5)
    untuned, tuned = copy.deepcopy(dense), copy.deepcopy(dense)
    plain = mask_search(untuned, batches, 0.4, tune=False)
    result = mask_search(tuned, batches, 0.4)
    assert (plain.heads, plain.channels) == (result.heads, result.channels) and plain.tuning == []
    assert all(step["error_after"] <= step["error_before"] for step in result.tuning)
    assert any(step["error_after"] < 0.99 * step["error_before"] for step in result.tuning)

    def distance(model):  # of the last layer's output (a random tiny head barely reads its input)
        with torch.no_grad():
            return sum(float(((model.bert(**b).last_hidden_state - dense.bert(**b).last_hidden_state) ** 2).sum())
                       for b in ({k: v for k, v in batch.items() if k != "labels"} for batch in batches))

    assert distance(tuned) < distance(untuned)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return str(save_tiny_classifier(tmp_path_factory.mktemp("base"), 2, seed=11))


def test_finetune_mask_search_prunes_the_full_run_without_a_gradient_step(tiny_base, glue_fixture_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification

    common = dict(task="rte", base_model=tiny_base, train_limit=24, epochs=1, batch_size=8, eval_batch_size=16,
                  max_length=32)
    config = FinetuneConfig(method="mask-search", target_removal=0.3, mask_search_examples=16, prune=True, **common)
    record = run_finetune(config, tmp_path / "ms", data_dir=str(glue_fixture_dir), use_hub=False)
    source = tmp_path / "ms" / "magnitude-source" / "rte"  # the full fine-tune it prunes, trained first
    assert json.loads((source / "run.json").read_text())["method"] == "full"
    assert record["train_steps"] == 0 and record["accounting"]["trainable_parameters"] == 0
    assert record["mask_search"]["examples"] == 16 and record["hyperparameters"]["mask_search_examples"] == 16
    assert abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.01
    assert record["accounting"]["removed_share_of_gated"] == pytest.approx(record["mask_search"]["removed_share"])
    task_dir = tmp_path / "ms" / "rte"
    saved = AutoModelForSequenceClassification.from_pretrained(str(task_dir)).eval()
    pruned = AutoModelForSequenceClassification.from_pretrained(str(task_dir / "pruned")).eval()
    inputs = torch.randint(1, 100, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(pruned(input_ids=inputs).logits, saved(input_ids=inputs).logits, rtol=1e-4,
                                   atol=1e-5)
    # the same run again is found finished; another share is another run
    assert run_finetune(config, tmp_path / "ms", data_dir=str(glue_fixture_dir), use_hub=False) == record


def test_mask_search_options_are_refused_where_they_cannot_work(tmp_path):
    with pytest.raises(FinetuneConfigError, match="mask-search trains nothing"):
        FinetuneConfig(task="rte", method="mask-search", distill=True)
    with pytest.raises(FinetuneConfigError, match="--mask-search-examples 64: a positive count, for method mask-sea"):
        FinetuneConfig(task="rte", method="gates", mask_search_examples=64)
    assert "mask_search_examples" not in FinetuneConfig(task="rte", method="magnitude").resolved()


def test_mask_search_refuses_an_architecture_it_cannot_split_before_training(glue_fixture_dir, tmp_path):
    base = save_tiny_encoder(tmp_path / "modernbert", "modernbert")
    config = FinetuneConfig(task="rte", method="mask-search", base_model=str(base), train_limit=8, epochs=1)
    with pytest.raises(FinetuneConfigError, match="prunes heads and FFN channels of .* 'modernbert' model"):
        run_finetune(config, tmp_path / "out", data_dir=str(glue_fixture_dir), use_hub=False)
    assert not (tmp_path / "out").exists()


def test_gates_and_mask_search_read_one_layout_per_encoder_type():
    """The search's six matrices per layer are the gates' default targets of the type, and their chains (one
    fact: the unit partition of gated weights depends on it)."""
    from sparse_models.architectures import CHAINS, DEFAULT_TARGET_MODULES

    for model_type, layout in ENCODER_LAYOUTS.items():
        assert DEFAULT_TARGET_MODULES[model_type] == layout.matrices and len(layout.matrices) == 6
        assert {c.consumer for c in CHAINS[model_type]} >= {layout.ffn_output, layout.attention_output}
