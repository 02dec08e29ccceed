"""Token-level perplexity under named protocols, for any HF causal LM and our gated/pruned models.

- ``sparsegpt`` (SparseGPT/Wanda/GPTQ): the first ``docs`` documents joined with spaces, tokenized
  once, the first ``n_samples * seqlen`` tokens cut into non-overlapping windows; perplexity is
  exp(mean token NLL). Published defaults: 1,100 docs, 256 x 2,048.
- ``galore`` (GaLore/FineGates): each document truncated to its first ``max_length`` (256) tokens
  and padded; batches until ``token_budget`` non-pad tokens were seen; exp(mean of batch losses).
- ``packed`` (our pre-training validation): documents tokenized one by one and joined with EOS, as
  training packs them; exactly ``token_budget`` next-token targets scored in windows of ``seqlen``;
  perplexity is exp of the token-weighted mean NLL. ``glue-sparse pretrain`` evaluates with it, so
  ``glue-sparse perplexity --protocols packed`` reproduces a run's numbers.

Logits are computed in chunks of positions so memory stays bounded for large vocabularies. Post-training
and pre-training score with these functions; ``run.py`` is the ``perplexity`` command's work.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from glue_sparse.common.causal_lm import causal_lm_parts, context_length, model_device, packed_token_stream
from glue_sparse.perplexity.options import PROTOCOLS, PerplexityError, ProtocolOptions
from glue_sparse_tasks.console import progress
from glue_sparse_tasks.data import fingerprint
from sparse_models.runtime.devices import autocast, resolve_precision


@dataclass
class PerplexityResult:
    protocol: str
    perplexity: float
    mean_nll: float
    tokens_scored: int
    tokens_used: int
    windows: int
    settings: dict[str, Any]
    data: dict[str, Any]
    model: str
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_used / self.seconds if self.seconds else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens_per_second": self.tokens_per_second}


@torch.inference_mode()
def nll_sum(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
            chunk: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of next-token NLL (float64) over positions whose target is a real token, and how many there
    were, as tensors on the model's device: callers add them up there and read them once, so an
    evaluation waits for the device at its end, not at every chunk."""
    backbone, head, _ = causal_lm_parts(model)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
    targets = input_ids[:, 1:]
    valid = attention_mask[:, 1:].bool() if attention_mask is not None else torch.ones_like(targets, dtype=torch.bool)
    total = torch.zeros((), dtype=torch.float64, device=input_ids.device)
    count = torch.zeros((), dtype=torch.long, device=input_ids.device)
    for start in range(0, targets.shape[1], chunk):
        logits = head(hidden[:, start:start + chunk]).float()
        tgt = targets[:, start:start + chunk]
        mask = valid[:, start:start + chunk]
        losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
        total += losses[mask.reshape(-1)].sum().double()
        count += mask.sum()
    return total, count


def _check_seqlen(model: nn.Module, seqlen: int) -> None:
    limit = context_length(causal_lm_parts(model)[2])
    if limit is not None and seqlen > limit:
        raise PerplexityError(f"seqlen {seqlen} is longer than the model's context ({limit} positions)")


def sparsegpt_perplexity(model: nn.Module, tokenizer: Any, texts: Sequence[str],
                         n_samples: int = ProtocolOptions.n_samples, seqlen: int = ProtocolOptions.seqlen,
                         docs: int = ProtocolOptions.docs, device: str | None = None,
                         data: dict | None = None, model_name: str = "") -> PerplexityResult:
    """SparseGPT-style C4 perplexity (see module docstring)."""
    _check_seqlen(model, seqlen)
    device = device or model_device(model)
    if not texts:
        raise PerplexityError("no documents to score")
    joined = " ".join(texts[:docs])
    ids = tokenizer(joined, return_tensors="pt").input_ids
    needed = n_samples * seqlen
    if ids.shape[1] < needed:
        raise PerplexityError(f"the first {min(docs, len(texts))} documents give {ids.shape[1]:,} tokens; "
                              f"{n_samples} x {seqlen} = {needed:,} are needed (lower n_samples or seqlen)")
    ids = ids[:, :needed].view(n_samples, seqlen)
    start = time.perf_counter()
    model.eval()
    sums = [nll_sum(model, ids[i:i + 1].to(device)) for i in progress(range(n_samples), desc="sparsegpt perplexity",
                                                                       unit="window")]
    total, count = float(sum(t for t, _ in sums)), int(sum(c for _, c in sums))
    seconds = time.perf_counter() - start
    mean = total / count
    return PerplexityResult("sparsegpt", math.exp(mean), mean, count, needed, n_samples,
                            {"n_samples": n_samples, "seqlen": seqlen, "docs": docs, "joiner": "space"},
                            dict(data or {}), model_name, seconds)


