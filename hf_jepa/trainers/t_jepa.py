"""T-JEPA and I-JEPA recipes for the shared trainer, the collapse diagnostics over training, downstream probes, and
the reproduction of "The JEPA paradox in language" at CPU scale.

Diagnostics (`hf_jepa.metrics.collapse`) are computed at every log step on a fixed validation batch and a fixed
training batch with the model in eval mode: the MI proxy between predictions and targets (per target token for
T-JEPA, per target patch for I-JEPA), the effective rank, cosine statistics and std of the pooled target-encoder
embeddings, and the validation loss. They land in the trainer's log records (`train/...`, `val/...` keys), in
`diagnostics.jsonl`, and in the failure-signature plot.
"""

import inspect
import json
import logging
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..data import MnistSplits
from ..data.masking import MultiBlockMaskSampler, SpanMaskingCollator
from ..data.text import AmbiguityCorpus, load_text_corpus, retrieval_task, text_source_description, topic_classification_task, train_wordpiece_tokenizer
from ..metrics.collapse import CollapseDiagnostics, DiagnosticsHistory, irreducible_conditional_variance, plot_failure_signature
from ..modeling.i_jepa import IJepaConfig, IJepaModel
from ..modeling.t_jepa import TJepaConfig, TJepaModel


logger = logging.getLogger(__name__)

CORPORA = ("text", "ambiguity")


@dataclass
class TJepaDataArguments:
    """Data settings of the T-JEPA recipe (YAML keys / `--set` names)."""

    data: str | None = None
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
        if self.corpus not in CORPORA:
            raise ValueError(f"corpus must be one of {CORPORA}, got {self.corpus!r}")
        if self.diagnostics_sentences < 8:
            raise ValueError(f"diagnostics_sentences must be >= 8, got {self.diagnostics_sentences}")


def _own_fields(config: TJepaConfig) -> dict[str, Any]:
    """The config's T-JEPA fields (everything but the backbone), as keyword arguments of `TJepaConfig`."""
    fields = set(inspect.signature(TJepaConfig.__init__).parameters) - {"self", "backbone_config", "kwargs"}
    return {k: v for k, v in config.to_dict().items() if k in fields}


def _seeded(seed: int, step: int, rank: int) -> torch.Generator:
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 10_007 + rank)


class TextData:
    """A tokenised corpus shared by several runs: the sentences, and a WordPiece tokenizer (trained on the train split
    unless a saved one is given)."""

    def __init__(self, source: str | None = None, tokenizer: str | None = None, vocab_size: int = 8000,
                 split_seed: int = 0):
        from transformers import AutoTokenizer

        self.corpus = load_text_corpus(source, split_seed=split_seed)
        self.source = text_source_description(self.corpus)
        self.train_texts = list(self.corpus["train"]["text"])
        self.validation_texts = list(self.corpus["validation"]["text"])
        if tokenizer:
            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        else:
            self.tokenizer = train_wordpiece_tokenizer(self.train_texts, vocab_size=vocab_size)
        logger.info("Text corpus: %s (%d train / %d validation sentences), tokenizer of %d tokens", self.source,
                    len(self.train_texts), len(self.validation_texts), len(self.tokenizer))


def check_tokenizer(config: TJepaConfig, tokenizer) -> None:
    """The tokenizer must fit the model: every id below the backbone's vocabulary, and the same [MASK] and [PAD]."""
    vocab = config.backbone_config.vocab_size
    if len(tokenizer) > vocab:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary has {vocab}: they do "
                         "not match (set the backbone's vocab_size or use the model's own tokenizer)")
    if tokenizer.mask_token_id != config.mask_token_id or tokenizer.pad_token_id != config.pad_token_id:
        raise ValueError(f"tokenizer [MASK]/[PAD] ids ({tokenizer.mask_token_id}, {tokenizer.pad_token_id}) differ "
                         f"from the config's mask_token_id/pad_token_id ({config.mask_token_id}, {config.pad_token_id})")


