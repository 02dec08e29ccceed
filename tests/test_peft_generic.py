"""PEFT's own generic tuner tests (``PeftCommonTester``, vendored from peft 0.21.2) for sparse gates.

Every ``_test_*`` method that needs no Hub runs on tiny local BERT, RoBERTa, GPT-2 and Llama models and
a PEFT-style custom MLP, for three sparse-gates variants (the reference recipe, the removal recipe, and
gates with LoRA inside) and for LoRA as the control: a harness bug shows as a LoRA failure. All gates run
with ``init_weights=False`` (fractional gates), as PEFT runs other methods, because the generic checks
need an adapter that changes the output. A check that does not apply is listed in ``NOT_APPLICABLE``
and shows as a skip whose reason is in its test id; a skip raised inside PEFT's code fails the test
instead, so nothing is skipped silently.
"""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig

from sparse_models import SparseGatesConfig
from sparse_models.architectures import default_target_modules
from tests.peft_generic import testing_common
from tests.peft_generic.local_models import BUILDERS, TASK_TYPES, LocalModels
from tests.peft_generic.testing_common import PeftCommonTester

# sparse gates wrap transformers' Conv1D (GPT-2) as they wrap nn.Linear
testing_common.CONV1D_CONFIGS = (*testing_common.CONV1D_CONFIGS, SparseGatesConfig)


def _targets(model_id: str) -> list[str]:
    return ["lin0", "lin1"] if model_id == "MLP" else default_target_modules(model_id)


VARIANTS = {  # name -> (config class, kwargs); targets and task type are added per model
    "lora": (LoraConfig, {"init_lora_weights": False}),
    "gates-reference": (SparseGatesConfig, {"init_weights": False}),
    "gates-removal": (SparseGatesConfig, {"init_weights": False, "target_removal": 0.3}),
    "gates+lora": (SparseGatesConfig, {"init_weights": False, "lora_config": {"r": 4, "init_lora_weights": False}}),
}

#: PeftCommonTester methods run for every model, and how each is called (extra arguments).
COMMON = {
    "model_attr": (), "adapter_name": (), "save_pretrained": (), "save_pretrained_pickle": (False,),
    "save_pretrained_selected_adapters": (), "save_pretrained_adapter_name_substring": (),
    "from_pretrained_config_construction": (), "load_multiple_adapters": (), "load_model_low_cpu_mem_usage": (),
    "merge_layers": (), "merge_layers_nan": (), "merge_layers_multi": (), "merge_layers_is_idempotent": (),
    "safe_merge": (), "training": (), "inference_safetensors": (), "delete_adapter": (),
    "delete_inactive_adapter": (), "delete_unknown_adapter_raises": (), "unload_adapter": (), "disable_adapter": (),
    "adding_multiple_adapters_with_bias_raises": (), "get_base_model_state_dict": (),
}
TRANSFORMERS_ONLY = {"prepare_for_training": (), "training_gradient_checkpointing": ()}
DECODERS_ONLY = {"generate": (), "mixed_adapter_batches": ()}
METHOD_NAMES = {"save_pretrained_pickle": "save_pretrained"}

#: (method, model or None, variant or None) -> why it does not apply. Shown in the test id.
NOT_APPLICABLE = {
    # the check compares only the first output row (model(**X)[0]); on PEFT's MLP input that row
    # (X = 0..9) moves 8e-4 between one adapter and both merged, under its 1e-3 tolerance, while the other
    # rows move 3e-2: a property of this input, not of merging (merge_layers_multi passes on the other models)
    ("merge_layers_multi", "MLP", "gates-reference"): "first-row-moves-under-PEFT-tolerance-on-this-MLP",
    ("merge_layers_multi", "MLP", "gates-removal"): "first-row-moves-under-PEFT-tolerance-on-this-MLP",
    # forward(adapter_names=[per row]) exists for LoRA-family layers only; sparse gates have no per-row adapters
    ("mixed_adapter_batches", None, "gates-reference"): "no-per-row-adapters-in-sparse-gates",
    ("mixed_adapter_batches", None, "gates-removal"): "no-per-row-adapters-in-sparse-gates",
    ("mixed_adapter_batches", None, "gates+lora"): "no-per-row-adapters-in-sparse-gates",
    # PEFT tells adapter tensors by one name prefix; gates+LoRA has two (sparse_gates_, lora_), so the
    # check would call the LoRA matrices base weights. test_peft_contract checks these gradients instead.
    ("training", None, "gates+lora"): "two-adapter-prefixes-checked-in-test_peft_contract",
    ("training_gradient_checkpointing", None, "gates+lora"): "two-adapter-prefixes-checked-in-test_peft_contract",
    ("disable_adapter", "bert", None): "PEFT-runs-it-for-generating-models-only",
    ("disable_adapter", "roberta", None): "PEFT-runs-it-for-generating-models-only",
    ("disable_adapter", "MLP", None): "PEFT-runs-it-for-generating-models-only",
    ("training_gradient_checkpointing", "bert", None): "PEFT-runs-it-for-decoders-only",
    ("training_gradient_checkpointing", "roberta", None): "PEFT-runs-it-for-decoders-only",
}


def _reason(method: str, model_id: str, variant: str) -> str | None:
    for key in ((method, model_id, variant), (method, model_id, None), (method, None, variant)):
        if key in NOT_APPLICABLE:
            return NOT_APPLICABLE[key]
    return None


def _cases():
    for model_id in BUILDERS:
        methods = dict(COMMON)
        if model_id != "MLP":
            methods.update(TRANSFORMERS_ONLY)
        if TASK_TYPES[model_id] == "CAUSAL_LM":
            methods.update(DECODERS_ONLY)
        for method, extra in methods.items():
            for variant in VARIANTS:
                reason = _reason(method, model_id, variant)
                test_id = f"{method}-{model_id}-{variant}" + (f"-SKIP:{reason}" if reason else "")
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                yield pytest.param(method, extra, model_id, variant, id=test_id, marks=marks)


class _Tester(PeftCommonTester):
    transformers_class = LocalModels

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def prepare_inputs_for_testing(self):
        if self.model_id == "MLP":
            return {"X": torch.arange(90).view(9, 10)}
        ids, mask = torch.tensor([[1, 1, 1], [1, 2, 1]]), torch.tensor([[1, 1, 1], [1, 0, 1]])  # PEFT's own
        return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("method, extra, model_id, variant", list(_cases()))
def test_peft_generic(method, extra, model_id, variant):
    config_cls, kwargs = VARIANTS[variant]
    kwargs = {**kwargs, "target_modules": _targets(model_id)}
    if TASK_TYPES[model_id]:
        kwargs["task_type"] = TASK_TYPES[model_id]
    run = getattr(_Tester(model_id), f"_test_{METHOD_NAMES.get(method, method)}")
    args = ("test", model_id) if method == "passing_input_embeds_works" else (model_id,)
    try:
        run(*args, config_cls, kwargs, *extra)
    except pytest.skip.Exception as skipped:  # a skip must be declared in NOT_APPLICABLE, with its reason
        pytest.fail(f"PEFT's test skipped itself ({skipped}); declare it in NOT_APPLICABLE if it does not apply")
