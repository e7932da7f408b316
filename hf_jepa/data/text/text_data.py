"""`TextData`: a text corpus and its tokenizer, loaded once and shared by several training runs."""

import logging

from .corpus import load_text_corpus, text_source_description
from .wordpiece import corpus_tokenizer

logger = logging.getLogger(__name__)


class TextData:
    """A tokenised corpus shared by several runs: the sentences, and a WordPiece tokenizer (trained on the train split
    unless a saved one is given)."""

    def __init__(
        self,
        source: str | None = None,
        tokenizer: str | None = None,
        vocab_size: int = 8000,
        split_seed: int = 0,
        text_column: str = "text",
    ):
        self.corpus = load_text_corpus(source, split_seed=split_seed, text_column=text_column)
        self.source = text_source_description(self.corpus)
        self.train_texts = list(self.corpus["train"]["text"])
        self.validation_texts = list(self.corpus["validation"]["text"])
        self.tokenizer = corpus_tokenizer(tokenizer, self.train_texts, vocab_size)
        logger.info(
            "Text corpus: %s (%d train / %d validation sentences), tokenizer of %d tokens",
            self.source,
            len(self.train_texts),
            len(self.validation_texts),
            len(self.tokenizer),
        )