@torch.no_grad()
def embed_texts(model: TJepaModel, tokenizer, texts: list[str], max_length: int, batch_size: int = 128) -> torch.Tensor:
    """Pooled target-encoder embeddings `(N, hidden)` of texts (eval mode, truncated to `max_length`)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    chunks = []
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start : start + batch_size], max_length=max_length, truncation=True,
                              padding=True, return_tensors="pt")
            chunks.append(model.embed(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(chunks)


def linear_probe_accuracy(train_x, train_y, test_x, test_y) -> float:
    """Accuracy of a logistic-regression probe on standardised frozen embeddings."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(train_x.numpy())
    probe = LogisticRegression(max_iter=2000).fit(scaler.transform(train_x.numpy()), list(train_y))
    return float(probe.score(scaler.transform(test_x.numpy()), list(test_y)))


def retrieval_recall(query_embeddings, document_embeddings, positives: list[list[int]], ks=(1, 10)) -> dict[str, float]:
    """Recall@k of cosine-similarity retrieval: the fraction of queries with a relevant document in the top k."""
    similarity = torch.nn.functional.normalize(query_embeddings, dim=-1) @ torch.nn.functional.normalize(
        document_embeddings, dim=-1).T
    ranked = similarity.topk(max(ks), dim=1).indices
    out = {}
    for k in ks:
        hits = [bool(set(ranked[i, :k].tolist()) & set(p)) for i, p in enumerate(positives)]
        out[f"retrieval_recall_at_{k}"] = sum(hits) / len(hits)
    return out


