"""Dense vs physically pruned CPU forward latency, beside the FLOP ratio of the same batches.

Both sides run in one process on the same batches, taking turns batch by batch so machine noise hits
them alike; each side's time is the median over rounds after a warm-up round that is discarded.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from peft import get_peft_model
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.experiments.options import option
from glue_sparse.experiments.packaged import minilm_path, model_identity
from glue_sparse_tasks.atomic import write_json_atomic, write_text_atomic
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.local_formats import GlueDataError
from sparse_models import SparseGatesConfig
from sparse_models.accounting import parameter_accounting
from sparse_models.checkpoints import Checkpoint, describe_checkpoint, load_classifier
from sparse_models.pruned_linear import PrunedLinear
from sparse_models.sparse_gates.layout_costs import DEFAULT_ALIGN
from sparse_models.sparse_gates.pruning import LAYOUTS

__all__ = ["SpeedRow", "set_random_gate_pattern", "calibrate_closed_fraction", "forward_flops",
           "time_rounds", "time_forwards", "Speedup", "paired_speedup", "compare_layouts", "ideal_seconds",
           "index_work", "timing_texts", "tokenized_batches", "mean_length", "dense_and_batches",
           "device_and_dtype", "levels_and_batch_sizes", "speed_markdown"]


@dataclass
class SpeedRow:
    level: str
    removed_share_of_gated: float  # physically removed (what the layout took out of the matrices)
    removed_share_of_total: float
    batch_size: int
    batches: int
    tokens: int
    dense_ms: float
    pruned_ms: float
    latency_ratio: float  # median over rounds of the per-round dense / pruned time (``paired_speedup``)
    flop_ratio: float
    ideal_ms: float | None = None  # same shapes, no index work (see ``ideal_seconds``)
    closed_share_of_gated: float | None = None  # closed by the gates (removed or kept as folded zeros)
    layout: str = "auto"
    latency_ratio_low: float | None = None  # slowest and fastest round of the paired ratio (``Speedup``)
    latency_ratio_high: float | None = None
    index_ops: int | None = None  # gathers plus scatters the pruned model runs per forward (``index_work``)
    heads_narrowed: bool | None = None  # attention laid out per head at reduced head sizes

    @property
    def share_of_ideal(self) -> float | None:
        """pruned speed-up / ideal speed-up: 1.0 means no index overhead left."""
        return self.latency_ratio * self.ideal_ms / self.dense_ms if self.ideal_ms else None

    @property
    def share_of_flop_speedup(self) -> float:
        """latency ratio / FLOP ratio: 1.0 means the pruned model is as fast as its FLOPs promise."""
        return self.latency_ratio / self.flop_ratio

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "share_of_flop_speedup": self.share_of_flop_speedup,
                "share_of_ideal": self.share_of_ideal}


def set_random_gate_pattern(peft_model: nn.Module, closed_fraction: float, seed: int = 0) -> None:
    """Close a random ``closed_fraction`` of every gated layer's rows and of its columns (rest open)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in peft_model.base_model.gated_layers().values():
            for logits in (layer.sparse_gates_row["default"], layer.sparse_gates_col["default"]):
                closed = torch.rand(logits.shape, generator=generator) < closed_fraction
                logits.copy_(torch.where(closed, torch.full_like(logits, -3.0), torch.full_like(logits, 3.0)))


def calibrate_closed_fraction(peft_model: nn.Module, removed_share: float, seed: int = 0) -> float:
    """The closed row/column fraction whose random pattern removes ``removed_share`` of gated weights."""
    low, high = 0.0, 1.0
    for _ in range(20):
        mid = (low + high) / 2
        set_random_gate_pattern(peft_model, mid, seed)
        if parameter_accounting(peft_model).removed_share_of_gated < removed_share:
            low = mid
        else:
            high = mid
    set_random_gate_pattern(peft_model, (low + high) / 2, seed)
    return (low + high) / 2


