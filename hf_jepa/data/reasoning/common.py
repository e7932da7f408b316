"""What every reasoning task shares: the fixed special tokens, `ReasoningExample`, the word-level tokenizer
(`build_reasoning_tokenizer`, `check_known_tokens`), the `ReasoningTask` interface and the seed / count checks."""

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN, SEP_TOKEN = "[PAD]", "[UNK]", "[BOS]", "[EOS]", "[SEP]"
# Fixed ids 0-4, whatever the task vocabulary: models and configs can hard-code them.
REASONING_SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN, SEP_TOKEN)
IGNORE_INDEX = -100  # `labels` value of positions a causal LM loss skips (transformers' convention)


def _check_seed(seed, name: str = "seed") -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_count(num_examples) -> int:
    if isinstance(num_examples, bool) or not isinstance(num_examples, (int, np.integer)) or num_examples < 1:
        raise ValueError(f"num_examples must be an integer >= 1, got {num_examples!r}")
    return int(num_examples)


def _example_rng(seed: int, index: int, salt: int) -> np.random.Generator:
    # One stream per (seed, example, task): example i does not depend on how many examples are drawn.
    return np.random.default_rng([seed, index, salt])


@dataclass(frozen=True)
class ReasoningExample:
    """One example: `prompt` and `answer` are whitespace-separated tokens (the answer is never empty)."""

    prompt: str
    answer: str

    def __post_init__(self):
        if not isinstance(self.prompt, str) or not isinstance(self.answer, str):
            raise ValueError(f"prompt and answer must be strings, got {type(self.prompt)} and {type(self.answer)}")
        if not self.answer.split():
            raise ValueError("answer must hold at least one token")


# ---------------------------------------------------------------------------------------------------------------------
# Tokenizer


def build_reasoning_tokenizer(vocab: Iterable[str], model_max_length: int = 4096):
    """A word-level `transformers.PreTrainedTokenizerFast` over `vocab`, with fixed special-token ids.

    A `tokenizers` WordLevel model behind a WhitespaceSplit pre-tokeniser (no normaliser: tokens are case-sensitive,
    no post-processor: encoding adds no special tokens, the batching code places `[SEP]`/`[EOS]` itself). Ids:
    `[PAD]`=0, `[UNK]`=1, `[BOS]`=2, `[EOS]`=3, `[SEP]`=4, then `vocab` in its order, duplicates dropped (special
    tokens in `vocab` are skipped: they already have their ids). Any other word encodes as `[UNK]`.
    `decode(ids, skip_special_tokens=True)` gives each token after one space (" a b c"), as GPT-2's byte-level
    tokens carry their space: decoding only the generated ids (what `pipeline("text-generation")` appends to the
    prompt) then reads "prompt continuation", not "promptcontinuation". `.strip()` gives the bare text. The tokenizer round-trips through
    `save_pretrained` / `AutoTokenizer.from_pretrained` offline.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if isinstance(vocab, str):
        raise ValueError("vocab must be an iterable of tokens, not a single string")
    tokens = list(REASONING_SPECIAL_TOKENS)
    seen = set(tokens)
    for token in vocab:
        if not isinstance(token, str) or not token or token != token.strip() or len(token.split()) != 1:
            raise ValueError(f"vocab tokens must be non-empty strings without whitespace, got {token!r}")
        if token not in seen:
            seen.add(token)
            tokens.append(token)
    if len(tokens) == len(REASONING_SPECIAL_TOKENS):
        raise ValueError("vocab must hold at least one token besides the special tokens")
    backend = Tokenizer(models.WordLevel({token: index for index, token in enumerate(tokens)}, unk_token=UNK_TOKEN))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.Replace(Regex("^"), " ")  # a space before every token (see above)
    backend.add_special_tokens(list(REASONING_SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        sep_token=SEP_TOKEN,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # keep "a , b" as is: the spaces are the token boundaries
    )


def check_known_tokens(tokenizer, text: str) -> list[int]:
    """The ids of the whitespace tokens of `text`; ValueError naming every token the vocabulary lacks.

    A word-level tokenizer silently maps an unknown word to `[UNK]`, which would make a typo or a token from another
    task look like a (wrong) answer; callers that need a closed vocabulary check here instead.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    vocab = tokenizer.get_vocab()
    unknown = [token for token in dict.fromkeys(text.split()) if token not in vocab]
    if unknown:
        shown = ", ".join(repr(token) for token in unknown[:20]) + (" ..." if len(unknown) > 20 else "")
        raise ValueError(f"{len(unknown)} token(s) not in the tokenizer's vocabulary: {shown}")
    return [vocab[token] for token in text.split()]


# ---------------------------------------------------------------------------------------------------------------------
# Tasks


class ReasoningTask:
    """Shared interface: `name`, `vocab()`, `generate(num_examples, seed)`, `score(example, predicted_answer)`,
    `max_prompt_length` / `max_answer_length` (token bounds over everything the task generates, for fixed shapes)."""

    name = ""
    _salt = 0
    seed = 0

    def vocab(self) -> list[str]:
        raise NotImplementedError

    def _generate_one(self, rng: np.random.Generator) -> ReasoningExample:
        raise NotImplementedError

    def generate(self, num_examples: int, seed: int | None = None) -> list[ReasoningExample]:
        """Examples `0 .. num_examples - 1` of the stream of `seed` (default: the task's `seed`)."""
        num_examples = _check_count(num_examples)
        seed = _check_seed(self.seed if seed is None else seed)
        return [self._generate_one(_example_rng(seed, index, self._salt)) for index in range(num_examples)]

    def build_tokenizer(self, **kwargs):
        """`build_reasoning_tokenizer(self.vocab())`."""
        return build_reasoning_tokenizer(self.vocab(), **kwargs)
