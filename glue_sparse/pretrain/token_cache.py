"""Training shards tokenised once into memory-mapped token files, so the input pipeline of pre-training
reads blocks at memory speed instead of waiting for the tokenizer every step (issue #49: the tokenizer
alone gave 172-250k tokens/s on 2 CPU cores, where llama_60m on one H200 needs about 1M).

Each local shard becomes ``tokens.bin`` (its packed token stream: every document's ids followed by EOS,
exactly as ``packed_token_stream`` packs them; uint16, or uint32 for vocabularies over 65,536) and
``doc_ends.bin`` (where each document ends), in ``$GLUE_SPARSE_CACHE/tokens/<shard sha256>-<tokenizer
sha256>/``. Keyed by content, the files serve every rank, every rerun and every run with the same shard
and tokenizer; they are written aside and renamed, so a crash never leaves half a file in use. A lane's
blocks are cut from the concatenation of its shards' streams, cycled, so the n-th block is the same as
the streaming path's n-th block (tested), and exact resume and N-process equality carry over.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from glue_sparse.common.packaged import cache_root, file_sha256
from glue_sparse_tasks.text_corpora import iter_jsonl_texts

FORMAT = 1  # bump when the files' layout or the packing changes: old entries are then never read
TOKENIZE_BATCH = 1024  # documents per call of the (Rust) batch tokenizer


def tokenizer_fingerprint(tokenizer: Any) -> str | None:
    """sha256 of the tokenizer's full definition (vocabulary, merges, normalisation) and EOS id; None for a
    tokenizer without a serialisable backend, which is then tokenised while training, as before."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    return hashlib.sha256(json.dumps([FORMAT, backend.to_str(), tokenizer.eos_token_id]).encode()).hexdigest()


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
    """The shard's cached tokens, tokenising it first when no process has yet."""
    folder = cache_root() / "tokens" / f"{file_sha256(path)[:32]}-{fingerprint[:32]}"
    if not (folder / "meta.json").is_file():
        _build(Path(path), tokenizer, folder)
    meta = json.loads((folder / "meta.json").read_text())
    read = lambda name, dtype, n: (np.memmap(folder / name, dtype=dtype, mode="r", shape=(n,))  # noqa: E731
                                   if n else np.zeros(0, dtype=dtype))
    return ShardTokens(read("tokens.bin", meta["dtype"], meta["tokens"]), read("doc_ends.bin", np.int64, meta["docs"]))


def _build(path: Path, tokenizer: Any, folder: Path) -> None:
    eos = tokenizer.eos_token_id
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    started, total, ends = time.perf_counter(), 0, []
    try:
        with (staging / "tokens.bin").open("wb") as out:
            texts = iter_jsonl_texts(path)
            while True:
                batch = [t for _, t in zip(range(TOKENIZE_BATCH), texts)]
                if not batch:
                    break
                for ids in tokenizer(batch, add_special_tokens=False).input_ids:
                    ids = ids + ([eos] if eos is not None else [])
                    out.write(np.asarray(ids, dtype=dtype).tobytes())
                    total += len(ids)
                    ends.append(total)
        np.asarray(ends, dtype=np.int64).tofile(staging / "doc_ends.bin")
        (staging / "meta.json").write_text(json.dumps({
            "format": FORMAT, "dtype": np.dtype(dtype).name, "tokens": total, "docs": len(ends),
            "shard": path.name, "build_seconds": round(time.perf_counter() - started, 3)}))
        os.rename(staging, folder)
    except OSError:
        if not (folder / "meta.json").is_file():  # not another process's finished copy: a real failure
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
