"""Pre-training data: C4 training documents streamed from local shards (or the Hub) and packed to
``seqlen`` blocks, the fixed validation documents, and the tokenizer (named, or a small BPE trained
on the training documents and cached by their content).

The corpus is never held whole: documents are read line by line (``iter_jsonl_texts``), tokenised
one at a time and packed with EOS between them (``packed_token_stream``, the same packing the
``packed`` perplexity protocol scores). The stream is infinite: after the last training document it
starts again at the first, so a run longer than the corpus repeats it in the same order.
"""

from __future__ import annotations

import glob
import hashlib
import json
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch
from torch.utils.data import IterableDataset

from glue_sparse.common.cache import open_entry
from glue_sparse.common.packaged import smollm2_path
from glue_sparse.perplexity.options import PerplexityError
from glue_sparse.common.causal_lm import doc_range, packed_token_stream
from glue_sparse.pretrain.token_cache import TokenLane, lane_spans, shard_tokens, tokenizer_fingerprint
from glue_sparse_tasks.text_corpora import iter_jsonl_texts, load_c4_texts, local_c4_files

HUB = "hub"
HUB_DATASET = ("allenai/c4", "en")
#: local training shards, as allenai/c4 names them, or any JSON Lines file
SHARD_PATTERNS = ("c4-train.*.json.gz", "c4-train.*.jsonl", "c4-train.*.json", "c4-train.*.jsonl.gz")
BPE_PREFIX = "bpe:"
EOS = "<|endoftext|>"
#: documents a BPE tokenizer is trained on at most (the first of the training range)
BPE_TRAIN_DOCS = 20_000


class PretrainDataError(PerplexityError):
    """A training or validation source that cannot be used (missing, unreadable, overlapping)."""


@dataclass(frozen=True)
class TrainSource:
    """Where the training documents come from: local files (in this order) or the Hub, and which
    documents of their concatenation (``start``/``stop``, global indices; ``stop`` None: to the end)."""

    files: tuple[str, ...]
    start: int
    stop: int | None
    hub: bool = False
    doc_counts: tuple[int, ...] = field(default=())  # per file, when the shards were checked

    def documents(self) -> Iterator[str]:
        """The training documents, streamed."""
        if self.hub:
            import datasets

            stream = datasets.load_dataset(*HUB_DATASET, split="train", streaming=True)
            texts: Iterable[str] = (row["text"] for row in stream)
        else:
            texts = (text for name in self.files for text in iter_jsonl_texts(Path(name)))
        return islice(texts, self.start, self.stop)

    def describe(self) -> dict[str, Any]:
        return {"source": f"hub:{'/'.join(HUB_DATASET)} train (streamed)" if self.hub else list(self.files),
                "docs": f"{self.start}:{'' if self.stop is None else self.stop}",
                "doc_counts": list(self.doc_counts) or None}


def train_source(spec: str | None, data_dir: str | None, docs: str, check: bool = True) -> TrainSource:
    """Resolve ``--train-data`` (a file, a folder of ``c4-train.*`` shards, a glob, ``hub``, or None for
    the local C4 sample) and ``--train-docs``. ``check`` reads every local shard once, so a truncated gzip,
    a non-JSON line or a missing ``text`` field is named before any model loads."""
    window = doc_range(docs, "--train-docs")
    start, stop = window.start or 0, window.stop
    if start < 0 or (stop is not None and stop <= start):
        raise PretrainDataError(f"--train-docs {docs!r}: expected 0 <= START < END")
    if spec == HUB:
        return TrainSource((), start, stop, hub=True)
    files = _local_files(spec, data_dir)
    counts = tuple(sum(1 for _ in iter_jsonl_texts(f)) for f in files) if check else ()
    if counts and start >= sum(counts):
        raise PretrainDataError(f"--train-docs {docs!r}: the training files hold only {sum(counts)} documents")
    return TrainSource(tuple(str(f) for f in files), start, stop, doc_counts=counts)


def _local_files(spec: str | None, data_dir: str | None) -> list[Path]:
    if spec is None:
        files, looked = local_c4_files(data_dir)
        if not files:
            raise PretrainDataError(f"--train-data: no C4 file found in {', '.join(looked) or 'nothing'} "
                                    "(give --train-data FILE|FOLDER|GLOB|hub or --data-dir)")
        return files[:1]
    path = Path(spec).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted({f for pattern in SHARD_PATTERNS for f in path.glob(pattern)})
        if not found:
            raise PretrainDataError(f"--train-data {spec}: the folder holds no {' / '.join(SHARD_PATTERNS)} shard")
        return found
    found = sorted(Path(f) for f in glob.glob(str(path)))
    if not found:
        raise PretrainDataError(f"--train-data {spec!r}: no such file or folder, and no file matches it as a glob")
    return found


