"""T-JEPA recipe: text I-JEPA on a BERT backbone (span masks, EMA target), with collapse diagnostics over training and
offline downstream probes. (The image counterpart is `hf_jepa.recipes.i_jepa`; the paper's experiments are
`hf_jepa.reproductions.t_jepa`.)

Diagnostics (`hf_jepa.metrics.collapse`) are computed at every log step on a fixed validation batch and a fixed
training batch with the model in eval mode: the MI proxy between predictions and targets (per target token), the
effective rank, cosine statistics and std of the pooled target-encoder embeddings, and the validation loss. They land
in the trainer's log records (`train/...`, `val/...` keys), in `diagnostics.jsonl`, and in the failure-signature plot.
"""

import inspect
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..cards.t_jepa import render_card, result_rows
from ..data.masking import SpanMaskingCollator
from ..data.streaming import StreamedBatches, stream_batches
from ..data.text import (
    VALIDATION_SEED_OFFSET,
    AmbiguityCorpus,
    StreamedTextData,
    TextData,
    retrieval_task,
    topic_classification_task,
    training_start,
)
from ..metrics.collapse import irreducible_conditional_variance, plot_failure_signature
from ..metrics.downstream import embed_texts, linear_probe_accuracy, online_downstream, retrieval_recall
from ..modeling.t_jepa import TJepaConfig, TJepaModel
from ..trainers import seeded_generator
from ._checks import check_choice, check_count, check_types
from ._collapse import CollapseDiagnosedRecipe
from ._saved import write_settings_and_card
from .family import Family

logger = logging.getLogger(__name__)

CORPORA = ("text", "ambiguity")


@dataclass
class TJepaDataArguments:
    """Data settings of the T-JEPA recipe (YAML keys / `--set` names).

    data: "embedded" (default), "c4", a Hub dataset id or a local path (txt / parquet / arrow / csv / json files, a
    folder of them, a save_to_disk folder). text_column: the column holding the text. streaming: read the training text
    as a stream (sharded across processes, tokenised and masked in `num_workers` DataLoader workers) instead of loading
    it all first; `data=c4` then streams all of C4 instead of materialising its first sentences."""

    data: str | None = None
    text_column: str = "text"
    streaming: bool = False
    num_workers: int = 0
    corpus: str = "text"
    ambiguity: int = 1
    tokenizer: str | None = None
    backbone: str | None = None
    max_length: int = 64
    diagnostics_sentences: int = 128
    downstream: bool = True
    online_downstream: bool = False
    plot: bool = True

    def __post_init__(self):
        check_types(self)
        check_choice(self, "corpus", CORPORA)
        check_count(self, "ambiguity", minimum=1)
        check_count(self, "max_length", minimum=8)
        check_count(self, "diagnostics_sentences", minimum=8)
        check_count(self, "num_workers", minimum=0)
        if self.streaming and self.corpus == "ambiguity":
            raise ValueError("streaming=true reads data=; the ambiguity corpus is generated: use corpus='text'")
        if self.streaming and self.data in (None, "embedded"):
            raise ValueError(
                "streaming=true needs data= 'c4', a Hub dataset id or a local path (not the embedded corpus)"
            )


def _own_fields(config: TJepaConfig) -> dict[str, Any]:
    """The config's T-JEPA fields (everything but the backbone), as keyword arguments of `TJepaConfig`."""
    fields = set(inspect.signature(TJepaConfig.__init__).parameters) - {"self", "backbone_config", "kwargs"}
    return {k: v for k, v in config.to_dict().items() if k in fields}


def check_tokenizer(config: TJepaConfig, tokenizer) -> None:
    """The tokenizer must fit the model: every id below the backbone's vocabulary, and the same [MASK] and [PAD]."""
    vocab = config.backbone_config.vocab_size
    if len(tokenizer) > vocab:
        raise ValueError(
            f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary has {vocab}: they do "
            "not match (set the backbone's vocab_size or use the model's own tokenizer)"
        )
    if tokenizer.mask_token_id != config.mask_token_id or tokenizer.pad_token_id != config.pad_token_id:
        raise ValueError(
            f"tokenizer [MASK]/[PAD] ids ({tokenizer.mask_token_id}, {tokenizer.pad_token_id}) differ "
            f"from the config's mask_token_id/pad_token_id ({config.mask_token_id}, {config.pad_token_id})"
        )