def index_work(model: nn.Module) -> tuple[int, bool]:
    """What a pruned model pays beyond its matrices: the number of gathers and scatters per forward, and
    whether its attention runs narrowed per head. It shows which candidate ``auto`` built."""
    ops = sum(int(m.gather_in) + int(m.scatter_out) for m in model.modules() if isinstance(m, PrunedLinear))
    return ops, bool(getattr(model.config, "attention_head_sizes", None))


def forward_flops(model: nn.Module, batch_size: int, seq_len: int) -> int:
    """Multiply-add FLOPs of the encoder's linear layers plus attention scores and mixing."""
    tokens = batch_size * seq_len
    flops = 0
    for module in model.modules():
        if isinstance(module, PrunedLinear):
            flops += 2 * tokens * module.weight.shape[0] * module.weight.shape[1]
        elif isinstance(module, nn.Linear):
            flops += 2 * tokens * module.in_features * module.out_features
    config = model.config.inner_config() if hasattr(model.config, "inner_config") else model.config
    flops += config.num_hidden_layers * 4 * batch_size * seq_len * seq_len * config.hidden_size
    return flops


def _synchronize(device: torch.device) -> None:
    """Wait for queued accelerator work, so the clock reads what the forward took (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.inference_mode()
def time_rounds(models: Sequence[nn.Module], batches: Sequence[dict], rounds: int) -> list[list[float]]:
    """Seconds per pass over ``batches`` for each model, one sample per round; a warm-up round is dropped.

    Within a round the models take turns batch by batch (dense, pruned, dense, pruned, ...), in reversed
    order every other round, so a slow stretch of a shared machine hits every model alike even when it
    lasts less than one pass. With turns of whole 8-batch passes the rounds' ratios for one pruned
    MiniLM spanned 0.28 on average; with turns per batch, 0.10, around the same median
    (``benchmarks/results/timing_interleave_ab``)."""
    devices = {next(model.parameters()).device for model in models}
    samples: list[list[float]] = [[] for _ in models]
    for round_index in range(rounds + 1):
        totals = [0.0] * len(models)
        order = list(range(len(models)))[:: -1 if round_index % 2 else 1]
        for batch in batches:
            for i in order:
                for device in devices:
                    _synchronize(device)
                start = time.perf_counter()
                models[i](**batch)
                for device in devices:
                    _synchronize(device)
                totals[i] += time.perf_counter() - start
        if round_index:
            for model_samples, total in zip(samples, totals):
                model_samples.append(total)
    return samples


def time_forwards(models: Sequence[nn.Module], batches: Sequence[dict], rounds: int) -> list[float]:
    """Median seconds per pass over ``batches`` for each model, rounds interleaved, first round dropped."""
    return [statistics.median(s) for s in time_rounds(models, batches, rounds)]


@dataclass(frozen=True)
class Speedup:
    """dense / pruned time, paired round by round: ``median`` is what tables report; ``low``/``high`` the
    slowest and fastest round, so a reader sees whether a target is met with room or by noise."""

    median: float
    low: float
    high: float


def paired_speedup(dense: Sequence[float], pruned: Sequence[float]) -> Speedup:
    """Median and range of the per-round ratios. Both models of a round ran back to back, so a ratio
    within a round cancels the machine's drift that a ratio of two medians would keep."""
    ratios = [d / p for d, p in zip(dense, pruned, strict=True)]
    return Speedup(statistics.median(ratios), min(ratios), max(ratios))


