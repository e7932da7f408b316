"""GSM8K few-shot data for the JEPA-Reasoner GSM8K protocol: GSM8K text as word-level tokens (`gsm8k_words`), the
(question, answer) pairs from the Hub, a local copy or the synthetic generator (`load_gsm8k_pairs`), and
`Gsm8kFewShotData`, the tokenizer plus encoded train / k-shot test prompts that the recipes and evaluation systems read
(the same interface as `ReasoningData`).

Tokenizer. hf-jepa's reasoning models use a word-level tokenizer with fixed special-token ids 0-4
(`build_reasoning_tokenizer`); no GPT-2 BPE is used because nothing here may download one and the special ids differ.
GSM8K text is split into words, single digits (numbers digit by digit: "1,000" -> "1 , 0 0 0"), the markers `<<`,
`>>`, `####` and single other characters (punctuation, `$`, `'` inside no word), so every number and the final answer
are spelled with 10 digit tokens and `gsm8k_extract_answer` reads them back. The vocabulary is every token of the
train split (questions, answers, exemplars) and of the prompt frame ("Question :", "Answer :"); a test word never
seen in training encodes as `[UNK]` (counted in `stats`). Newlines become plain spaces.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .arithmetic import ArithmeticWordProblems, gsm8k_extract_answer, gsm8k_few_shot_prompt, load_gsm8k
from .common import ReasoningExample, build_reasoning_tokenizer
from .encoding import encode_reasoning_examples

logger = logging.getLogger(__name__)

_WORD = re.compile(r"####|<<|>>|\d|[A-Za-z]+(?:'[A-Za-z]+)*|\S")
# The tokens of the few-shot frame "Question: ...\nAnswer: ..." after `gsm8k_words`.
PROMPT_FRAME_TOKENS = ("Question", "Answer", ":")
# A model that goes on past its answer writes the next "Question:" block (the usual GSM8K stop sequence).
_NEXT_QUESTION = re.compile(r"\bQuestion\s*:")


def gsm8k_words(text: str) -> str:
    """GSM8K text as space-separated word-level tokens: words (with inner apostrophes: "Natalia's"), single digits,
    `<<`, `>>`, `####`, and any other non-space character alone. Idempotent: `gsm8k_words(gsm8k_words(t)) ==
    gsm8k_words(t)`, and `gsm8k_extract_answer` gives the same number on `text` and on `gsm8k_words(text)`."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    return " ".join(_WORD.findall(text))


def _local_split_file(folder: Path, split: str) -> Path | None:
    """`<split>*.parquet` / `<split>*.jsonl` in `folder` or its `main/` (the Hub repo's layout: main/train-....parquet;
    the original GSM8K repo's: train.jsonl)."""
    for directory in (folder / "main", folder):
        for pattern in (f"{split}*.parquet", f"{split}*.jsonl"):
            found = sorted(directory.glob(pattern))
            if found:
                return found[0]
    return None


