"""``glue-sparse perplexity``'s options (and the protocol settings post-training shares), in a module that
imports no torch, so ``--help`` is instant; the measurement is ``run.py``."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import DeviceOptions, option
from glue_sparse_tasks.errors import UserInputError


class PerplexityError(UserInputError):
    """Inputs a protocol cannot use (too few tokens, a window longer than the model's context...)."""


PROTOCOLS = ("sparsegpt", "galore", "packed")


@dataclass(kw_only=True)
class ProtocolOptions(DeviceOptions):
    """How perplexity is measured: the corpus and both protocols' settings (published defaults)."""

    corpus: str = option("c4", "c4 or wikitext2")
    c4_path: str | None = option(None, "one C4 JSONL / JSON.gz file")
    data_dir: str | None = option(None, "folder holding c4/ and wikitext2/ (default: $GLUE_SPARSE_DATA_DIR)")
    hub: bool = option(True, "ask the Hugging Face Hub when the corpus is not local (--no-hub: never)")
    protocols: str = option("sparsegpt,galore", "comma-separated: sparsegpt, galore, packed")
    n_samples: int = option(256, "sparsegpt windows (published: 256)")
    seqlen: int = option(2048, "sparsegpt and packed window length (sparsegpt published: 2048)")
    docs: int = option(1100, "sparsegpt: first documents joined (published: 1100)")
    max_length: int = option(256, "galore: tokens kept per document")
    token_budget: int = option(10_000_000, "galore: non-pad tokens to score; packed: exactly this many targets")
    batch_size: int = option(8, "galore and packed batch size")

    def protocol_list(self) -> list[str]:
        chosen = [p for p in self.protocols.split(",") if p]
        unknown = [p for p in chosen if p not in PROTOCOLS]
        if unknown or not chosen:
            raise PerplexityError(f"--protocols {self.protocols!r}: known protocols are {', '.join(PROTOCOLS)}")
        return chosen

    def protocol_kwargs(self, protocol: str) -> dict[str, int]:
        if protocol == "sparsegpt":
            return {"n_samples": self.n_samples, "seqlen": self.seqlen, "docs": self.docs}
        if protocol == "packed":
            return {"seqlen": self.seqlen, "token_budget": self.token_budget, "batch_size": self.batch_size}
        return {"max_length": self.max_length, "token_budget": self.token_budget, "batch_size": self.batch_size}


@dataclass(kw_only=True)
class PerplexityOptions(ProtocolOptions):
    """``glue-sparse perplexity``: one model (optionally with an adapter, optionally pruned) scored."""

    model: str | None = option(None, "causal LM folder or Hub name (default: packaged SmolLM2-135M)")
    adapter: str | None = option(None, "a sparse-gates (or any PEFT) adapter to apply to --model")
    prune: bool = option(False, "prune the adapter before scoring")
    eval_docs: str = option(":", "START:END slice of the corpus documents to score (default: all)")
    output: str | None = option(None, "folder to write the results to: perplexity.json (atomically)")
