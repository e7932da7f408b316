"""`StreamedTextData`: a text source read as a stream (`datasets` streaming), for corpora too large to hold in memory.

It has the attributes the T-JEPA recipe reads from `TextData` (`source`, `corpus`, `train_texts`, `validation_texts`,
`tokenizer`) plus `stream`, the training `IterableDataset` with one `text` column. Only the heads are read up front:
the first `tokenizer_sentences` training texts (the WordPiece vocabulary is learnt on them) and `validation_sentences`
texts of the source's validation (or test) split; a source without one gives up its first `validation_sentences`
training texts, which the training stream then skips. `"c4"` streams `allenai/c4` (`en`) documents cut into clean
sentences, as the in-memory C4 source does, but without a limit on their number.
"""

import logging
from itertools import islice

import datasets
from datasets import Dataset, DatasetDict

from ..sources import C4_HUB_ID, is_offline
from ..user_sources import open_source, rename_columns
from .sentences import _clean, is_clean_sentence, split_sentences
from .wordpiece import corpus_tokenizer

logger = logging.getLogger(__name__)


def _c4_sentence_batch(batch: dict, min_words: int = 5, max_words: int = 64) -> dict:
    """Documents -> their clean sentences (a batched `map` that changes the number of rows)."""
    texts = []
    for document in batch["text"]:
        for paragraph in document.split("\n"):
            for sentence in split_sentences(paragraph.strip()):
                sentence = _clean(sentence)
                if sentence and is_clean_sentence(sentence, min_words, max_words):
                    texts.append(sentence)
    return {"text": texts}


def _non_blank(row: dict) -> bool:
    return bool(row["text"] and row["text"].strip())


def open_text_stream(source: str, text_column: str = "text") -> tuple[dict, str]:
    """The splits of `source` as streams with one `text` column, and a description of the source."""
    if source == "c4":
        if is_offline():
            raise RuntimeError(
                f"data='c4' streams {C4_HUB_ID} from the Hub, but HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set"
            )
        stream = datasets.load_dataset(C4_HUB_ID, "en", split="train", streaming=True).select_columns(["text"])
        return {"train": stream.map(_c4_sentence_batch, batched=True)}, f"Hub {C4_HUB_ID} (en, streamed sentences)"
    splits = rename_columns(open_source(source, streaming=True), {"text": text_column}, required=("text",))
    return {name: split.filter(_non_blank) for name, split in splits.items()}, f"{source} (streamed)"


class StreamedTextData:
    """A streamed text source and its tokenizer (see the module docstring)."""

    def __init__(
        self,
        source: str,
        tokenizer: str | None = None,
        vocab_size: int = 8000,
        text_column: str = "text",
        tokenizer_sentences: int = 10_000,
        validation_sentences: int = 1_000,
    ):
        splits, self.source = open_text_stream(source, text_column)
        if "train" not in splits:
            raise ValueError(f"data={source!r}: no 'train' split (splits: {list(splits)})")
        train = splits["train"]
        held_out = next((splits[name] for name in ("validation", "test") if name in splits), None)
        if held_out is None:
            held_out, train = train.take(validation_sentences), train.skip(validation_sentences)
        self.stream = train
        self.validation_texts = [row["text"] for row in islice(iter(held_out), validation_sentences)]
        self.train_texts = [row["text"] for row in islice(iter(train), tokenizer_sentences)]
        if not self.train_texts or not self.validation_texts:
            raise ValueError(f"data={source!r}: the stream holds no training or no validation text")
        self.corpus = DatasetDict(
            train=Dataset.from_dict({"text": self.train_texts}),
            validation=Dataset.from_dict({"text": self.validation_texts}),
        )
        self.tokenizer = corpus_tokenizer(tokenizer, self.train_texts, vocab_size)
        logger.info(
            "Streamed text: %s (tokenizer learnt on the first %d training texts, %d validation texts)",
            self.source,
            len(self.train_texts),
            len(self.validation_texts),
        )
