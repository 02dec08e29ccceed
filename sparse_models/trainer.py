"""The transformers ``Trainer`` with the sparse-gate regulariser added to the task loss (the metrics it reports
are passed in: ``compute_metrics``, as the Trainer takes them).

Everything else (accelerate/torchrun multi-GPU, bf16/fp16, gradient accumulation, TensorBoard/W&B,
checkpoint resume, length-grouped sampling) is the Trainer's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.trainer_pt_utils import LengthGroupedSampler
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, IntervalStrategy

from glue_sparse_tasks.errors import UserInputError
from sparse_models.accounting import parameter_accounting
from sparse_models.removal import (
    RemovalSchedule,
    close_lowest,
    flush_importance,
    freeze_gates,
    gate_logits,
    importance_scores,
    importance_state,
    load_importance_state,
    random_scores,
    scheduled_closed,
    track_importance,
)
from sparse_models.sparse_gates import SparseGatesModel
from sparse_models.sparse_gates.layer import GATE_LOGIT_NAMES

IMPORTANCE_FILE = "removal_importance.safetensors"  # saved beside each Trainer checkpoint
CLOSED_FILE = "removal_closed.safetensors"  # the gates the schedule closed, beside each Trainer checkpoint
#: Every trainable tensor, saved beside a checkpoint when the backbone trains (gates+full, magnitude):
#: a PEFT checkpoint holds only the adapter, so a resumed run would restart from the base weights.
TRAINED_WEIGHTS_FILE = "trained_weights.safetensors"


def sparse_gates_tuner(model: torch.nn.Module) -> Any | None:
    """The ``SparseGatesModel`` inside a (possibly accelerate-wrapped) PEFT model, else None."""

    model = getattr(model, "module", model)  # DDP / accelerate wrappers
    base = getattr(model, "base_model", None)
    return base if isinstance(base, SparseGatesModel) else None


class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
    """transformers' length-grouped order, drawn from a generator seeded by (seed, epoch) alone.

    The stock sampler draws from the global RNG, which the Trainer restores to the checkpoint's state
    on resume: a run resumed inside epoch 2 or later then sees another order than the uninterrupted
    one. Seeding per epoch makes every epoch's order a pure function of the data seed and the epoch.
    """

    def __init__(self, *args: Any, seed: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        self.generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return super().__iter__()


class EvaluateBeforeCheckpointCallback(TrainerCallback):
    """Moves an epoch's evaluation into the epoch's last step, ahead of that step's checkpoint.

    With ``eval_strategy="epoch"`` and ``save_strategy="steps"``, a save step that ends an epoch writes
    its checkpoint before the Trainer evaluates at the epoch's end. A run resumed from it then lacks that
    evaluation in its log history, and its restored RNG state predates the random draws of the
    evaluation (the eval loader's seed draw), so the next epoch's dropout and gate noise differ. Evaluated
    first, the checkpoint holds both. The epoch's end then skips the evaluation it would repeat.
    """

    def __init__(self) -> None:
        self._evaluated_at: int | None = None

    def on_step_end(self, args, state, control, **kwargs):
        if args.eval_strategy == IntervalStrategy.EPOCH and state.epoch is not None and float(state.epoch).is_integer():
            control.should_evaluate = True  # state.epoch is exactly an integer on an epoch's last step only
            self._evaluated_at = state.global_step

    def on_epoch_end(self, args, state, control, **kwargs):
        if self._evaluated_at == state.global_step:
            control.should_evaluate = False


class RemovalCallback(TrainerCallback):
    """Runs the removal schedule of a ``target_removal`` adapter: after each event step the lowest gates
    close up to the cubic ramp; after the final one all gates are 0/1 and frozen. It acts on step
    numbers and on the logits (saved in checkpoints), so a resumed run takes the same path."""

    def __init__(self, trainer: "SparseGatesTrainer") -> None:
        self.trainer = trainer
        self.schedule: RemovalSchedule | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        config = self.trainer.gates_config()
        self.schedule = RemovalSchedule(config.target_removal, state.max_steps, config.removal_end,
                                        config.removal_events)
        self.score = config.removal_score
        self.closed = {k: torch.zeros_like(p, dtype=torch.bool) for k, p in gate_logits(self.trainer.model).items()}
        checkpoint = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if state.global_step and (checkpoint / CLOSED_FILE).is_file():  # resumed: the same closed set
            self.closed = {k: v.bool() for k, v in load_file(str(checkpoint / CLOSED_FILE)).items()}
        if state.global_step >= self.schedule.final_step:  # resumed after the removal became final
            self._finish()
        elif self.score == "taylor":
            track_importance(self.trainer.model)
            saved = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}" / IMPORTANCE_FILE
            if state.global_step and saved.is_file():  # resumed: continue the same sums
                load_importance_state(self.trainer.model, load_file(str(saved)))

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if self.trainer.gates_final or not args.should_save or not folder.is_dir():
            return
        scores = importance_state(self.trainer.model)
        if scores:
            save_file(scores, str(folder / IMPORTANCE_FILE))
        save_file({k: v.to(torch.uint8).cpu().contiguous() for k, v in self.closed.items()}, str(folder / CLOSED_FILE))

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if self.schedule is None or self.trainer.gates_final:
            return
        if self.score == "taylor":
            flush_importance(self.trainer.model)  # this step's global-batch importance, on every rank alike
        if step not in self.schedule.event_steps():
            return
        final = step >= self.schedule.final_step
        if self.score == "taylor":
            scores = importance_scores(self.trainer.model)
        elif self.score == "random":
            scores = random_scores(self.trainer.model, args.seed)
        else:  # "logit": close_lowest ranks by the logits themselves
            scores = None
        close_lowest(self.trainer.model, self.schedule.share_at(step), scores=scores, snap_open=final,
                     closed=self.closed)
        self.closed = scheduled_closed(self.trainer.model, self.closed)
        if final:
            self._finish()
            if not any(p.requires_grad for p in self.trainer.model.parameters()):
                control.should_training_stop = True  # gates were all that trained (e.g. a causal LM)

    def _finish(self) -> None:
        track_importance(self.trainer.model, on=False)
        freeze_gates(self.trainer.model)
        self.trainer.gates_final = True


class QuietProgressCallback(ProgressCallback):
    """One training bar per fine-tune, with the latest loss and evaluation score in its postfix:
    no printed log dicts and no separate evaluation bars (``-v`` keeps transformers' own callback)."""

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:  # disable=False: shown even where library bars are switched off
            self.training_bar = tqdm(total=state.max_steps, dynamic_ncols=True, disable=False)
        self.current_step = 0

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        return

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            shown = {k.removeprefix("eval_"): f"{v:.4g}" for k, v in logs.items()
                     if isinstance(v, float) and (k == "loss" or (k.startswith("eval_") and not any(
                         word in k for word in ("runtime", "per_second", "time", "loss"))))}
            if shown:
                self.training_bar.set_postfix(shown, refresh=False)


def refuse_sharded_training(trainer: Trainer) -> None:
    """One line instead of a run that breaks later: FSDP shards every weight across processes, while the
    removal schedule closes gates in place, Taylor sums read whole gradients and our saving and pruning read
    whole weights. None of that has run sharded (accelerate builds FSDP only on GPU backends, and no
    multi-GPU machine was at hand), so FSDP is refused until it has; data parallelism (torchrun, or
    ``accelerate launch`` with DDP) is tested."""
    if trainer.is_fsdp_enabled:
        raise UserInputError("FSDP is not supported by glue-sparse's training commands yet (gates close and "
                             "prune whole weights; untested sharded): launch data-parallel instead (torchrun, or "
                             "accelerate launch with distributed_type MULTI_GPU); docs/scaling-out.md")


#: the batch column that carries a distillation teacher's logits (``SparseGatesTrainer(distillation=...)``)
TEACHER_LOGITS = "teacher_logits"


def distillation_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """Prediction-layer distillation (Hinton et al.; CoFi's L_pred): T^2 * KL(softmax(t/T) || softmax(s/T))
    averaged over the batch; a one-output (regression) head matches the teacher's score by MSE."""
    student, teacher = student.float(), teacher.to(student.device).float()
    if student.shape[-1] == 1:
        return torch.nn.functional.mse_loss(student.squeeze(-1), teacher.squeeze(-1))
    return torch.nn.functional.kl_div(torch.log_softmax(student / temperature, -1),
                                      torch.log_softmax(teacher / temperature, -1), log_target=True,
                                      reduction="batchmean") * temperature ** 2


def hidden_distillation_loss(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor],
                             attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Layer-wise distillation (CoFi's L_layer with the one-to-one mapping of equal depths): the mean over the
    transformer layers (the embeddings' output left out) of the MSE between hidden states on real tokens."""
    if len(student) != len(teacher):
        raise ValueError(f"hidden-state distillation maps layers one to one: the student has {len(student) - 1} "
                         f"layers, the teacher {len(teacher) - 1}")
    keep = None if attention_mask is None else attention_mask.bool()
    terms = []
    for s, t in zip(student[1:], teacher[1:]):
        diff = (s.float() - t.to(s.device).float()) ** 2
        terms.append(diff[keep].mean() if keep is not None else diff.mean())
    return torch.stack(terms).mean()


class SparseGatesTrainer(Trainer):
    """Adds ``lambda * sparsity penalty`` to the loss in training steps; logs it beside the loss. For an
    adapter with ``target_removal`` it also runs the removal schedule (:class:`RemovalCallback`)."""

    def __init__(self, *args: Any, gate_learning_rate: float | None = None, masks_fixed: bool = False,
                 backbone_trains: bool = False, sparsity_from_step: int = 0,
                 distillation: tuple[float, float] | None = None,
                 hidden_distillation: tuple[torch.nn.Module, float] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (alpha, temperature): training batches carry the teacher's logits (TEACHER_LOGITS) and the loss is
        #: (1 - alpha) * task loss + alpha * distillation_loss(...)
        self.distillation = distillation
        #: (teacher model, beta): the teacher runs beside each training step and beta *
        #: hidden_distillation_loss(...) is added (its hidden states are too large to cache)
        self.hidden_distillation = hidden_distillation
        refuse_sharded_training(self)
        self.gate_learning_rate = gate_learning_rate
        #: the regulariser is off before this optimiser step (FineGates pre-training: after a warm-up)
        self.sparsity_from_step = sparsity_from_step
        #: base weights train too: checkpoints then carry every trainable tensor (TRAINED_WEIGHTS_FILE)
        self.backbone_trains = backbone_trains
        #: gates are final 0/1 masks (after the removal schedule, or from the start for magnitude pruning)
        self.gates_final = masks_fixed
        self._sparsity_sum: torch.Tensor | float = 0.0  # a device tensor between logs: no sync per step
        self._sparsity_count = 0
        self.add_callback(EvaluateBeforeCheckpointCallback())
        config = self.gates_config()
        if config is not None and config.target_removal is not None and not masks_fixed:
            self.add_callback(RemovalCallback(self))

    def _get_train_sampler(self, train_dataset=None):
        """Length-grouped batches (as ``train_sampling_strategy="group_by_length"``) in an order that a
        resumed run reproduces exactly (:class:`EpochSeededLengthGroupedSampler`)."""
        dataset = self.train_dataset if train_dataset is None else train_dataset
        if self.args.train_sampling_strategy != "group_by_length" or dataset is None:
            return super()._get_train_sampler(train_dataset)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return EpochSeededLengthGroupedSampler(self.args.train_batch_size * self.args.gradient_accumulation_steps,
                                               dataset=dataset, model_input_name="input_ids", seed=seed)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        super()._save(output_dir, state_dict)
        if self.backbone_trains and output_dir is not None and self.args.should_save:  # main process only
            trained = {n: p.detach().contiguous().cpu() for n, p in self.model.named_parameters() if p.requires_grad}
            save_file(trained, str(Path(output_dir) / TRAINED_WEIGHTS_FILE))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: torch.nn.Module | None = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = Path(resume_from_checkpoint) / TRAINED_WEIGHTS_FILE
        if self.backbone_trains and path.is_file():
            params = dict((model or self.model).named_parameters())
            with torch.no_grad():
                for name, tensor in load_file(str(path)).items():
                    if name not in params:
                        raise KeyError(f"{path}: holds {name!r}, which this model does not have")
                    params[name].copy_(tensor)

    def gates_config(self) -> Any | None:
        """The active sparse-gates adapter config, or None for a model without gates."""
        tuner = sparse_gates_tuner(self.model)
        return None if tuner is None else tuner.peft_config[tuner.active_adapters[0]]

    def create_optimizer(self, *args: Any, **kwargs: Any):
        """The Trainer's optimizer, with the gate logits in their own group when they get their own lr."""
        optimizer = super().create_optimizer(*args, **kwargs)
        if self.gate_learning_rate is None or getattr(optimizer, "_gate_group", False):
            return optimizer
        gate_ids = {id(p) for n, p in self.model.named_parameters()
                    if any(g in n for g in GATE_LOGIT_NAMES) and p.requires_grad}
        gate_params = []
        for group in optimizer.param_groups:
            gate_params += [p for p in group["params"] if id(p) in gate_ids]
            group["params"] = [p for p in group["params"] if id(p) not in gate_ids]
        if gate_params:
            optimizer.add_param_group({"params": gate_params, "lr": self.gate_learning_rate, "weight_decay": 0.0})
        optimizer._gate_group = True
        return optimizer

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        if self.distillation is not None and TEACHER_LOGITS not in self._signature_columns:
            self._signature_columns.append(TEACHER_LOGITS)  # kept in the batches, taken out before the forward

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        teacher = inputs.pop(TEACHER_LOGITS, None)
        layer_wise = self.hidden_distillation is not None and model.training
        if layer_wise:
            inputs = {**inputs, "output_hidden_states": True}
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                             num_items_in_batch=num_items_in_batch)
        if layer_wise:
            teacher_model, beta = self.hidden_distillation
            with torch.no_grad():
                reference = teacher_model(**{k: v for k, v in inputs.items() if k != "labels"}).hidden_states
            loss = loss + beta * hidden_distillation_loss(outputs["hidden_states"], reference,
                                                          inputs.get("attention_mask")).to(loss.dtype)
        if teacher is not None and self.distillation is not None and model.training:
            alpha, temperature = self.distillation
            logits = outputs["logits"] if isinstance(outputs, dict) else outputs[1]
            loss = (1.0 - alpha) * loss + alpha * distillation_loss(logits, teacher, temperature).to(loss.dtype)
        tuner = sparse_gates_tuner(model)
        if (tuner is not None and model.training and not self.gates_final
                and self.state.global_step >= self.sparsity_from_step):
            penalty = tuner.sparsity_loss()
            # the Trainer multiplies a token-averaged task loss by the process count (DDP then averages
            # gradients over processes); scale the penalty alike, or its weight would shrink with the
            # number of processes
            scaled = (self.args.average_tokens_across_devices and num_items_in_batch is not None
                      and (self.model_accepts_loss_kwargs or self.compute_loss_func))
            loss = loss + penalty.to(loss.dtype) * (self.accelerator.num_processes if scaled else 1)
            self._sparsity_sum = self._sparsity_sum + penalty.detach().float()
            self._sparsity_count += 1
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if self._sparsity_count and "loss" in logs:
            logs["sparsity_loss"] = float(self._sparsity_sum) / self._sparsity_count  # read once per log
            self._sparsity_sum, self._sparsity_count = 0.0, 0
            tuner = sparse_gates_tuner(self.model)
            if tuner is not None:

                accounting = parameter_accounting(self.model)
                logs["removed_share_of_gated"] = accounting.removed_share_of_gated
        super().log(logs, *args, **kwargs)
