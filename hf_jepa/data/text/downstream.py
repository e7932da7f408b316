"""Downstream tasks built offline from the embedded corpus, to probe a frozen encoder: `topic_classification_task`
(coarse topic class of a sentence) and `retrieval_task` (next-sentence retrieval)."""

from dataclasses import dataclass, field

import numpy as np
from datasets import ClassLabel, DatasetDict

from .corpus import load_text_corpus
from .sentences import embedded_sentences


@dataclass
class TopicClassificationTask:
    """Sentence -> coarse pydoc topic class (`TOPIC_GROUPS`); `labels` index `label_names`."""

    train_texts: list[str]
    train_labels: list[int]
    test_texts: list[str]
    test_labels: list[int]
    label_names: list[str]

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


def topic_classification_task(
    corpus: DatasetDict | None = None, train_split: str = "train", test_split: str = "test"
) -> TopicClassificationTask:
    """Coarse topic classification on the embedded corpus (default: `load_text_corpus("embedded")`).

    Built offline from the CPython docs: the label of a sentence is the `TOPIC_GROUPS` class of its pydoc topic. A
    probe trained on `train_split` and scored on `test_split` measures how much topical information the frozen encoder
    keeps. Chance is the majority class share (the classes are unbalanced: report it next to the accuracy).
    """
    corpus = load_text_corpus("embedded") if corpus is None else corpus
    for split in (train_split, test_split):
        if split not in corpus:
            raise ValueError(f"split {split!r} not in the corpus (splits: {list(corpus)})")
        if "label" not in corpus[split].column_names:
            raise ValueError(f"corpus split {split!r} has no 'label' column: use the embedded corpus")
    label_feature = corpus[train_split].features["label"]
    names = (
        list(label_feature.names)
        if isinstance(label_feature, ClassLabel)
        else sorted({str(v) for v in corpus[train_split]["label"]})
    )
    return TopicClassificationTask(
        train_texts=list(corpus[train_split]["text"]),
        train_labels=[int(v) for v in corpus[train_split]["label"]],
        test_texts=list(corpus[test_split]["text"]),
        test_labels=[int(v) for v in corpus[test_split]["label"]],
        label_names=names,
    )


@dataclass
class RetrievalTask:
    """Queries, a document pool, and for each query the indices of its relevant documents (exactly one here)."""

    queries: list[str]
    documents: list[str]
    positives: list[list[int]]
    query_topics: list[str] = field(default_factory=list)

    def relevance(self):
        """Dense `(num_queries, num_documents)` bool relevance matrix."""
        import torch

        matrix = torch.zeros(len(self.queries), len(self.documents), dtype=torch.bool)
        for query, positives in enumerate(self.positives):
            matrix[query, positives] = True
        return matrix


def retrieval_task(corpus=None, num_queries: int | None = 500, seed: int = 0) -> RetrievalTask:
    """Next-sentence retrieval built offline from the embedded corpus (paraphrase-free).

    A query is a sentence; its one relevant document is the NEXT sentence of the same pydoc topic (the row with the
    same `topic` and `position + 1`). Queries are drawn (seeded) among sentences that have a successor, such that no
    query is another query's positive; the document pool is every other sentence of `corpus` (positives and
    distractors alike), so no query text is in the pool and every query has exactly one positive (sentence texts are
    unique in the embedded corpus). The encoder is frozen: this probes whether embeddings keep the discourse
    continuity that a next sentence shares with its predecessor.

    Args:
        corpus: rows with `text`, `topic`, `position`: a list of dicts, a `Dataset`, or a `DatasetDict` (all splits
            are pooled, so consecutive sentences are found whatever the split). Default: `embedded_sentences()`.
        num_queries: how many queries (None: as many as the rule allows).
        seed: seed of the query draw.
    """
    if corpus is None:
        rows = embedded_sentences()
    elif isinstance(corpus, DatasetDict):
        rows = [row for name in corpus for row in corpus[name]]
    else:
        rows = list(corpus)
    missing = {"text", "topic", "position"} - set(rows[0] if rows else {})
    if not rows or missing:
        raise ValueError(
            f"corpus rows need 'text', 'topic' and 'position' (missing {sorted(missing)}): use the embedded corpus"
        )
    texts = [row["text"] for row in rows]
    if len(set(texts)) != len(texts):
        raise ValueError("corpus texts must be unique for unambiguous relevance")
    where = {(row["topic"], int(row["position"])): index for index, row in enumerate(rows)}
    successor = {index: where.get((row["topic"], int(row["position"]) + 1)) for index, row in enumerate(rows)}
    candidates = [index for index in sorted(successor) if successor[index] is not None]
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    chosen_set: set[int] = set()
    positive_set: set[int] = set()
    for index in rng.permutation(candidates):
        index = int(index)
        if successor[index] in chosen_set or index in positive_set:
            continue  # a query must never be (or have as positive) another query
        chosen.append(index)
        chosen_set.add(index)
        positive_set.add(successor[index])
        if num_queries is not None and len(chosen) == num_queries:
            break
    if num_queries is not None and len(chosen) < num_queries:
        raise ValueError(f"num_queries={num_queries} but the corpus allows only {len(chosen)} queries")
    documents = [index for index in range(len(rows)) if index not in chosen_set]
    document_position = {index: position for position, index in enumerate(documents)}
    return RetrievalTask(
        queries=[texts[index] for index in chosen],
        documents=[texts[index] for index in documents],
        positives=[[document_position[successor[index]]] for index in chosen],
        query_topics=[rows[index]["topic"] for index in chosen],
    )
