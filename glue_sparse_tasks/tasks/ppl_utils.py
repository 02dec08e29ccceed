"""``custom_dataset`` and ``process_results`` for the rolling log-likelihood tasks (C4, WikiText-2).

Metadata (``--metadata``): ``data_dir`` (a folder holding ``c4/`` and ``wikitext2/``, or the GLUE
folder beside them), ``c4_path`` (one JSONL / JSON.gz file), ``max_docs`` (the first N documents).
"""

from __future__ import annotations

import re

from glue_sparse_tasks.data import content_dataset
from glue_sparse_tasks.local_formats import GlueDataError
from glue_sparse_tasks.text_corpora import load_c4_texts, load_wikitext2_pages


def _dataset(texts: list[str], max_docs: int | None) -> dict:
    texts = texts[: int(max_docs)] if max_docs else texts
    return {"test": content_dataset({"text": texts})}


def load_c4_docs(data_dir: str | None = None, c4_path: str | None = None, max_docs: int | None = None,
                 **_metadata) -> dict:
    try:
        texts, _ = load_c4_texts(data_dir, c4_path)
    except GlueDataError as exc:
        raise GlueDataError(f"lm-eval task glue_sparse_c4: {exc}") from None
    return _dataset(texts, max_docs)


def load_wikitext2_docs(data_dir: str | None = None, max_docs: int | None = None, **_metadata) -> dict:
    try:
        pages, _ = load_wikitext2_pages(data_dir)
    except GlueDataError as exc:
        raise GlueDataError(f"lm-eval task glue_sparse_wikitext2: {exc}") from None
    return _dataset(pages, max_docs)


def process_results(doc: dict, results: list) -> dict:
    """Per-doc (log-likelihood, weight) pairs for lm-eval's word/byte perplexity and bits per byte."""
    (loglikelihood,) = results
    text = doc["text"]
    words = len(re.split(r"\s+", text.strip())) if text.strip() else 0
    n_bytes = len(text.encode("utf-8"))
    return {"word_perplexity": (loglikelihood, words), "byte_perplexity": (loglikelihood, n_bytes),
            "bits_per_byte": (loglikelihood, n_bytes)}