def validation_texts(spec: str | None, data_dir: str | None, docs: str, source: TrainSource,
                     use_hub: bool = True) -> tuple[list[str], Any]:
    """The fixed validation documents (``--eval-data``: one file, ``hub`` for the Hub's C4 validation
    shard 0, or None for the local sample) and their provenance; refused where they overlap training."""
    texts, prov = load_c4_texts(data_dir, None if spec in (None, HUB) else spec, use_hub=use_hub)
    window = doc_range(docs, "--eval-docs")
    chosen = texts[window]
    if not chosen:
        raise PretrainDataError(f"--eval-docs {docs!r}: no document of the {len(texts)} in {prov.source}")
    resolved = [str(Path(f).resolve()) for f in source.files]
    if not source.hub and str(Path(prov.source).resolve()) in resolved:
        offset = _offset_of(resolved.index(str(Path(prov.source).resolve())), source)
        lo, hi = window.indices(len(texts))[:2]
        t_lo, t_hi = source.start - offset, (len(texts) if source.stop is None else source.stop - offset)
        if max(lo, t_lo) < min(hi, t_hi):
            raise PretrainDataError(f"--eval-docs {docs!r} overlaps --train-docs in {prov.source} (training "
                                    f"uses its documents {max(t_lo, 0)}:{min(t_hi, len(texts))}); validation "
                                    "must be disjoint from training")
    return chosen, prov


def _offset_of(index: int, source: TrainSource) -> int:
    """Global index of the first document of training file ``index``."""
    if index == 0:
        return 0
    counts = source.doc_counts or tuple(sum(1 for _ in iter_jsonl_texts(Path(f))) for f in source.files[:index])
    return sum(counts[:index])


class PackedBlocks(IterableDataset):
    """``{"input_ids", "labels"}`` blocks of ``seqlen`` packed tokens, forever (passes repeat the order).

    Deterministic: the n-th block is a function of the documents, the tokenizer and ``seqlen`` alone, so
    the Trainer's skip of consumed batches puts a resumed run at exactly the position it stopped at.
    With ``token_cache`` (local shards and a tokenizer with a serialisable backend) the blocks are cut
    from each shard's cached token file (``token_cache``), built the first time a process reads the
    lane; otherwise each document is tokenised as it is reached. Both give the same blocks.

    With several *lanes* (``lane_sources``: each its own shards, packed on its own), the stream takes
    ``chunk`` blocks from each lane in turn. A process reads only the lanes in ``read``: every other
    block is a ``None`` placeholder, which accelerate's per-rank slicing (``IterableDatasetShard``) drops
    unseen when the lanes are laid out so that each rank's slice of every window is its own lanes."""

    def __init__(self, lane_sources: Sequence[TrainSource], tokenizer: Any, seqlen: int,
                 chunk: int = 1, read: Sequence[int] | None = None, token_cache: bool = True) -> None:
        self.lane_sources, self.tokenizer, self.seqlen, self.chunk = list(lane_sources), tokenizer, seqlen, chunk
        self.read = list(range(len(self.lane_sources))) if read is None else list(read)
        self.fingerprint = tokenizer_fingerprint(tokenizer) if token_cache else None

    def __iter__(self) -> Iterator[dict[str, torch.Tensor] | None]:
        streams = [self._lane(k) if k in self.read else None for k in range(len(self.lane_sources))]
        while True:
            for stream in streams:
                for _ in range(self.chunk):
                    yield None if stream is None else next(stream)

    def _lane(self, lane: int) -> Iterator[dict[str, torch.Tensor]]:
        source = self.lane_sources[lane]
        ids_blocks = (self._cached(source) if self.fingerprint and not source.hub else self._tokenised(source))
        for ids in ids_blocks:
            yield {"input_ids": ids, "labels": ids.clone()}

    def _cached(self, source: TrainSource) -> Iterator[torch.Tensor]:
        shards = [shard_tokens(f, self.tokenizer, self.fingerprint) for f in source.files]
        tokens = TokenLane(lane_spans(shards, source.start, source.stop))
        if tokens.length < self.seqlen:
            raise self._too_short()
        return tokens.blocks(self.seqlen)

    def _tokenised(self, source: TrainSource) -> Iterator[torch.Tensor]:
        block: list[int] = []
        while True:
            produced = False
            for token in packed_token_stream(self.tokenizer, source.documents()):
                block.append(token)
                if len(block) == self.seqlen:
                    yield torch.tensor(block, dtype=torch.long)
                    block, produced = [], True
            if not produced:
                raise self._too_short()

    def _too_short(self) -> PretrainDataError:
        return PretrainDataError(f"the training documents give no full block of {self.seqlen} tokens")


