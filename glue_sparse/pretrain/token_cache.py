"""Training shards tokenised once into memory-mapped token files, so the input pipeline of pre-training
reads blocks at memory speed instead of waiting for the tokenizer every step (issue #49: the tokenizer
alone gave 172-250k tokens/s on 2 CPU cores, where llama_60m on one H200 needs about 1M).

Each local shard becomes ``tokens.bin`` (its packed token stream: every document's ids followed by EOS,
exactly as ``packed_token_stream`` packs them; uint16, or uint32 for vocabularies over 65,536) and
``doc_ends.bin`` (where each document ends), in the cache entry ``tokens/<shard sha256>-<tokenizer
sha256>/`` (``glue_sparse.common.cache``: checked on open, rebuilt when damaged, written durably). Keyed by
content, the files serve every rank, every rerun and every run with the same shard and tokenizer. A lane's
blocks are cut from the concatenation of its shards' streams, cycled, so the n-th block is the same as
the streaming path's n-th block (tested), and exact resume and N-process equality carry over.
"""

from __future__ import annotations

import hashlib
import json
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from glue_sparse.common.cache import FORMATS, CacheEntryError, manifest, open_entry
from glue_sparse.common.cache_root import file_sha256
from glue_sparse_tasks.text_corpora import iter_jsonl_texts

TOKENIZE_BATCH = 1024  # documents per call of the (Rust) batch tokenizer


def tokenizer_fingerprint(tokenizer: Any) -> str | None:
    """sha256 of the tokenizer's full definition (vocabulary, merges, normalisation) and EOS id; None for a
    tokenizer without a serialisable backend, which is then tokenised while training, as before."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    return hashlib.sha256(json.dumps([FORMATS["tokens"], backend.to_str(), tokenizer.eos_token_id]).encode()).hexdigest()


@dataclass(frozen=True)
class ShardTokens:
    """One shard's packed token stream and the end of each document in it (memory-mapped, read-only)."""

    tokens: np.ndarray
    doc_ends: np.ndarray

    def doc_span(self, first: int, last: int) -> np.ndarray:
        """The tokens of documents ``first`` to ``last - 1`` (each with its EOS), a view: nothing is copied."""
        lo = 0 if first == 0 else int(self.doc_ends[first - 1])
        return self.tokens[lo:int(self.doc_ends[last - 1])] if last > first else self.tokens[:0]


def shard_tokens(path: str | Path, tokenizer: Any, fingerprint: str) -> ShardTokens:
    """The shard's cached tokens, tokenising it first when no process has yet (or its entry is damaged: see
    ``glue_sparse.common.cache``; the checksums are verified once per entry, then sizes on every open)."""
    path = Path(path)
    folder = open_entry("tokens", f"{file_sha256(path)[:32]}-{fingerprint[:32]}",
                        lambda staging: _build(path, tokenizer, staging), f"shard {path.name}", check="once")
    meta = manifest(folder)
    if meta["docs"] and meta["max_id"] >= len(tokenizer):
        raise CacheEntryError(f"cache entry {folder} holds token id {meta['max_id']}, outside this tokenizer's "
                              f"{len(tokenizer):,} ids: never trained on; clear it: glue-sparse cache clear --kind tokens")
    read = lambda name, dtype, n: (np.memmap(folder / name, dtype=dtype, mode="r", shape=(n,))  # noqa: E731
                                   if n else np.zeros(0, dtype=dtype))
    return ShardTokens(read("tokens.bin", meta["dtype"], meta["tokens"]), read("doc_ends.bin", np.int64, meta["docs"]))


def _build(path: Path, tokenizer: Any, staging: Path) -> dict[str, Any]:
    """Tokenise the shard into ``staging``; the manifest's fields (dtype, counts, the largest id)."""
    eos = tokenizer.eos_token_id
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    started, total, ends, largest = time.perf_counter(), 0, [], -1
    with (staging / "tokens.bin").open("wb") as out:
        texts = iter_jsonl_texts(path)
        while True:
            batch = [t for _, t in zip(range(TOKENIZE_BATCH), texts)]
            if not batch:
                break
            for ids in tokenizer(batch, add_special_tokens=False).input_ids:
                ids = ids + ([eos] if eos is not None else [])
                out.write(np.asarray(ids, dtype=dtype).tobytes())
                largest = max(largest, max(ids, default=-1))
                total += len(ids)
                ends.append(total)
    np.asarray(ends, dtype=np.int64).tofile(staging / "doc_ends.bin")
    return {"dtype": np.dtype(dtype).name, "tokens": total, "docs": len(ends), "max_id": largest, "shard": path.name,
            "build_seconds": round(time.perf_counter() - started, 3)}


class TokenLane:
    """A lane's token stream (spans of cached shards, concatenated) cut into ``seqlen`` blocks, forever:
    after the last token it starts again at the first, as the streaming path's passes do."""

    def __init__(self, spans: Sequence[np.ndarray]) -> None:
        self.spans = [s for s in spans if len(s)]
        self.starts = np.cumsum([0] + [len(s) for s in self.spans]).tolist()
        self.length = self.starts[-1]

    def blocks(self, seqlen: int) -> Iterator[torch.Tensor]:
        """Blocks of ``seqlen`` ids (int64); the caller checks that ``length`` holds at least one."""
        position = 0
        while True:
            block = np.empty(seqlen, dtype=np.int64)
            filled = 0
            while filled < seqlen:
                span = bisect_right(self.starts, position) - 1
                offset = position - self.starts[span]
                take = min(seqlen - filled, len(self.spans[span]) - offset)
                block[filled:filled + take] = self.spans[span][offset:offset + take]
                filled += take
                position = (position + take) % self.length
            yield torch.from_numpy(block)


def lane_spans(shards: Sequence[ShardTokens], start: int, stop: int | None) -> list[np.ndarray]:
    """The token spans of documents ``start:stop`` of the shards' concatenation (global document indices)."""
    spans, offset = [], 0
    for shard in shards:
        count = len(shard.doc_ends)
        first, last = max(start - offset, 0), min(count, count if stop is None else stop - offset)
        if first < last:
            spans.append(shard.doc_span(first, last))
        offset += count
    return spans