def galore_perplexity(model: nn.Module, tokenizer: Any, texts: Sequence[str],
                      max_length: int = ProtocolOptions.max_length, token_budget: int = ProtocolOptions.token_budget,
                      batch_size: int = ProtocolOptions.batch_size, device: str | None = None,
                      data: dict | None = None, model_name: str = "") -> PerplexityResult:
    """GaLore/FineGates-style perplexity (see module docstring)."""
    _check_seqlen(model, max_length)
    device = device or model_device(model)
    if not texts:
        raise PerplexityError("no documents to score")
    if tokenizer.pad_token_id is None:  # causal LM tokenizers often have none; padding is masked anyway
        tokenizer = copy.copy(tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
    totals, counts = [], []
    seen = scored = docs_used = 0
    start = time.perf_counter()
    model.eval()
    for lo in progress(range(0, len(texts), batch_size), desc="galore perplexity", unit="batch"):
        if seen >= token_budget:
            break
        enc = tokenizer(list(texts[lo:lo + batch_size]), truncation=True, max_length=max_length,
                        padding="max_length", return_tensors="pt")
        count = int(enc["attention_mask"][:, 1:].sum())  # nll_sum's count, known on the host: no device wait
        if count == 0:
            continue
        totals.append(nll_sum(model, enc["input_ids"].to(device), enc["attention_mask"].to(device))[0])
        counts.append(count)
        seen += int(enc["attention_mask"].sum())
        scored += count
        docs_used += enc["input_ids"].shape[0]
    batch_losses = (torch.stack(totals).cpu() / torch.tensor(counts)).tolist() if totals else []
    seconds = time.perf_counter() - start
    if not batch_losses:
        empty = sum(1 for t in texts[:docs_used or len(texts)] if not t.strip())
        raise PerplexityError(f"no document gave a token to score ({len(texts)} documents, {empty} of them empty "
                              "or blank); each needs at least 2 tokens")
    mean = sum(batch_losses) / len(batch_losses)
    return PerplexityResult("galore", math.exp(mean), mean, scored, seen, len(batch_losses),
                            {"max_length": max_length, "token_budget": token_budget, "batch_size": batch_size,
                             "docs_used": docs_used, "budget_reached": seen >= token_budget},
                            dict(data or {}), model_name, seconds)


def packed_perplexity(model: nn.Module, tokenizer: Any, texts: Sequence[str],
                      seqlen: int = ProtocolOptions.seqlen, token_budget: int = ProtocolOptions.token_budget,
                      batch_size: int = ProtocolOptions.batch_size, device: str | None = None,
                      data: dict | None = None, model_name: str = "") -> PerplexityResult:
    """Exactly ``token_budget`` packed targets, ``seqlen`` per window (see module docstring)."""
    _check_seqlen(model, seqlen + 1)
    device = device or model_device(model)
    if token_budget < 1 or seqlen < 1:
        raise PerplexityError(f"packed: token_budget and seqlen must be >= 1, got {token_budget} and {seqlen}")
    ids = torch.tensor(list(packed_token_stream(tokenizer, texts, token_budget + 1)), dtype=torch.long)
    if ids.numel() < token_budget + 1:
        raise PerplexityError(f"packed: the {len(texts)} documents give {ids.numel():,} tokens; {token_budget + 1:,} "
                              f"are needed to score {token_budget:,} (lower the token budget or add documents)")
    full = token_budget // seqlen  # windows of seqlen + 1 ids: seqlen targets each, the last window shorter
    windows = [ids[i * seqlen:(i + 1) * seqlen + 1] for i in range(full)]
    start = time.perf_counter()
    model.eval()
    sums = [nll_sum(model, torch.stack(windows[lo:lo + batch_size]).to(device))
            for lo in progress(range(0, full, batch_size), desc="packed perplexity", unit="batch")]
    if token_budget % seqlen:
        sums.append(nll_sum(model, ids[full * seqlen:].unsqueeze(0).to(device)))
    total, count = float(sum(t for t, _ in sums)), int(sum(c for _, c in sums))
    seconds = time.perf_counter() - start
    assert count == token_budget, (count, token_budget)
    mean = total / count
    return PerplexityResult("packed", math.exp(mean), mean, count, count, full + bool(token_budget % seqlen),
                            {"seqlen": seqlen, "token_budget": token_budget, "batch_size": batch_size,
                             "joiner": "eos"}, dict(data or {}), model_name, seconds)


def unigram_perplexity(tokenizer: Any, texts: Sequence[str], token_budget: int) -> float:
    """Perplexity of the best unigram model of the very targets ``packed_perplexity`` scores (its
    frequencies fitted on them): the floor a language model must clearly beat to have learned context."""
    ids = list(packed_token_stream(tokenizer, texts, token_budget + 1))[1:]
    if len(ids) < token_budget:
        raise PerplexityError(f"unigram: the documents give {len(ids) + 1:,} tokens; {token_budget + 1:,} needed")
    counts = torch.bincount(torch.tensor(ids)).double()
    counts = counts[counts > 0]
    probabilities = counts / counts.sum()
    return math.exp(float(-(probabilities * probabilities.log()).sum()))


def perplexity(protocol: str, *args: Any, **kwargs: Any) -> PerplexityResult:
    if protocol == "sparsegpt":
        return sparsegpt_perplexity(*args, **kwargs)
    if protocol == "galore":
        return galore_perplexity(*args, **kwargs)
    if protocol == "packed":
        return packed_perplexity(*args, **kwargs)
    raise PerplexityError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")


def score_protocols(model: nn.Module, tokenizer: Any, texts: Sequence[str], prov: Any, options: ProtocolOptions,
                    name: str) -> dict[str, dict[str, Any]]:
    """Every chosen protocol's result for one model, on the model's device in ``options.precision``
    (autocast), logged as it finishes."""
    data = {**prov.to_dict(), "docs_in_range": len(texts), "range_sha256": fingerprint({"text": t} for t in texts)}
    device = model_device(model)
    precision = resolve_precision(options.precision, device)
    out = {}
    for protocol in options.protocol_list():
        with autocast(device, precision):
            result = perplexity(protocol, model, tokenizer, texts, data=data, model_name=name,
                                **options.protocol_kwargs(protocol))
        out[protocol] = {**result.to_dict(), "device": device.type, "precision": precision}
        logging.getLogger("glue_sparse").info(
            f"{name:<40} {protocol:<10} ppl {result.perplexity:10.3f}  tokens {result.tokens_scored:>9,}  "
            f"{result.tokens_per_second:8.0f} tok/s")
    return out