def online_downstream(model: TJepaModel, tokenizer, max_length: int, num_examples: int = 2000,
                      seed: int = 0) -> dict[str, float]:
    """The paper's downstream sets, read from the Hub through `datasets` (online only; offline it raises with a
    pointer to the embedded tasks): linear probes on frozen pooled embeddings for IMDB sentiment and SNLI
    (premise and hypothesis as one `[SEP]`-joined pair), and MS MARCO passage ranking (MRR@10 of each query's own
    candidate passages by cosine similarity). At most `num_examples` shuffled rows per split. FEVER (`load_fever`)
    loads too; its 5M-passage corpus is left out of this CPU-sized evaluation."""
    from ..data.text import load_imdb, load_ms_marco, load_snli

    metrics = {}
    imdb = load_imdb()
    train, test = (imdb[split].shuffle(seed=seed).select(range(min(num_examples, imdb[split].num_rows)))
                   for split in ("train", "test"))
    metrics["imdb_probe_accuracy"] = linear_probe_accuracy(
        embed_texts(model, tokenizer, list(train["text"]), max_length), train["label"],
        embed_texts(model, tokenizer, list(test["text"]), max_length), test["label"])
    snli = load_snli()
    pairs = {}
    for split in ("train", "test"):
        rows = snli[split].filter(lambda row: row["label"] >= 0).shuffle(seed=seed)
        rows = rows.select(range(min(num_examples, rows.num_rows)))
        texts = [f"{p} {tokenizer.sep_token} {h}" for p, h in zip(rows["premise"], rows["hypothesis"])]
        pairs[split] = (embed_texts(model, tokenizer, texts, max_length), rows["label"])
    metrics["snli_probe_accuracy"] = linear_probe_accuracy(*pairs["train"], *pairs["test"])
    marco = load_ms_marco(split="validation").shuffle(seed=seed).select(range(min(num_examples // 4, 500)))
    reciprocal_ranks = []
    for row in marco:
        passages, selected = row["passages"]["passage_text"], row["passages"]["is_selected"]
        if not any(selected):
            continue
        query = embed_texts(model, tokenizer, [row["query"]], max_length)
        scores = (torch.nn.functional.normalize(query, dim=-1)
                  @ torch.nn.functional.normalize(embed_texts(model, tokenizer, passages, max_length), dim=-1).T)[0]
        ranks = [int((scores > scores[i]).sum()) + 1 for i, chosen in enumerate(selected) if chosen]
        reciprocal_ranks.append(1.0 / min(ranks) if min(ranks) <= 10 else 0.0)
    metrics["ms_marco_mrr_at_10"] = sum(reciprocal_ranks) / max(len(reciprocal_ranks), 1)
    return metrics


class _DiagnosticsMixin:
    """Diagnostics at log steps on fixed train/validation batches, kept in `self.history`."""

    def _init_diagnostics(self, seed: int):
        self.diagnostics = CollapseDiagnostics(max_pairs=20_000, seed=seed)
        self.history = DiagnosticsHistory()
        self.records: list[dict] = []

    def _batch_diagnostics(self, model, batch) -> dict[str, float]:
        raise NotImplementedError

    @torch.no_grad()
    def on_log(self, model, step: int, record: dict) -> dict[str, float]:
        was_training = model.training
        model.eval()
        try:
            values = {}
            for split, batch in (("train", self._fixed_train), ("val", self._fixed_val)):
                metrics = self._batch_diagnostics(model, batch)
                prefixed = {f"{split}/{k}": v for k, v in metrics.items()}
                self.diagnostics.watchdog.check(prefixed, step=step, dim=self._embedding_dim(model))
                values.update(prefixed)
        finally:
            model.train(was_training)
        values["train/loss_running"] = record.get("loss", float("nan"))
        full = {"step": step, "loss": record.get("loss"), **values}
        self.history.add_record(full)
        self.records.append(full)
        return values

    def failure_signature(self) -> dict[str, Any]:
        return self.history.failure_signature() if len(self.records) >= 2 else {}


class TJepaRecipe(_DiagnosticsMixin):
    name = "t-jepa"

    def __init__(self, config: TJepaConfig, data_args: TJepaDataArguments | None = None, seed: int = 0,
                 text: TextData | None = None):
        self.config = config
        self.data_args = args = data_args or TJepaDataArguments()
        self.seed = seed
        self.text = None
        if args.corpus == "ambiguity":
            self.ambiguity = AmbiguityCorpus(ambiguity=args.ambiguity, seed=seed)
            self.source = f"synthetic ambiguity corpus ({args.ambiguity} valid completions per masked span)"
            if args.tokenizer:
                from transformers import AutoTokenizer

                self.tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
            else:
                texts = self.ambiguity.sample(4096, seed=10_000).texts
                self.tokenizer = train_wordpiece_tokenizer(texts, vocab_size=config.backbone_config.vocab_size)
        else:
            self.ambiguity = None
            # A pretrained backbone comes with its own vocabulary: use its tokenizer unless another is given.
            self.text = text or TextData(args.data, args.tokenizer or args.backbone, config.backbone_config.vocab_size)
            self.source, self.tokenizer = self.text.source, self.text.tokenizer
        if args.backbone:
            from transformers import BertConfig

            self.config = config = TJepaConfig(**{
                **_own_fields(config), "backbone_config": BertConfig.from_pretrained(args.backbone),
                "mask_token_id": self.tokenizer.mask_token_id, "pad_token_id": self.tokenizer.pad_token_id})
        check_tokenizer(config, self.tokenizer)
        common = dict(tokenizer=self.tokenizer, max_length=args.max_length, mask_ratio=(0.15, config.mask_ratio),
                      num_spans=(1, config.num_spans), min_span=config.min_span_length,
                      max_span=config.max_span_length, span_unit="token")
        self.collator = SpanMaskingCollator(seed=seed, **common)
        self.second_collator = SpanMaskingCollator(seed=seed + 7919, **common)
        self._init_diagnostics(seed)
        n = args.diagnostics_sentences
        self._fixed_train = self._batch_for(self._texts_at(0, n, split="train"), step=0, rank=1_000)
        self._fixed_val = self._batch_for(self._texts_at(0, n, split="validation"), step=0, rank=1_001)
        logger.info("T-JEPA recipe (%s objective) on %s", config.objective, self.source)

    # ------------------------------------------------------------------ batches

    def _texts_at(self, start: int, count: int, split: str):
        if self.ambiguity is not None:
            sample = self.ambiguity.sample(count, seed=self.seed if split == "train" else 10_000 + self.seed,
                                           start=start)
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
            sample = self.ambiguity.sample(batch_size, seed=self.seed, start=(step * 64 + rank) * batch_size)
            return self._batch_for(sample, step, rank)
        index = torch.randint(len(self.text.train_texts), (batch_size,), generator=_seeded(self.seed, step, rank))
        return self._batch_for([self.text.train_texts[i] for i in index.tolist()], step, rank)

    # ------------------------------------------------------------------ Recipe protocol

    def build_model(self) -> TJepaModel:
        if self.data_args.backbone:
            return TJepaModel.from_backbone(self.data_args.backbone, **_own_fields(self.config))
        return TJepaModel(self.config)

    def ema_pairs(self, model: TJepaModel):
        return model.ema_pairs()

    def ema_schedule(self, model: TJepaModel) -> tuple[float, float]:
        return model.config.ema_momentum, model.config.ema_momentum_end

    def finalize(self, model) -> None:
        pass

    def _embedding_dim(self, model) -> int:
        return model.config.hidden_size

    def _batch_diagnostics(self, model: TJepaModel, batch) -> dict[str, float]:
        output = model(**batch)
        embeddings = model.embed(batch["input_ids"], batch["attention_mask"])
        metrics = self.diagnostics.compute(output.predictions.float(), output.targets.float(), embeddings.float()) \
            if output.predictions is not None else self.diagnostics.compute(embeddings.float(), embeddings.float())
        metrics["loss"] = float(output.loss)
        if self.ambiguity is not None and batch is self._fixed_val:
            metrics["irreducible_variance"] = self.irreducible_variance(model)
        return metrics

    @torch.no_grad()
    def irreducible_variance(self, model: TJepaModel, num_sentences: int = 16, num_candidates: int = 16) -> float:
        """Mean over ambiguous spans of the spread of the K target representations of the span's valid completions
        (`irreducible_conditional_variance` on `(num_sentences, K, hidden)`; the span representation is the mean of
        the normalised target states over its tokens)."""
        seed = 10_000 + self.seed
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
            batch = self.collator.mask_char_spans(texts, spans)
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
        metrics = {"probe_accuracy": linear_probe_accuracy(train_x, task.train_labels, test_x, task.test_labels),
                   "probe_majority_baseline": float(counts.max() / counts.sum())}
        retrieval = retrieval_task(self.text.corpus, num_queries=500, seed=0)
        metrics.update(retrieval_recall(embed_texts(model, self.tokenizer, retrieval.queries, max_length),
                                        embed_texts(model, self.tokenizer, retrieval.documents, max_length),
                                        retrieval.positives))
        metrics["retrieval_documents"] = len(retrieval.documents)
        return metrics

    def evaluate(self, model: TJepaModel, output_dir: str | None = None) -> dict[str, Any]:
        metrics: dict[str, Any] = {"objective": model.config.objective, "data_source": self.source}
        was_training = model.training
        model.eval()
        with torch.no_grad():
            final = self._batch_diagnostics(model, self._fixed_val)
        model.train(was_training)
        metrics.update({("val_loss" if k == "loss" else k): v for k, v in final.items()})
        signature = self.failure_signature()
        for key in ("mi_saturation_step", "divergence_step", "rank_collapse_step", "order_matches_paper", "mi_max"):
            if key in signature:
                metrics[key] = signature[key]
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
        from ..hub import render_t_jepa_card

        self.tokenizer.save_pretrained(output_dir)
        _write_records(output_dir, self.records)
        card = render_t_jepa_card(model.config, metrics, training_args=args, data_args=self.data_args)
        card.save(str(Path(output_dir) / "README.md"))


def _write_records(output_dir: str, records: list[dict]) -> None:
    with open(Path(output_dir) / "diagnostics.jsonl", "w") as handle:
        for record in records:
            handle.write(json.dumps(record, default=float) + "\n")


# ------------------------------------------------------------------------------------------------------------ I-JEPA


@dataclass
class IJepaDataArguments:
    """Data settings of the I-JEPA recipe (YAML keys / `--set` names)."""

    data: str | None = None
    diagnostics_images: int = 256
    probe_images: int = 5000
    plot: bool = True


class IJepaRecipe(_DiagnosticsMixin):
    """I-JEPA on MNIST digits: multi-block masks on the patch grid, the same diagnostics as T-JEPA (MI proxy per
    target patch, rank/cosine of pooled target-encoder embeddings), and a linear probe on digit classes."""

    name = "i-jepa"

    def __init__(self, config: IJepaConfig, data_args: IJepaDataArguments | None = None, seed: int = 0,
                 splits: MnistSplits | None = None):
        self.config = config
        self.data_args = args = data_args or IJepaDataArguments()
        self.seed = seed
        self.splits = splits or MnistSplits(args.data)
        self.sampler = MultiBlockMaskSampler(
            input_size=config.grid_size, num_targets=config.num_target_blocks, target_scale=tuple(config.target_scale),
            target_aspect=tuple(config.target_aspect_ratio), context_scale=tuple(config.context_scale),
            min_keep=config.min_keep, seed=seed,
        )
        self._init_diagnostics(seed)
        n = args.diagnostics_images
        self._fixed_train = self._batch_for(self.splits.train_images[:n], step=0, rank=1_000)
        self._fixed_val = self._batch_for(self.splits.test_images[:n], step=0, rank=1_001)

    def _pixels(self, images):
        """uint8 `(N, H, W)` -> `(N, C, H, W)` floats standardised with the config's per-channel statistics."""
        mean = torch.tensor(self.config.pixel_mean, dtype=torch.float32).view(1, -1, 1, 1)
        std = torch.tensor(self.config.pixel_std, dtype=torch.float32).view(1, -1, 1, 1)
        return (images.float().unsqueeze(1) / 255.0 - mean) / std

    def _batch_for(self, images, step, rank):
        masks = self.sampler.sample(images.shape[0], step=step, rank=rank)
        return {"pixel_values": self._pixels(images), "context_indices": masks["context_indices"],
                "target_indices": masks["target_indices"]}

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        index = torch.randint(len(self.splits.train_labels), (batch_size,), generator=_seeded(self.seed, step, rank))
        return self._batch_for(self.splits.train_images[index], step, rank)

    def build_model(self) -> IJepaModel:
        return IJepaModel(self.config)

    def ema_pairs(self, model):
        return model.ema_pairs()

    def ema_schedule(self, model) -> tuple[float, float]:
        return model.config.ema_momentum, model.config.ema_momentum_end

    def finalize(self, model) -> None:
        pass

    def _embedding_dim(self, model) -> int:
        return model.config.hidden_size

    def _batch_diagnostics(self, model: IJepaModel, batch) -> dict[str, float]:
        output = model(**batch)
        embeddings = model.embed(batch["pixel_values"])
        predictions = output.predictions.flatten(0, 2).float()
        metrics = self.diagnostics.compute(predictions, output.targets.flatten(0, 2).float(), embeddings.float())
        metrics["loss"] = float(output.loss)
        return metrics

    def evaluate(self, model: IJepaModel, output_dir: str | None = None) -> dict[str, Any]:
        metrics: dict[str, Any] = {"objective": "i-jepa", "data_source": self.splits.source}
        was_training = model.training
        model.eval()
        with torch.no_grad():
            final = self._batch_diagnostics(model, self._fixed_val)
            count = self.data_args.probe_images
            embed = lambda images: torch.cat([model.embed(self._pixels(images[i:i + 512])).float()  # noqa: E731
                                              for i in range(0, len(images), 512)])
            train_x, test_x = embed(self.splits.train_images[:count]), embed(self.splits.test_images[:count])
        model.train(was_training)
        metrics.update({("val_loss" if k == "loss" else k): v for k, v in final.items()})
        metrics["probe_accuracy"] = linear_probe_accuracy(train_x, self.splits.train_labels[:count].tolist(), test_x,
                                                          self.splits.test_labels[:count].tolist())
        signature = self.failure_signature()
        for key in ("mi_saturation_step", "divergence_step", "rank_collapse_step", "order_matches_paper", "mi_max"):
            if key in signature:
                metrics[key] = signature[key]
        if output_dir and self.data_args.plot and len(self.records) >= 2:
            path = Path(output_dir) / "failure_signature.png"
            plot_failure_signature({"I-JEPA (MNIST)": self.records}, path)
            metrics["diagnostics_plot"] = path.name
        return metrics

    def save_artifacts(self, model, output_dir: str, metrics: dict, args) -> None:
        from ..hub import render_i_jepa_card

        _write_records(output_dir, self.records)
        card = render_i_jepa_card(model.config, metrics, training_args=args, data_args=self.data_args)
        card.save(str(Path(output_dir) / "README.md"))


# ------------------------------------------------------------------------------------------------------ reproduction

TRAINING_DEFAULTS = dict(max_steps=400, per_device_batch_size=32, learning_rate=5e-4, weight_decay=0.05,
                         warmup_steps=40, mixed_precision="bf16", logging_steps=40, max_grad_norm=1.0)
I_JEPA_TRAINING_DEFAULTS = dict(TRAINING_DEFAULTS, per_device_batch_size=64, learning_rate=1e-3)
BASELINE_OBJECTIVES = ("mlm", "vicreg", "barlow_twins", "byol")
PAPER = {"mi_ceiling_nats": 0.35, "divergence_step": 9340, "collapsed_val_rank": 1.57}


def _mean_std(values):
    values = [v for v in values if isinstance(v, (int, float)) and v is not None and math.isfinite(v)]
    if not values:
        return None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _fmt(pair, digits=3, percent=False):
    if pair is None:
        return "n/a"
    mean, std = pair
    scale = 100 if percent else 1
    suffix = "%" if percent else ""
    return f"{scale * mean:.{digits}f}{suffix} +- {scale * std:.{digits}f}{suffix}"


def reproduce_t_jepa(
    data: str | None = None,
    output_dir: str | None = None,
    quick: bool = False,
    seeds: tuple[int, ...] = (0,),
    steps: int | None = None,
    ambiguities: tuple[int, ...] = (1, 4, 16),
    objectives: tuple[str, ...] = BASELINE_OBJECTIVES,
    mnist: str | None = None,
) -> dict[str, Any]:
    """The paper's three experiments at CPU scale, for each data seed in `seeds` (the paper uses 5):

    1. T-JEPA (text, embedded corpus) vs I-JEPA (MNIST) diagnostics over training, and their failure signatures;
    2. downstream linear probe (topic classification) and next-sentence retrieval of T-JEPA vs MLM, VICReg,
       Barlow Twins and BYOL (and an untrained encoder), all on the same backbone, data and steps;
    3. the ambiguity sweep: T-JEPA on the synthetic corpus with 1..K valid completions per masked span.

    `data`: the text source (default embedded); `mnist`: the MNIST source of I-JEPA. `quick=True`: tiny models, a
    few steps (a smoke run, not a result). Writes `results.json`, `results.md`, `failure_signature.png`,
    `ambiguity_sweep.png` under `output_dir`.
    """
    from .trainer import JepaTrainer, TrainingArguments

    output_dir = Path(output_dir or "outputs/reproduce-t-jepa")
    max_steps = 6 if quick else (steps or TRAINING_DEFAULTS["max_steps"])
    text_preset = TJepaConfig.tiny if quick else TJepaConfig.cpu_fast
    image_preset = IJepaConfig.tiny if quick else IJepaConfig.cpu_fast
    vocab = text_preset().backbone_config.vocab_size
    text = TextData(data, vocab_size=vocab)
    splits = MnistSplits(mnist)
    rows: dict[str, list[dict]] = {}
    records: dict[str, list[dict]] = {}

    def run(recipe, name, seed, defaults):
        settings = {**defaults, "max_steps": max_steps, "logging_steps": max(1, max_steps // 10)}
        if quick:
            settings.update(per_device_batch_size=8, warmup_steps=0, mixed_precision="no")
        args = TrainingArguments(output_dir=str(output_dir / f"seed{seed}" / name), seed=seed, **settings)
        logger.info("T-JEPA reproduction, seed %d: %s (%d steps)", seed, name, max_steps)
        result = JepaTrainer(recipe, args).train()
        rows.setdefault(name, []).append({**result.metrics, "seed": seed})
        if seed == seeds[0]:
            records[name] = recipe.records
        return result

    for seed in seeds:
        data_args = TJepaDataArguments(data=data, diagnostics_sentences=32 if quick else 128)
        run(TJepaRecipe(text_preset(), data_args, seed=seed, text=text), "t-jepa", seed, TRAINING_DEFAULTS)
        image_args = IJepaDataArguments(data=mnist, diagnostics_images=64 if quick else 256,
                                        probe_images=500 if quick else 5000)
        run(IJepaRecipe(image_preset(), image_args, seed=seed, splits=splits), "i-jepa", seed, I_JEPA_TRAINING_DEFAULTS)
        for objective in objectives:
            run(TJepaRecipe(text_preset(objective=objective), data_args, seed=seed, text=text), objective, seed,
                TRAINING_DEFAULTS)
        untrained = TJepaRecipe(text_preset(), data_args, seed=seed, text=text)
        torch.manual_seed(seed)
        rows.setdefault("untrained encoder", []).append({**untrained.downstream(TJepaModel(text_preset())), "seed": seed})
        for ambiguity in ambiguities:
            args = TJepaDataArguments(corpus="ambiguity", ambiguity=ambiguity, diagnostics_sentences=32 if quick else 128,
                                      downstream=False)
            run(TJepaRecipe(text_preset(), args, seed=seed, text=None), f"ambiguity-{ambiguity}", seed,
                TRAINING_DEFAULTS)

    summary = summarize_t_jepa(rows, seeds=list(seeds), steps=max_steps, quick=quick,
                               text_source=text.source, image_source=splits.source, ambiguities=list(ambiguities),
                               objectives=list(objectives))
    output_dir.mkdir(parents=True, exist_ok=True)
    plot_failure_signature({"T-JEPA (text)": records["t-jepa"], "I-JEPA (MNIST)": records["i-jepa"]},
                           output_dir / "failure_signature.png", title="T-JEPA vs I-JEPA diagnostics over training")
    plot_failure_signature({f"ambiguity {k}": records[f"ambiguity-{k}"] for k in ambiguities},
                           output_dir / "ambiguity_sweep.png", title="T-JEPA on the synthetic ambiguity corpus")
    (output_dir / "results.json").write_text(json.dumps({"summary": summary, "runs": rows}, indent=2, default=str))
    (output_dir / "results.md").write_text(format_t_jepa_tables(summary) + "\n")
    return summary


def summarize_t_jepa(rows: dict[str, list[dict]], **info) -> dict[str, Any]:
    """Mean +- std over seeds of every numeric metric of every run name."""
    summary: dict[str, Any] = {"runs": {}, **info}
    for name, runs in rows.items():
        keys = {k for r in runs for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        summary["runs"][name] = {k: _mean_std([r.get(k) for r in runs]) for k in sorted(keys) if k != "seed"}
        for key in ("mi_saturation_step", "divergence_step", "rank_collapse_step"):
            summary["runs"][name][f"{key}_per_seed"] = [r.get(key) for r in runs]
    return summary


def format_t_jepa_tables(summary: dict[str, Any]) -> str:
    """Markdown tables: diagnostics (T-JEPA vs I-JEPA), downstream, ambiguity sweep."""
    runs = summary["runs"]
    n = len(summary.get("seeds", [])) or 1

    def get(name, key, **kw):
        return _fmt(runs.get(name, {}).get(key), **kw)

    def steps(name, key):
        values = runs.get(name, {}).get(f"{key}_per_seed") or []
        return ", ".join("none" if v is None else str(v) for v in values) or "n/a"

    lines = [f"Diagnostics at the end of training ({summary.get('steps')} steps, mean +- std over {n} seed(s)); "
             "event steps per seed.", "",
             "| Model | MI proxy (nats) | max MI | val effective rank | val cosine mean | MI saturation | loss divergence | rank collapse |",
             "|---|---:|---:|---:|---:|---|---|---|"]
    for name, label in (("t-jepa", "T-JEPA (text)"), ("i-jepa", "I-JEPA (MNIST)")):
        if name in runs:
            lines.append(f"| {label} | {get(name, 'mi_proxy')} | {get(name, 'mi_max')} | {get(name, 'effective_rank', digits=2)} | "
                         f"{get(name, 'cosine_mean')} | {steps(name, 'mi_saturation_step')} | "
                         f"{steps(name, 'divergence_step')} | {steps(name, 'rank_collapse_step')} |")
    lines += ["", "| Encoder (same backbone, data, steps) | topic probe accuracy | retrieval R@1 | retrieval R@10 | val effective rank |",
              "|---|---:|---:|---:|---:|"]
    for name in ["t-jepa", *summary.get("objectives", []), "untrained encoder"]:
        if name in runs:
            lines.append(f"| {name} | {get(name, 'probe_accuracy', percent=True, digits=1)} | "
                         f"{get(name, 'retrieval_recall_at_1', percent=True, digits=1)} | "
                         f"{get(name, 'retrieval_recall_at_10', percent=True, digits=1)} | {get(name, 'effective_rank', digits=2)} |")
    if "t-jepa" in runs and runs["t-jepa"].get("probe_majority_baseline"):
        lines.append(f"| (majority class) | {get('t-jepa', 'probe_majority_baseline', percent=True, digits=1)} | | | |")
    lines += ["", "| Ambiguity (valid completions) | conditional entropy (nats) | MI proxy | val effective rank | irreducible variance | val loss |",
              "|---:|---:|---:|---:|---:|---:|"]
    for k in summary.get("ambiguities", []):
        name = f"ambiguity-{k}"
        if name in runs:
            lines.append(f"| {k} | {math.log(k):.2f} | {get(name, 'mi_proxy')} | {get(name, 'effective_rank', digits=2)} | "
                         f"{get(name, 'irreducible_variance')} | {get(name, 'val_loss')} |")
    lines += ["", f"Paper (C4 / BERT-Large, ImageNet / ViT-H): T-JEPA MI proxy below {PAPER['mi_ceiling_nats']} nats, "
              f"divergence ~step {PAPER['divergence_step']:,}, validation effective rank ~{PAPER['collapsed_val_rank']}; "
              "I-JEPA MI keeps rising; T-JEPA downstream at chance, MLM/VICReg/Barlow Twins/BYOL useful."]
    return "\n".join(lines)


__all__ = [
    "IJepaDataArguments",
    "IJepaRecipe",
    "TJepaDataArguments",
    "TJepaRecipe",
    "TextData",
    "check_tokenizer",
    "embed_texts",
    "format_t_jepa_tables",
    "linear_probe_accuracy",
    "online_downstream",
    "reproduce_t_jepa",
    "retrieval_recall",
    "summarize_t_jepa",
]