@torch.inference_mode()
def _linear_seconds(shape_sets: Sequence[Sequence[tuple[int, int, int]]], rounds: int,
                    device: torch.device = torch.device("cpu"), dtype: torch.dtype = torch.float32) -> list[float]:
    """Median seconds of one pass of plain, contiguous ``F.linear`` calls of (tokens, in) x (out, in), for
    each set of shapes (all sets list the same matrices, at different widths), on the pruned model's device
    and dtype; like ``time_rounds`` the sets take turns call by call, in reversed order every other round."""
    generator = torch.Generator().manual_seed(0)

    def tensor(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    call_sets = [[(tensor(t, i), tensor(o, i), torch.zeros(o, device=device, dtype=dtype)) for t, i, o in shapes]
                 for shapes in shape_sets]
    samples: list[list[float]] = [[] for _ in call_sets]
    for round_index in range(rounds + 1):
        totals = [0.0] * len(call_sets)
        order = list(range(len(call_sets)))[:: -1 if round_index % 2 else 1]
        for calls in zip(*call_sets, strict=True):
            for i in order:
                x, w, b = calls[i]
                _synchronize(device)
                start = time.perf_counter()
                nn.functional.linear(x, w, b)
                _synchronize(device)
                totals[i] += time.perf_counter() - start
        if round_index:
            for set_samples, total in zip(samples, totals):
                set_samples.append(total)
    return [statistics.median(s) for s in samples]


def ideal_seconds(dense: nn.Module, pruned: nn.Module, batches: Sequence[dict], dense_seconds: float,
                  rounds: int, align: int = DEFAULT_ALIGN) -> float:
    """The limit pruning can reach: the dense forward with every pruned matrix's time replaced by that of
    the same matrix shrunk to its open rows and columns (everything the gates closed gone, whatever the
    layout kept), fed contiguous inputs (no gather, no scatter). The shrunk matrices are timed twice,
    at their exact open counts and at those counts rounded up to ``align`` (odd widths can hit slow
    kernels), and the faster set counts, so the ideal is not understated by a kernel cliff. All matrix
    timings run here, interleaved, on the token counts of ``batches``, so they share the machine state."""
    records = pruned.config.pruned_modules
    kept = {name: (r.get("alive_out", r["kept_out"]), r.get("alive_in", r["kept_in"])) for name, r in records.items()}

    def rounded(n: int, full: int) -> int:
        return min(full, -(-n // align) * align) if n else 0

    full, exact, aligned = [], [], []
    for name, module in dense.named_modules():
        match = next((k for k in kept if k == name or k.endswith("." + name) or name.endswith("." + k)), None)
        if match is None or not isinstance(module, nn.Linear):
            continue
        alive_out, alive_in = kept[match]
        for batch in batches:
            tokens = batch["input_ids"].numel()
            full.append((tokens, module.in_features, module.out_features))
            exact.append((tokens, alive_in, alive_out))
            aligned.append((tokens, rounded(alive_in, module.in_features), rounded(alive_out, module.out_features)))
    weight = next(pruned.parameters())
    full_s, exact_s, aligned_s = _linear_seconds([full, exact, aligned], rounds, weight.device, weight.dtype)
    return dense_seconds - full_s + min(exact_s, aligned_s)


def compare_layouts(
    dense: nn.Module,
    pruned: dict[str, nn.Module],
    batches: Sequence[dict],
    level: str,
    rounds: int = 5,
    align: int = DEFAULT_ALIGN,
) -> list[SpeedRow]:
    """One table row per pruned model (keyed by layout): latency and FLOP ratios over ``dense`` on the
    same batches. Dense and every pruned model are timed round by round in one loop, and the latency
    ratio is paired per round (``paired_speedup``), so a change in the machine's state hits both sides
    of a ratio alike; the ideal is computed once (it depends only on what the gates closed)."""
    layouts = list(pruned)
    samples = time_rounds([dense.eval(), *(pruned[layout].eval() for layout in layouts)], batches, rounds)
    dense_s = statistics.median(samples[0])
    shapes = [tuple(b["input_ids"].shape) for b in batches]
    dense_flops = sum(forward_flops(dense, b, l) for b, l in shapes)
    ideal_s = ideal_seconds(dense, pruned[layouts[0]], batches, dense_s, rounds, align)
    rows = []
    for layout, pruned_samples in zip(layouts, samples[1:]):
        accounting = parameter_accounting(pruned[layout])
        speedup = paired_speedup(samples[0], pruned_samples)
        index_ops, heads_narrowed = index_work(pruned[layout])
        rows.append(SpeedRow(
            level=level,
            removed_share_of_gated=accounting.removed_share_of_gated,
            removed_share_of_total=accounting.removed_share_of_total,
            batch_size=shapes[0][0],
            batches=len(batches),
            tokens=sum(b * l for b, l in shapes),
            dense_ms=1000 * dense_s / len(batches),
            pruned_ms=1000 * statistics.median(pruned_samples) / len(batches),
            latency_ratio=speedup.median,
            flop_ratio=dense_flops / sum(forward_flops(pruned[layout], b, l) for b, l in shapes),
            ideal_ms=1000 * ideal_s / len(batches),
            closed_share_of_gated=accounting.closed_share_of_gated,
            layout=layout,
            latency_ratio_low=speedup.low,
            latency_ratio_high=speedup.high,
            index_ops=index_ops,
            heads_narrowed=heads_narrowed,
        ))
    return rows


def mean_length(batches: Sequence[dict]) -> int:
    """Mean padded length of ``batches``: the token count the layout is chosen for is batch x this."""
    return round(statistics.mean(b["input_ids"].shape[1] for b in batches))


def tokenized_batches(tokenizer: Any, texts: Iterable[str], batch_size: int, n_batches: int,
                      max_length: int = 128) -> list[dict]:
    """GLUE-like batches: consecutive texts, padded to the longest in each batch (dynamic length)."""
    texts = list(texts)[: batch_size * n_batches]
    return [
        dict(tokenizer(texts[i:i + batch_size], padding="longest", truncation=True, max_length=max_length,
                       return_tensors="pt"))
        for i in range(0, len(texts), batch_size)
    ]


def dense_and_batches(model_path: str, data_dir: str | None, batch_size: int, n_batches: int,
                      ) -> tuple[nn.Module, list[dict], str]:
    """What every paired speed A/B starts from: the dense classifier (head seeded with 0, so runs
    agree), its GLUE-like timing batches, and where their texts came from."""
    texts, source = timing_texts(data_dir, batch_size * n_batches)
    batches = tokenized_batches(AutoTokenizer.from_pretrained(model_path), texts, batch_size, n_batches)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2).eval(), batches, source


#: ``--dtype`` names and what they load as.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(kw_only=True)
class SpeedOptions:
    """``glue-sparse speed``: what to prune, how to time it, where to write the rows."""

    model: str | None = option(None, "encoder folder or Hub name (default: the packaged MiniLM)")
    removed: str = option("0.2,0.4,0.6", "shares of gated weights to remove with random closed patterns")
    adapter: list[str] = option(help="trained sparse-gates adapter folder(s) to time as well (repeatable)",
                                default_factory=list, action="extend")
    batch_sizes: str = option("32,1", "batch sizes to time")
    align: int = option(DEFAULT_ALIGN, "round kept row/column counts up to this multiple with closed ones "
                                       "(1: remove exactly what the gates closed)")
    batches: int = option(8, "batches per timing round")
    rounds: int = option(5, "timing rounds (median; one extra warm-up round)")
    threads: int = option(0, "torch CPU threads (0: torch's default)")
    device: str = option("cpu", "device to time on: cpu, cuda or cuda:N (one device; dense and pruned both)")
    dtype: str = option("float32", f"weights and activations: {' or '.join(DTYPES)} (bfloat16 on a GPU: the "
                                   "accelerator table of issue #15)")
    layouts: str = option("auto,keep,remove", "pruning layouts to time side by side: auto (merge_and_unload's "
                                              "default: timed per layer, then that choice and remove "
                                              "whole against keep, with and without attention narrowed per "
                                              "head), per-layer (auto without "
                                              "the whole-model check), keep (no index work), "
                                              "remove (every closed row/column, with its index work); a "
                                              "'+heads' suffix always narrows attention per head (e.g. "
                                              "auto+heads)")
    data_dir: str | None = option(None, "GLUE folder for SST-2 validation sentences (--causal: a folder with c4/, "
                                        "or the GLUE folder beside it)")
    causal: bool = option(False, "time a causal LM (default: the packaged SmolLM2-135M) with whole heads and FFN "
                                 "channels removed at each --removed share of decoder-block linear weights")
    causal_method: str = option("magnitude-sp", "--causal: which one-shot method picks the units "
                                                "(magnitude-sp, wanda-sp, flap; the last two calibrate on C4)")
    causal_seqlen: int = option(256, "--causal: tokens per sequence (packed C4 text)")
    output: str | None = option(None, "write the rows as JSON here (atomically)")


HEADS_SUFFIX = "+heads"


def prune_with_layout(gated: nn.Module, layout: str, tokens: int, align: int, length: int) -> nn.Module:
    """A pruned copy of ``gated`` in one of ``LAYOUTS`` (``+heads``: attention narrowed per head), with
    the timed layouts chosen for ``tokens`` tokens per forward in rows of ``length``."""
    heads = layout.endswith(HEADS_SUFFIX)
    return copy.deepcopy(gated).eval().merge_and_unload(layout=layout.removesuffix(HEADS_SUFFIX), layout_tokens=tokens,
                                                        layout_length=length, align=align,
                                                        narrow_heads=True if heads else None)


SYNTHETIC_WORDS = "the film is a quiet and often funny portrait of people who".split()


def timing_texts(data_dir: str | None, n: int) -> tuple[list[str], str]:
    """SST-2 validation sentences when available (GLUE-like lengths), else synthetic ones."""

    try:
        rows, prov = load_glue_rows("sst2", "validation", data_dir, use_hub=False)
        return [r["sentence"] for r in rows][:n], f"SST-2 validation ({prov.source})"
    except GlueDataError:
        texts = [" ".join(SYNTHETIC_WORDS[j % len(SYNTHETIC_WORDS)] for j in range(8 + (i * 7) % 40))
                 for i in range(n)]
        return texts, "synthetic sentences of 8-47 words (no SST-2 validation found)"


def run_speed(options: SpeedOptions) -> list[dict[str, Any]]:
    """Time dense vs pruned for random closed patterns at each removal level and for trained adapters;
    print one line per (pattern, batch size) and write the rows if asked."""
    if options.threads:
        torch.set_num_threads(options.threads)
    levels, batch_sizes = levels_and_batch_sizes(options)
    layouts = [x for x in options.layouts.split(",") if x]
    if bad := [x for x in layouts if x.removesuffix(HEADS_SUFFIX) not in LAYOUTS]:
        raise UserInputError(f"--layouts: unknown layout(s) {bad}; valid: {', '.join(LAYOUTS)}, each "
                             f"optionally with {HEADS_SUFFIX!r} (attention narrowed per head)")
    adapters = [_adapter_checkpoint(path) for path in options.adapter]  # bad folders fail before any load
    device, dtype = device_and_dtype(options)
    model_path = options.model or minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    texts, source = timing_texts(options.data_dir, max(batch_sizes) * options.batches)
    batches = {bs: [{k: v.to(device) for k, v in batch.items()}
                    for batch in tokenized_batches(tokenizer, texts, bs, options.batches)] for bs in batch_sizes}
    torch.manual_seed(0)
    dense = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2).to(device, dtype).eval()
    name = model_identity(model_path)
    on = _device_name(device)
    print(f"model {name}\ntexts {source}; {on}, {options.dtype}; threads {torch.get_num_threads()}\n", flush=True)
    candidates = []
    for level in levels:
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        fraction = calibrate_closed_fraction(gated, level)
        candidates.append((f"random {level:.0%} (rows/cols closed {fraction:.1%})", gated))
    for adapter in adapters:  # loaded with its own head size (STS-B regresses: one output); the heads are
        # outside the timed encoder's gated matrices, so the two-label dense is the baseline for all
        gated_adapter, _ = load_classifier(adapter, dtype, str(device), base=model_path)
        candidates.append((f"trained {adapter.path}", gated_adapter))
    rows = []
    print(f"{'level':<42} {'layout':>6} {'built':>12} {'batch':>5} {'closed':>7} {'removed':>7} {'dense ms':>9} "
          f"{'pruned ms':>9} {'ideal ms':>9} {'latency x':>9} {'rounds':>11} {'ideal x':>8} {'of ideal':>8} "
          f"{'FLOP x':>7}")
    for label, gated in candidates:
        for bs in batch_sizes:  # `auto` chooses per layer for this batch's token count, as a user would prune
            length = mean_length(batches[bs])
            pruned = {layout: prune_with_layout(gated, layout, bs * length, options.align, length)
                      for layout in layouts}
            for row in compare_layouts(dense, pruned, batches[bs], label, rounds=options.rounds, align=options.align):
                rows.append(row.to_dict())
                spread = f"{row.latency_ratio_low:.2f}-{row.latency_ratio_high:.2f}"
                print(f"{label:<42} {row.layout:>6} {built(row.to_dict()):>12} {bs:>5} "
                      f"{row.closed_share_of_gated:>7.1%} "
                      f"{row.removed_share_of_gated:>7.1%} {row.dense_ms:>9.2f} {row.pruned_ms:>9.2f} "
                      f"{row.ideal_ms:>9.2f} {row.latency_ratio:>9.2f} {spread:>11} "
                      f"{row.dense_ms / row.ideal_ms:>8.2f} "
                      f"{row.share_of_ideal:>8.0%} {row.flop_ratio:>7.2f}", flush=True)
    targets = speed_targets(rows)
    print("\n" + "\n".join(targets))
    if options.output:
        meta = {"model": name, "texts": source, "threads": torch.get_num_threads(), "rounds": options.rounds,
                "batches": options.batches, "align": options.align, "device": on, "dtype": options.dtype}
        write_json_atomic(options.output, {**meta, "rows": rows})
        markdown = Path(options.output).with_suffix(".md")
        write_text_atomic(markdown, speed_markdown(rows, meta, targets))
        print(f"\nwrote {options.output} and {markdown}")
    return rows


def levels_and_batch_sizes(options: SpeedOptions) -> tuple[list[float], list[int]]:
    """``--removed`` shares and ``--batch-sizes``, refused in one line before any model loads."""
    try:
        levels = [float(x) for x in options.removed.split(",") if x]
        batch_sizes = [int(x) for x in options.batch_sizes.split(",") if x]
    except ValueError as exc:
        raise UserInputError(f"--removed and --batch-sizes take comma-separated numbers ({exc})") from None
    if any(not 0 < x < 1 for x in levels):
        raise UserInputError(f"--removed values must be in (0, 1), got {options.removed!r}")
    return levels, batch_sizes


def device_and_dtype(options: SpeedOptions) -> tuple[torch.device, torch.dtype]:
    """``--device`` and ``--dtype``, refused in one line before any model loads."""
    if options.dtype not in DTYPES:
        raise UserInputError(f"--dtype {options.dtype!r}: expected {' or '.join(DTYPES)}")
    try:
        device = torch.device(options.device)
    except RuntimeError:
        raise UserInputError(f"--device {options.device!r}: expected cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise UserInputError(f"--device {options.device!r}: expected cpu, cuda or cuda:N")
    if device.type == "cuda" and not (torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()):
        raise UserInputError(f"--device {options.device}: no such CUDA device here "
                             f"({torch.cuda.device_count()} visible)")
    return device, DTYPES[options.dtype]


def _device_name(device: torch.device) -> str:
    """What the table names the device by: the GPU's model, or "cpu"."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _adapter_checkpoint(path: str) -> Checkpoint:
    """``--adapter``'s folder as a checkpoint, refused in one line unless it is a complete adapter."""
    checkpoint = describe_checkpoint(path)
    if checkpoint.kind != "adapter":
        raise UserInputError(f"--adapter {path}: a {checkpoint.kind} checkpoint, not a sparse-gates adapter "
                             "(expected adapter_config.json and adapter weights)")
    return checkpoint


#: Issue #15's targets, checked on the default layout at batch 32.
NEVER_SLOWER_LEVELS = (0.1, 0.2, 0.4, 0.6)
SPEEDUP_TARGET = (0.4, 1.3)
IDEAL_SHARE_TARGET = ((0.4, 0.6), 0.85)


def speed_targets(rows: Sequence[dict[str, Any]], layout: str = "auto", batch_size: int = 32) -> list[str]:
    """Met/missed lines, with margins, for the random patterns of the default layout at batch 32."""
    mine = {round(r["closed_share_of_gated"], 2): r for r in rows
            if r["layout"] == layout and r["batch_size"] == batch_size and r["level"].startswith("random")}
    lines = []

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    def ratio(row: dict[str, Any]) -> str:  # the median and, when recorded, the range over rounds
        low, high = row.get("latency_ratio_low"), row.get("latency_ratio_high")
        rounds = f" (rounds {low:.2f}-{high:.2f})" if low is not None and high is not None else ""
        return f"{row['latency_ratio']:.2f}x{rounds}"

    for level in NEVER_SLOWER_LEVELS:
        if level in mine:
            x = mine[level]["latency_ratio"]
            lines.append(f"- never slower than dense at {level:.0%} closed: {ratio(mine[level])}, "
                         f"{verdict(x >= 1.0)} (margin {x - 1.0:+.2f})")
    level, target = SPEEDUP_TARGET
    if level in mine:
        x = mine[level]["latency_ratio"]
        lines.append(f"- >= {target}x at {level:.0%} closed: {ratio(mine[level])}, {verdict(x >= target)} "
                     f"(margin {x - target:+.2f})")
    levels, share = IDEAL_SHARE_TARGET
    for level in levels:
        if level in mine:
            got = mine[level]["share_of_ideal"]
            lines.append(f"- >= {share:.0%} of the ideal speed-up at {level:.0%} closed: {got:.0%}, "
                         f"{verdict(got >= share)} (margin {100 * (got - share):+.0f} points)")
    return [f"Targets ({layout} layout, batch {batch_size}, random patterns):", *lines] if lines else []


def built(row: dict[str, Any]) -> str:
    """The structure a row's pruned model has: index operations per forward, and "heads" when narrowed."""
    if row.get("index_ops") is None:
        return "-"
    return f"{row['index_ops']} ops" + (", heads" if row.get("heads_narrowed") else "")


def speed_markdown(rows: Sequence[dict[str, Any]], meta: dict[str, Any], targets: Sequence[str]) -> str:
    """The committed table: one line per (pattern, layout, batch), then the targets."""
    on = f"{meta.get('device', 'cpu')}, {meta.get('dtype', 'float32')}"  # tables before the flags were CPU fp32
    out = [f"# Dense vs pruned latency: {meta['model']}", "",
           f"Texts: {meta['texts']}; {on}; {meta['threads']} threads; {meta['batches']} batches x {meta['rounds']} "
           f"rounds (warm-up dropped), dense and every layout of a pattern timed in one loop, taking turns "
           "batch by batch (order reversed every other round); "
           "`latency x` is the median over rounds of the per-round dense / pruned time, `rounds` its slowest and "
           f"fastest round; `auto` chooses its layout for each batch size's token count; kept counts aligned to "
           f"{meta['align']}. `closed` = gated weights whose row or column the gates "
           "closed; `removed` = gated weights physically gone in that layout; `ideal` = the dense forward "
           "with each gated matrix timed shrunk to its open rows and columns (exact or rounded up to the alignment, "
           "whichever is faster), without index work; `built` = gathers plus scatters the pruned model runs "
           "per forward, and `heads` where attention runs narrowed per head (what `auto` picked).", "",
           "| pattern | layout | built | batch | closed % | removed % | dense ms | pruned ms | ideal ms | latency x | "
           "rounds | ideal x | of ideal | FLOP x |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['level']} | {r['layout']} | {built(r)} | {r['batch_size']} | "
                   f"{100 * r['closed_share_of_gated']:.1f} | "
                   f"{100 * r['removed_share_of_gated']:.1f} | {r['dense_ms']:.2f} | {r['pruned_ms']:.2f} | "
                   f"{r['ideal_ms']:.2f} | {r['latency_ratio']:.2f} | "
                   f"{r['latency_ratio_low']:.2f}-{r['latency_ratio_high']:.2f} | "
                   f"{r['dense_ms'] / r['ideal_ms']:.2f} | "
                   f"{100 * r['share_of_ideal']:.0f}% | {r['flop_ratio']:.2f} |")
    return "\n".join(out + ["", *targets, ""])