class TJepaRecipe(CollapseDiagnosedRecipe):
    name = "t-jepa"

    def __init__(
        self,
        config: TJepaConfig,
        data_args: TJepaDataArguments | None = None,
        seed: int = 0,
        text: TextData | None = None,
    ):
        super().__init__(seed)
        self.config = config
        self.data_args = args = data_args or TJepaDataArguments()
        self.text = None
        if args.corpus == "ambiguity":
            self.ambiguity = AmbiguityCorpus(ambiguity=args.ambiguity, seed=seed)
            self.source = f"synthetic ambiguity corpus ({args.ambiguity} valid completions per masked span)"
            if args.tokenizer:
                from transformers import AutoTokenizer

                self.tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
            else:
                self.tokenizer = self.ambiguity.train_tokenizer(config.backbone_config.vocab_size)
        else:
            self.ambiguity = None
            # A pretrained backbone comes with its own vocabulary: use its tokenizer unless another is given.
            tokenizer, vocab = args.tokenizer or args.backbone, config.backbone_config.vocab_size
            if text is None and args.streaming:
                text = StreamedTextData(
                    args.data,
                    tokenizer,
                    vocab,
                    text_column=args.text_column,
                    validation_sentences=args.diagnostics_sentences,
                )
            self.text = text or TextData(args.data, tokenizer, vocab, text_column=args.text_column)
            self.source, self.tokenizer = self.text.source, self.text.tokenizer
        if args.backbone:
            from transformers import BertConfig

            self.config = config = TJepaConfig(
                **{
                    **_own_fields(config),
                    "backbone_config": BertConfig.from_pretrained(args.backbone),
                    "mask_token_id": self.tokenizer.mask_token_id,
                    "pad_token_id": self.tokenizer.pad_token_id,
                }
            )
        check_tokenizer(config, self.tokenizer)
        common = dict(
            tokenizer=self.tokenizer,
            max_length=args.max_length,
            mask_ratio=(0.15, config.mask_ratio),
            num_spans=(1, config.num_spans),
            min_span=config.min_span_length,
            max_span=config.max_span_length,
            span_unit="token",
        )
        self.collator = SpanMaskingCollator(seed=seed, **common)
        self.second_collator = SpanMaskingCollator(seed=seed + 7919, **common)
        n = args.diagnostics_sentences
        self.set_fixed_batches(
            self._batch_for(self._texts_at(0, n, split="train"), step=0, rank=1_000),
            self._batch_for(self._texts_at(0, n, split="validation"), step=0, rank=1_001),
        )
        logger.info("T-JEPA recipe (%s objective) on %s", config.objective, self.source)

    # ------------------------------------------------------------------ batches

    def _texts_at(self, start: int, count: int, split: str):
        if self.ambiguity is not None:
            sample = self.ambiguity.sample(
                count, seed=self.seed if split == "train" else VALIDATION_SEED_OFFSET + self.seed, start=start
            )
            return sample
        texts = self.text.train_texts if split == "train" else self.text.validation_texts
        return texts[:count] if split != "train" or start == 0 else texts

    def _batch_for(self, texts, step: int, rank: int) -> dict[str, torch.Tensor]:
        if self.ambiguity is not None:
            sample = texts
            spans = [[(s, e)] for s, e in zip(sample.span_char_start, sample.span_char_end)]
            batch = self.collator.mask_char_spans(sample.texts, spans)
        else:
            batch = self.collator(texts, step=step, rank=rank)
        out = {k: batch[k] for k in ("input_ids", "attention_mask", "target_mask", "span_ids")}
        if self.config.objective in ("vicreg", "barlow_twins", "byol"):
            second = self.second_collator(texts if self.ambiguity is None else texts.texts, step=step, rank=rank)
            out["second_target_mask"] = second["target_mask"]
        return out

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        if self.ambiguity is not None:
            sample = self.ambiguity.sample(batch_size, seed=self.seed, start=training_start(step, rank, batch_size))
            return self._batch_for(sample, step, rank)
        index = torch.randint(
            len(self.text.train_texts), (batch_size,), generator=seeded_generator(self.seed, step, rank)
        )
        return self._batch_for([self.text.train_texts[i] for i in index.tolist()], step, rank)

    def train_stream(self, rank: int, world_size: int, batch_size: int, start: int):
        stream = getattr(self.text, "stream", None)
        if stream is None:
            return None
        batches = StreamedBatches(stream, self._streamed_batch, batch_size, rank, world_size, start)
        return stream_batches(batches, self.data_args.num_workers)

    def _streamed_batch(self, raw: dict, index: int, rank: int) -> dict[str, torch.Tensor]:
        """Tokenise and mask one streamed batch (in a DataLoader worker), as `train_batch` masks batch `index`."""
        return self._batch_for(list(raw["text"]), index, rank)

    # ------------------------------------------------------------------ Recipe protocol

    def build_model(self) -> TJepaModel:
        if self.data_args.backbone:
            return TJepaModel.from_backbone(self.data_args.backbone, **_own_fields(self.config))
        return TJepaModel(self.config)

    def batch_diagnostics(self, model: TJepaModel, batch, split: str) -> dict[str, float]:
        output = model(**batch)
        embeddings = model.embed(batch["input_ids"], batch["attention_mask"])
        metrics = (
            self.diagnostics.compute(output.predictions.float(), output.targets.float(), embeddings.float())
            if output.predictions is not None
            else self.diagnostics.compute(embeddings.float(), embeddings.float())
        )
        metrics["loss"] = float(output.loss.detach())
        if self.ambiguity is not None and split == "val":
            metrics["irreducible_variance"] = self.irreducible_variance(model)
        return metrics

    @torch.no_grad()
    def irreducible_variance(self, model: TJepaModel, num_sentences: int = 16, num_candidates: int = 16) -> float:
        """Mean over ambiguous spans of the spread of the K target representations of the span's valid completions
        (`irreducible_conditional_variance` on `(num_sentences, K, hidden)`; the span representation is the mean of
        the normalised target states over its tokens)."""
        seed = VALIDATION_SEED_OFFSET + self.seed
        representations = []
        for index in range(num_sentences):
            texts = self.ambiguity.candidates(index, seed=seed, num_candidates=num_candidates)
            slot = self.ambiguity.sample(1, seed=seed, start=index)
            word = slot.span_word_index[0]
            spans = []
            for text in texts:
                words = text.split(" ")
                start = len(" ".join(words[:word])) + (1 if word else 0)
                spans.append([(start, start + len(words[word]))])
            batch = {key: value.to(model.device) for key, value in self.collator.mask_char_spans(texts, spans).items()}
            targets = model.target_representations(batch["input_ids"], batch["attention_mask"])
            mask = batch["target_mask"].float()[..., None]
            representations.append((targets * mask).sum(1) / mask.sum(1))
        return irreducible_conditional_variance(torch.stack(representations).float())

    def downstream(self, model: TJepaModel) -> dict[str, float]:
        """Offline downstream evaluation on the embedded corpus: a topic-classification linear probe and next-sentence
        retrieval, both on frozen pooled target-encoder embeddings."""
        max_length = self.data_args.max_length
        task = topic_classification_task(self.text.corpus)
        train_x = embed_texts(model, self.tokenizer, task.train_texts, max_length)
        test_x = embed_texts(model, self.tokenizer, task.test_texts, max_length)
        counts = torch.bincount(torch.tensor(task.test_labels))
        metrics = {
            "probe_accuracy": linear_probe_accuracy(train_x, task.train_labels, test_x, task.test_labels),
            "probe_majority_baseline": float(counts.max() / counts.sum()),
        }
        retrieval = retrieval_task(self.text.corpus, num_queries=500, seed=0)
        metrics.update(
            retrieval_recall(
                embed_texts(model, self.tokenizer, retrieval.queries, max_length),
                embed_texts(model, self.tokenizer, retrieval.documents, max_length),
                retrieval.positives,
            )
        )
        metrics["retrieval_documents"] = len(retrieval.documents)
        return metrics

    def evaluate(self, model: TJepaModel, output_dir: str | None = None) -> dict[str, Any]:
        metrics: dict[str, Any] = {"objective": model.config.objective, "data_source": self.source}
        metrics.update(self.final_diagnostics(model))
        if self.ambiguity is not None:
            metrics["ambiguity"] = self.ambiguity.ambiguity
            metrics["ambiguity_nats"] = self.ambiguity.ambiguity_nats
        elif self.data_args.downstream and "label" in self.text.corpus["train"].column_names:
            metrics.update(self.downstream(model))
        if self.data_args.online_downstream:
            metrics.update(online_downstream(model, self.tokenizer, self.data_args.max_length, seed=self.seed))
        if output_dir and self.data_args.plot and len(self.records) >= 2:
            path = Path(output_dir) / "failure_signature.png"
            plot_failure_signature({f"T-JEPA ({model.config.objective})": self.records}, path)
            metrics["diagnostics_plot"] = path.name
        return metrics

    def save_artifacts(self, model, output_dir: str, metrics: dict, args) -> None:
        # The tokenizer truncates (`truncation=True`) to what the model's position table holds, not to a default 512.
        self.tokenizer.model_max_length = model.config.backbone_config.max_position_embeddings
        self.tokenizer.save_pretrained(output_dir)
        self.write_records(output_dir)
        write_settings_and_card(
            output_dir, self.data_args, render_card, model.config, metrics, args, base_model=self.data_args.backbone
        )


# The defaults of `hf-jepa train t-jepa` and of the reproduction's text runs.
TRAINING_DEFAULTS = dict(
    max_steps=400,
    per_device_batch_size=32,
    learning_rate=5e-4,
    weight_decay=0.05,
    warmup_steps=40,
    mixed_precision="bf16",
    logging_steps=40,
    max_grad_norm=1.0,
)


FAMILIES = (
    Family(
        name="t-jepa",
        config_class=TJepaConfig,
        data_args_class=TJepaDataArguments,
        recipe_class=TJepaRecipe,
        training_defaults=TRAINING_DEFAULTS,
        result_rows=result_rows,
        training_only_settings=("backbone",),  # the pretrained BERT a run started from; eval loads the folder
    ),
)