def lane_layout(lanes: int, per_device_batch: int, world: int, rank: int) -> tuple[int, list[int]]:
    """(blocks per lane turn, lanes this rank reads) so that rank r's slice of every window of
    ``per_device_batch * world`` blocks holds only its own lanes: the same global batches for any world
    size, with each rank reading only ``lanes / world`` of the shards."""
    window = per_device_batch * world
    if window % lanes:
        raise PretrainDataError(f"--data-lanes {lanes}: the global micro-batch of {window} blocks must be a "
                                "multiple of the lanes")
    chunk = window // lanes
    lo, hi = rank * per_device_batch, (rank + 1) * per_device_batch
    return chunk, [k for k in range(lanes) if k * chunk < hi and (k + 1) * chunk > lo]


def lane_sources(source: TrainSource, lanes: int) -> list[TrainSource]:
    """Lane k streams the shards ``k, k + lanes, ...``; one lane is the whole (sliced) source."""
    if lanes == 1:
        return [source]
    if source.hub or len(source.files) < lanes:
        raise PretrainDataError(f"--data-lanes {lanes} needs at least {lanes} local shard files, got "
                                f"{'the Hub stream' if source.hub else len(source.files)}")
    if source.start or source.stop is not None:
        raise PretrainDataError("--data-lanes > 1 splits whole shards: give --train-docs : (all documents)")
    return [TrainSource(source.files[k::lanes], 0, None) for k in range(lanes)]


def load_tokenizer(spec: str, source: TrainSource) -> tuple[Any, dict[str, Any]]:
    """``smollm2`` (the packaged tokenizer), ``bpe:N`` (a byte-level BPE of N tokens trained on the
    training documents, cached by their content), or a tokenizer folder / Hub name. Returns the
    tokenizer and what the run records about it."""
    from transformers import AutoTokenizer

    if spec == "smollm2":
        tokenizer, record = AutoTokenizer.from_pretrained(smollm2_path()), {"kind": "packaged SmolLM2-135M"}
    elif spec.startswith(BPE_PREFIX):
        tokenizer, record = _trained_bpe(spec, source)
    else:
        try:
            tokenizer = AutoTokenizer.from_pretrained(spec)
        except (OSError, ValueError) as exc:
            raise PretrainDataError(f"--tokenizer {spec!r}: not smollm2, bpe:N, a tokenizer folder or a "
                                    f"reachable Hub name ({str(exc).splitlines()[0][:160]})") from None
        record = {"kind": "named", "name": spec}
    if tokenizer.eos_token_id is None:
        raise PretrainDataError(f"--tokenizer {spec!r} has no EOS token, which packing puts between documents")
    return tokenizer, {**record, "spec": spec, "vocab_size": len(tokenizer)}


def _trained_bpe(spec: str, source: TrainSource) -> tuple[Any, dict[str, Any]]:
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    try:
        vocab = int(spec[len(BPE_PREFIX):])
    except ValueError:
        vocab = 0
    if vocab < 300:
        raise PretrainDataError(f"--tokenizer {spec!r}: expected bpe:N with N >= 300 (256 bytes + merges)")
    texts = list(islice(source.documents(), BPE_TRAIN_DOCS))
    digest = hashlib.sha256(json.dumps([vocab, tokenizers.__version__, texts]).encode()).hexdigest()[:16]
    record = {"kind": "bpe trained on the training documents", "trained_on_docs": len(texts),
              "content_sha256_16": digest, "tokenizers_version": tokenizers.__version__}

    def build(staging: Path) -> None:
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        bpe.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False))
        PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS, bos_token=EOS, pad_token=EOS,
                                unk_token=None).save_pretrained(str(staging))

    target = open_entry("tokenizers", f"bpe-{vocab}-{digest}", build,
                        f"bpe:{vocab} on {len(texts)} training documents")
    return PreTrainedTokenizerFast.from_pretrained(str(target)), record