def load_gsm8k_pairs(source: str, split: str) -> list[tuple[str, str]]:
    """The (question, answer) pairs of GSM8K's `split` ("train" or "test") from `source`: "gsm8k" (the Hub, online
    only: `load_gsm8k`) or a local folder holding `train*.parquet` / `test*.parquet` (a snapshot of the Hub repo,
    `main/` included) or `train.jsonl` / `test.jsonl` (the original release), each row with `question` and `answer`.
    ValueError naming `data` when the folder lacks the split or the columns."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if source == "gsm8k":
        dataset = load_gsm8k(split)
        return list(zip(dataset["question"], dataset["answer"]))
    folder = Path(source).expanduser()
    if not folder.is_dir():
        raise ValueError(f"data must be 'synthetic', 'gsm8k' or a local GSM8K folder, got {source!r}")
    path = _local_split_file(folder, split)
    if path is None:
        raise ValueError(
            f"data: {source!r} holds no {split}*.parquet or {split}*.jsonl (also looked in main/); expected a copy of "
            "openai/gsm8k (main/train-*.parquet, main/test-*.parquet) or GSM8K's train.jsonl / test.jsonl"
        )
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = []
    for index, row in enumerate(rows):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("question"), str)
            or not isinstance(row.get("answer"), str)
        ):
            raise ValueError(f"data: row {index} of {path} needs string 'question' and 'answer' fields")
        pairs.append((row["question"], row["answer"]))
    logger.info("GSM8K %s: %d problems from %s", split, len(pairs), path)
    return pairs


def synthetic_gsm8k_pairs(
    num_train: int, num_test: int, seed: int, min_steps: int, max_steps: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Train / test (question, answer) pairs from `ArithmeticWordProblems` (train seed `seed`, test `seed + 1`, test
    problems equal to a training one removed): the offline stand-in for GSM8K, in its answer format."""
    task = ArithmeticWordProblems(seed=seed, min_steps=min_steps, max_steps=max_steps)
    train = [(e.prompt, e.answer) for e in task.generate(num_train, seed=seed)]
    seen = set(train)
    test = [(e.prompt, e.answer) for e in task.generate(2 * num_test + 16, seed=seed + 1)]
    return train, [pair for pair in test if pair not in seen][:num_test]


def _count(text: str) -> int:
    return len(text.split())


