"""Which kinds of gates a Taylor-ranked removal closes first (issue #61's STS-B collapse).

Reads the importance sums and the closed set that a removal run saves beside each Trainer checkpoint
(``sparse_models.trainer.IMPORTANCE_FILE`` and ``CLOSED_FILE``) and prints, per kind of gate (query, key,
value, attention output, FFN in, FFN out: ``EncoderLayout.matrices``; input columns and output rows apart),
the gates' median importance over the median of all gates and the share of them already closed. Taylor sums are ranked as
they are, across all matrices (magnitude scores are divided by their matrix's mean first), so a kind whose
gradients are small at the start loses its gates first.

    python benchmarks/run.py removal-ranking --output OUT --task stsb --teacher FULL_RUN [--from-run FULL_RUN]
    python benchmarks/run.py removal-ranking CHECKPOINT [CHECKPOINT ...]    # summarise kept checkpoints

``--output`` trains gates+full at ``--target-removal`` (the grid's cell: the package's defaults, distilled from
``--teacher``) up to the schedule's first closing step, saves a checkpoint there and stops.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

if not os.environ.get("PYTHONPATH"):  # this checkout, unless the command chose another package to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from glue_sparse.finetune.run_dir import CHECKPOINTS  # noqa: E402
from sparse_models.architectures import ENCODER_LAYOUTS, EncoderLayout  # noqa: E402
from sparse_models.trainer import CLOSED_FILE, IMPORTANCE_FILE  # noqa: E402

#: Short labels of ``EncoderLayout.matrices``, in its role order.
ROLES = ("query", "key", "value", "attn out", "ffn in", "ffn out")


def layout_of(keys: list[str]) -> EncoderLayout | None:
    """The encoder layout whose six matrices all carry gates in this checkpoint (None: not a known encoder)."""
    modules = {key.rsplit(".", 1)[0] for key in keys}
    for layout in ENCODER_LAYOUTS.values():
        if all(any(m.endswith("." + suffix) for m in modules) for suffix in layout.matrices):
            return layout
    return None


def kind_of(key: str, layout: EncoderLayout | None) -> str:
    """The gate's kind and side: ``"query col"`` for the input-column gates of a query projection. The longest
    matching suffix wins, so ``attention.output.dense`` is the attention output, not the FFN's ``output.dense``."""
    module, side = key.rsplit(".", 1)
    matches = [(len(suffix), role) for role, suffix in zip(ROLES, layout.matrices if layout else ())
               if module.endswith("." + suffix)]
    return f"{max(matches)[1] if matches else 'other'} {side}"


def summarise(checkpoint: Path) -> list[tuple[str, float, float, int]]:
    """Per kind: median importance / global median, share closed, gate count."""
    scores = load_file(str(checkpoint / IMPORTANCE_FILE))
    closed = load_file(str(checkpoint / CLOSED_FILE))
    layout = layout_of(list(scores))
    overall = torch.cat([v.float().flatten() for v in scores.values()]).median()
    groups: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for key, value in scores.items():
        groups.setdefault(kind_of(key, layout), []).append((value.float().flatten(), closed[key].bool().flatten()))
    rows = []
    for kind in sorted(groups):
        values = torch.cat([v for v, _ in groups[kind]])
        shut = torch.cat([c for _, c in groups[kind]])
        rows.append((kind, float(values.median() / overall), float(shut.float().mean()), values.numel()))
    return rows


def first_closing_checkpoint(config: Any, out: Path, data_dir: str | None) -> Path:
    """Train ``config`` up to the removal schedule's first closing step, save a checkpoint there and stop:
    it holds the importance sums that ranked the gates and the gates that closing shut."""
    from transformers import TrainerCallback

    from glue_sparse.finetune.run import run_finetune
    from sparse_models.removal import RemovalSchedule
    from sparse_models.trainer import sparse_gates_tuner

    class StopAtFirstClosing(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            tuner = sparse_gates_tuner(model)
            gates = tuner.peft_config[tuner.active_adapters[0]]
            self.step = RemovalSchedule(gates.target_removal, state.max_steps, gates.removal_end,
                                        gates.removal_events).event_steps()[0]

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= self.step:
                control.should_save = control.should_training_stop = True

    stop = StopAtFirstClosing()
    run_finetune(config, out, data_dir=data_dir, use_hub=False, overwrite=True, callbacks=[stop])
    return out / config.task / CHECKPOINTS / f"checkpoint-{stop.step}"


def tiny_config(out: Path) -> Any:
    """A tiny random BERT with a Taylor-ranked removal on fixture RTE rows (the smoke run)."""
    from glue_sparse.finetune.options import FinetuneConfig
    from tests.conftest import fixture_rows, write_jsonl
    from tests.tiny_models import save_tiny_classifier

    base = str(save_tiny_classifier(out / "base", 2, seed=11))
    write_jsonl(out / "data" / "rte" / "train.jsonl", fixture_rows("rte", 40, 3))
    write_jsonl(out / "data" / "rte" / "validation.jsonl", fixture_rows("rte", 24))
    return FinetuneConfig(task="rte", method="gates+full", base_model=base, target_removal=0.5,
                          removal_score="taylor", train_limit=40, epochs=2.0, batch_size=8, eval_batch_size=16,
                          max_length=32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="*", type=Path, help="checkpoints to summarise (else train one)")
    parser.add_argument("--output", type=Path, help="train to the first closing into this folder and summarise it")
    parser.add_argument("--task", default="stsb")
    parser.add_argument("--target-removal", type=float, default=0.5)
    parser.add_argument("--teacher", help="distil from this fine-tuned run folder (as the grid's distill arms)")
    parser.add_argument("--from-run", help="start from this full run (--start-from full), not the pre-trained model")
    parser.add_argument("--data-dir")
    parser.add_argument("--tiny", action="store_true", help="a tiny random BERT on fixture RTE (smoke run)")
    args = parser.parse_args()
    checkpoints = list(args.checkpoints)
    if args.output:
        from glue_sparse.finetune.options import FinetuneConfig

        if args.tiny:
            config, data_dir = tiny_config(args.output), str(args.output / "data")
        else:
            config = FinetuneConfig(task=args.task, method="gates+full", target_removal=args.target_removal,
                                    removal_score="taylor", distill=bool(args.teacher), teacher=args.teacher,
                                    start_from="full" if args.from_run else None, from_run=args.from_run)
            data_dir = args.data_dir
        checkpoints.append(first_closing_checkpoint(config, args.output / "run", data_dir))
    if not checkpoints:
        parser.error("give checkpoints to summarise, or --output to train to the first closing")
    for checkpoint in checkpoints:
        print(f"\n{checkpoint}\n\n| gates | median importance / all gates' median | closed | gates |\n|---|---:|---:|---:|")
        for kind, ratio, share, count in summarise(checkpoint):
            print(f"| {kind} | {ratio:.2f} | {share:.1%} | {count} |")


if __name__ == "__main__":
    main()
