"""WordPiece tokenizers for T-JEPA: a deterministic re-implementation of the `tokenizers` WordPiece trainer
(`learn_wordpiece_vocab`) and a BERT-style `BertTokenizerFast` built on it (`train_wordpiece_tokenizer`)."""

import heapq
import logging
import os
from collections import Counter, defaultdict

logger = logging.getLogger(__name__)


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def learn_wordpiece_vocab(
    word_counts: dict[str, int], vocab_size: int, min_frequency: int = 2, special_tokens=SPECIAL_TOKENS, prefix="##"
) -> list[str]:
    """The WordPiece vocabulary (in id order) that the `tokenizers` WordPiece trainer learns, with a fixed tie-break.

    The algorithm of `tokenizers.trainers.WordPieceTrainer` (BPE on words spelt `w ##o ##r ##d`, a merge of `a` and
    `##b` giving `ab`): ids are the special tokens, the alphabet (word-initial characters then `##` characters, each
    sorted), then merged tokens in merge order; each step merges the most frequent adjacent pair, stopping at
    `vocab_size` tokens or when the best pair occurs fewer than `min_frequency` times. Ties in pair counts go to the
    lexicographically smallest pair. (The Rust trainer breaks them by ids that depend on hash-map iteration order,
    which changes between processes: on the embedded corpus its vocabulary differs from run to run, hence this
    deterministic re-implementation; it takes ~0.15 s on the embedded corpus and ~4 s for 55k word types.)
    """
    words = sorted(word_counts)
    counts = [word_counts[word] for word in words]
    symbols = [[word[0]] + [prefix + char for char in word[1:]] for word in words]
    alphabet = sorted({symbol for spelling in symbols for symbol in spelling}, key=lambda s: (s.startswith(prefix), s))
    vocab = list(special_tokens) + [symbol for symbol in alphabet if symbol not in special_tokens]
    known = set(vocab)
    pair_counts: dict[tuple[str, str], int] = defaultdict(int)
    pair_words: dict[tuple[str, str], set[int]] = defaultdict(set)
    for index, spelling in enumerate(symbols):
        for pair in zip(spelling, spelling[1:]):
            pair_counts[pair] += counts[index]
            pair_words[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        negative_count, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if -negative_count != count:
            continue  # a stale heap entry: the pair's count changed since it was pushed
        if count < min_frequency:
            break
        left, right = pair
        merged = left + right[len(prefix) :]
        changed = set()
        for index in sorted(pair_words.pop(pair, ())):
            old, new, position = symbols[index], [], 0
            while position < len(old):
                if position + 1 < len(old) and old[position] == left and old[position + 1] == right:
                    new.append(merged)
                    position += 2
                else:
                    new.append(old[position])
                    position += 1
            old_pairs, new_pairs = list(zip(old, old[1:])), list(zip(new, new[1:]))
            for old_pair in old_pairs:
                pair_counts[old_pair] -= counts[index]
                changed.add(old_pair)
            for new_pair in new_pairs:
                pair_counts[new_pair] += counts[index]
                pair_words[new_pair].add(index)
                changed.add(new_pair)
            for gone in set(old_pairs) - set(new_pairs) - {pair}:
                pair_words[gone].discard(index)
            symbols[index] = new
        pair_counts.pop(pair, None)
        for changed_pair in changed - {pair}:
            if pair_counts.get(changed_pair, 0) > 0:
                heapq.heappush(heap, (-pair_counts[changed_pair], changed_pair))
            else:
                pair_counts.pop(changed_pair, None)
        if merged not in known:
            known.add(merged)
            vocab.append(merged)
    return vocab


def train_wordpiece_tokenizer(
    texts,
    vocab_size: int = 8000,
    save_directory: str | os.PathLike | None = None,
    lowercase: bool = True,
    min_frequency: int = 2,
    model_max_length: int = 512,
):
    """Train a BERT-style WordPiece tokenizer on `texts` and wrap it as a `transformers.BertTokenizerFast`.

    A `tokenizers.Tokenizer` with BERT's normaliser (`BertNormalizer`: lowercasing and accent stripping when
    `lowercase`) and pre-tokeniser (`BertPreTokenizer`), a WordPiece model with `##` continuations whose vocabulary is
    learnt by `learn_wordpiece_vocab` (the `WordPieceTrainer` algorithm with a deterministic tie-break, so the same
    texts and settings always give the same vocabulary and ids), the special tokens `[PAD]` `[UNK]` `[CLS]` `[SEP]`
    `[MASK]` (ids 0-4) and BERT's post-processor (`[CLS] A [SEP]`; pairs `[CLS] A [SEP] B [SEP]`, token types 0/1).
    `vocab_size` is an upper bound: merges stop earlier when no pair occurs `min_frequency` times (the embedded
    corpus's train split gives 3,106 tokens). With `save_directory` the tokenizer is saved with `save_pretrained`, so
    `AutoTokenizer.from_pretrained(dir)` loads it offline.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertTokenizerFast

    if isinstance(texts, str):
        raise ValueError("texts must be an iterable of strings, not a single string")
    texts = [text for text in texts if text and text.strip()]
    if not texts:
        raise ValueError("texts must hold at least one non-empty string")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    word_counts = Counter(
        word for text in texts for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
    )
    vocab = learn_wordpiece_vocab(word_counts, vocab_size, min_frequency)
    tokenizer = Tokenizer(
        models.WordPiece(
            {token: index for index, token in enumerate(vocab)}, unk_token="[UNK]", continuing_subword_prefix="##"
        )
    )
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    wrapped = BertTokenizerFast(
        tokenizer_object=tokenizer,
        do_lower_case=lowercase,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
    )
    if save_directory is not None:
        wrapped.save_pretrained(str(save_directory))
        logger.info("Saved a WordPiece tokenizer (%d tokens) to %s", len(wrapped), save_directory)
    return wrapped


def corpus_tokenizer(tokenizer: str | os.PathLike | None, texts, vocab_size: int):
    """The tokenizer a text corpus is encoded with: the saved one at `tokenizer` (a folder or Hub id, loaded with
    `AutoTokenizer`) when given, else a WordPiece tokenizer of at most `vocab_size` tokens trained on `texts`
    (`train_wordpiece_tokenizer`). Returns the tokenizer."""
    if tokenizer:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(tokenizer)
    return train_wordpiece_tokenizer(texts, vocab_size=vocab_size)