class Gsm8kFewShotData:
    """GSM8K-format problems as few-shot prompts, tokenized and encoded, with the `ReasoningData` interface the
    recipes and evaluation systems read (`tokenizer`, `vocab_size`, `train`, `eval`, `eval_examples`,
    `max_prompt_length`, `max_answer_length`, `batch`, `decode`, `accuracy`, `source`).

    Exemplars: the first `max_shots` training problems whose question + answer have at most `max_shot_tokens` tokens
    (None: any); the k-shot prompt of every test question uses the first k of them (the usual fixed-exemplar GSM8K
    evaluation), and they are not training examples. Training examples: the other training problems whose answer
    has at most `max_answer_tokens` tokens (None: the longest), each prompted with k exemplars, k drawn uniformly in
    0 .. `max_shots` (seeded by `seed`), so that every evaluated shot count is a prompt format seen in training.

    Prompt width: the longest prompt (training prompts and `max_shots`-shot test prompts). With `context_length`
    (a model's `max_position_embeddings`), prompts are cut to `context_length - 1 - max_answer_length` tokens by
    dropping their oldest tokens (the start of the first exemplar); `stats` counts the cut prompts. ValueError when
    even the last question cannot fit.

    `eval` / `eval_examples`: the first `num_trainer_eval` test problems (with answers that fit) at `max_shots`
    shots, what the trainer's end-of-run evaluation reads; `test_prompts(k)` encodes the whole test split.
    `vocab_size`: the tokenizer's size, or `vocab_size` when larger (embedding rows beyond the tokenizer are never
    read; the full preset keeps the paper's 50,304 so that parameter counts are the paper's).
    """

    def __init__(
        self,
        train_pairs: Sequence[tuple[str, str]],
        test_pairs: Sequence[tuple[str, str]],
        max_shots: int,
        *,
        max_answer_tokens: int | None = None,
        max_shot_tokens: int | None = None,
        context_length: int | None = None,
        vocab_size: int | None = None,
        seed: int = 0,
        source: str = "",
        num_trainer_eval: int = 16,
    ):
        if isinstance(max_shots, bool) or not isinstance(max_shots, int) or max_shots < 0:
            raise ValueError(f"max_shots must be an integer >= 0, got {max_shots!r}")
        train = [(gsm8k_words(q), gsm8k_words(a)) for q, a in train_pairs]
        test = [(gsm8k_words(q), gsm8k_words(a)) for q, a in test_pairs]
        if not test:
            raise ValueError("test_pairs must hold at least one (question, answer) pair")
        fits_shot = [max_shot_tokens is None or _count(q) + _count(a) <= max_shot_tokens for q, a in train]
        shot_index = [i for i, ok in enumerate(fits_shot) if ok][:max_shots]
        if len(shot_index) < max_shots:
            raise ValueError(
                f"shots: {max_shots} exemplars needed, but only {len(shot_index)} training problems have at most "
                f"max_shot_tokens={max_shot_tokens} tokens"
            )
        self.exemplars = [train[i] for i in shot_index]
        taken = set(shot_index)
        rest = [pair for i, pair in enumerate(train) if i not in taken]
        longest_answer = max((_count(a) for _, a in rest), default=0)
        answer_limit = longest_answer if max_answer_tokens is None else max_answer_tokens
        kept = [pair for pair in rest if _count(pair[1]) <= answer_limit]
        if len(kept) < 2:
            raise ValueError(
                f"num_train_examples: {len(kept)} training problem(s) left after taking {max_shots} exemplars and "
                f"dropping answers over {answer_limit} tokens; at least 2 are needed"
            )
        self.max_shots = max_shots
        self.max_answer_length = answer_limit + 1  # + [EOS]
        rng = np.random.default_rng([seed, 808])
        train_shots = rng.integers(0, max_shots + 1, size=len(kept))
        train_prompts = [self._prompt(q, int(k)) for (q, _), k in zip(kept, train_shots)]

        vocab: dict[str, None] = dict.fromkeys(PROMPT_FRAME_TOKENS)
        vocab.update(dict.fromkeys(str(d) for d in range(10)))
        for q, a in train:
            vocab.update(dict.fromkeys(q.split()))
            vocab.update(dict.fromkeys(a.split()))
        self.tokenizer = build_reasoning_tokenizer(vocab)
        self._vocab_size = max(len(self.tokenizer), vocab_size or 0)

        self.test_pairs = test
        self._test_prompt_text = {}
        longest_test = max(_count(self._test_prompt(max_shots, i)) for i in range(len(test)))
        needed = max(max(_count(p) for p in train_prompts), longest_test)
        width = needed
        if context_length is not None:
            width = min(needed, context_length - 1 - self.max_answer_length)
            shortest_needed = max(_count(self._prompt(q, 0)) for q, _ in test)
            if width < shortest_needed:
                raise ValueError(
                    f"context_length={context_length} leaves {width} prompt tokens after the [SEP] and "
                    f"{self.max_answer_length} answer tokens, fewer than the longest zero-shot test prompt "
                    f"({shortest_needed} tokens): raise the context or lower max_answer_tokens"
                )
        self.max_prompt_length = width
        self.needed_prompt_length = needed
        truncated_train = sum(_count(p) > width for p in train_prompts)
        self.train_examples = [ReasoningExample(self._cut(p), a) for p, (_, a) in zip(train_prompts, kept)]
        self.train = self.encode(self.train_examples)
        self.train_shots = torch.as_tensor(train_shots, dtype=torch.long)

        fitting = [i for i, (_, a) in enumerate(test) if _count(a) <= answer_limit][:num_trainer_eval]
        if not fitting:
            fitting = [0]
        self.eval_examples = [
            ReasoningExample(self._cut(self._test_prompt(max_shots, i)), self._fit_answer(test[i][1])) for i in fitting
        ]
        self.eval = self.encode(self.eval_examples)
        self.source = source
        self._test_cache: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}
        self.stats = {
            "train_problems": len(train),
            "exemplars": max_shots,
            "train_examples": len(kept),
            "train_dropped_long_answer": len(rest) - len(kept),
            "train_prompts_truncated": int(truncated_train),
            "test_problems": len(test),
            "max_answer_tokens": answer_limit,
            "test_answers_longer_than_budget": sum(_count(a) > answer_limit for _, a in test),
            "prompt_tokens_needed": needed,
            "prompt_width": width,
            "tokenizer_size": len(self.tokenizer),
            "vocab_size": self._vocab_size,
            "test_unknown_token_fraction": self._unknown_fraction(),
        }

    # ----------------------------------------------------------------------------------------------- prompts

    def _prompt(self, question: str, k: int) -> str:
        return gsm8k_words(gsm8k_few_shot_prompt(question, self.exemplars, k=k))

    def _test_prompt(self, k: int, index: int) -> str:
        key = (k, index)
        if key not in self._test_prompt_text:
            self._test_prompt_text[key] = self._prompt(self.test_pairs[index][0], k)
        return self._test_prompt_text[key]

    def _cut(self, prompt: str) -> str:
        """`prompt` without its oldest tokens beyond the prompt width."""
        tokens = prompt.split()
        return " ".join(tokens[-self.max_prompt_length :])

    def _fit_answer(self, answer: str) -> str:
        tokens = answer.split()
        return " ".join(tokens[: self.max_answer_length - 1])

    def _unknown_fraction(self) -> float:
        vocab = self.tokenizer.get_vocab()
        tokens = [t for q, _ in self.test_pairs for t in q.split()]
        return sum(t not in vocab for t in tokens) / max(1, len(tokens))

    def test_prompts(self, k: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Left-padded `(prompt_ids, prompt_mask)` of every test question with the first `k` exemplars, and how many
        of those prompts were cut to the prompt width. ValueError for a `k` outside 0 .. max_shots."""
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= self.max_shots:
            raise ValueError(f"shots: k must be an integer in 0 .. {self.max_shots} (the exemplars), got {k!r}")
        if k not in self._test_cache:
            prompts = [self._test_prompt(k, i) for i in range(len(self.test_pairs))]
            cut = sum(_count(p) > self.max_prompt_length for p in prompts)
            vocab, unk = self.tokenizer.get_vocab(), self.tokenizer.unk_token_id
            width = self.max_prompt_length
            ids = torch.full((len(prompts), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(prompts), width), dtype=torch.long)
            for row, prompt in enumerate(prompts):
                tokens = [vocab.get(t, unk) for t in self._cut(prompt).split()]
                ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
                mask[row, width - len(tokens) :] = 1
            self._test_cache[k] = (ids, mask, int(cut))
        return self._test_cache[k]

    # ------------------------------------------------------------------------------- the ReasoningData interface

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, examples: list[ReasoningExample]) -> dict[str, torch.Tensor]:
        return encode_reasoning_examples(
            examples, self.tokenizer, self.max_prompt_length, self.max_answer_length, allow_unknown=True
        )

    def batch(self, split: dict[str, torch.Tensor], index: torch.Tensor, keys) -> dict[str, torch.Tensor]:
        return {key: split[key][index] for key in keys}

    def decode(self, token_ids: torch.Tensor) -> list[str]:
        """Generated ids -> answer strings: cut at the first `[EOS]` and before a next "Question :" block, special
        tokens dropped (ids past the tokenizer, possible with padded embeddings, read as `[UNK]`)."""
        answers = []
        eos, unk, size = self.tokenizer.eos_token_id, self.tokenizer.unk_token_id, len(self.tokenizer)
        for row in token_ids.tolist():
            if eos in row:
                row = row[: row.index(eos)]
            text = self.tokenizer.decode([t if 0 <= t < size else unk for t in row], skip_special_tokens=True)
            answers.append(_NEXT_QUESTION.split(text, maxsplit=1)[0].strip())
        return answers

    @staticmethod
    def score(gold_answer: str, predicted_answer: str) -> bool:
        """Exact match of the final numbers (`gsm8k_extract_answer`); a prediction without `#### n` is wrong."""
        predicted = gsm8k_extract_answer(predicted_answer)
        return predicted is not None and predicted == gsm8k_extract_answer(gold_answer)

    def accuracy(self, examples: list[ReasoningExample], answers: list[str]) -> float:
        if not examples:
            return float("nan")
        return sum(self.score(e.answer, a) for e, a in zip(examples, answers)) / len(examples)
