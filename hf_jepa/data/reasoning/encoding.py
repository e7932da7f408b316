"""Batching of reasoning examples into fixed-shape tensors (`encode_reasoning_examples`) or a `datasets.Dataset`
(`reasoning_dataset`).

Batching (`encode_reasoning_examples`, `reasoning_dataset`) gives fixed-shape tensors: the prompt left-padded (so its
last token sits at a fixed position, where a latent reasoner reads it), `[SEP]`, then the answer, `[EOS]` and right
padding (so generation starts at a fixed position), plus `labels` for a coupled next-token baseline.
"""

import itertools
from collections.abc import Sequence

import torch

from .common import (
    EOS_TOKEN,
    IGNORE_INDEX,
    PAD_TOKEN,
    REASONING_SPECIAL_TOKENS,
    SEP_TOKEN,
    UNK_TOKEN,
    ReasoningExample,
    check_known_tokens,
)


def _pad(sequences: list[list[int]], width: int, pad_id: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """`(ids, mask)` of shape (N, width): each sequence placed flush left or right, the rest `pad_id` / 0."""
    lengths = torch.tensor([len(sequence) for sequence in sequences], dtype=torch.long)
    flat = torch.tensor(list(itertools.chain.from_iterable(sequences)), dtype=torch.long)
    rows = torch.repeat_interleave(torch.arange(len(sequences)), lengths)
    starts = torch.cumsum(lengths, 0) - lengths
    columns = torch.arange(flat.numel()) - torch.repeat_interleave(starts, lengths)
    if left:
        columns = columns + (width - lengths)[rows]
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    ids[rows, columns] = flat
    mask[rows, columns] = 1
    return ids, mask


def encode_reasoning_examples(
    examples: Sequence[ReasoningExample],
    tokenizer,
    max_prompt_length: int | None,
    max_answer_length: int | None,
    allow_unknown: bool = False,
) -> dict[str, torch.Tensor]:
    """Fixed-shape int64 tensors for a decoupled reasoner and a coupled next-token baseline (P = max_prompt_length,
    A = max_answer_length, which counts the `[EOS]`; None: the longest in `examples`):

    - `prompt_ids` (N, P): prompt tokens flush right, `[PAD]` on the left; `prompt_mask` (N, P): 1 on prompt tokens.
    - `answer_ids` (N, A): answer tokens, `[EOS]`, then `[PAD]` on the right; `answer_mask` (N, A): 1 on answer
      tokens and the `[EOS]`.
    - `input_ids` (N, P + 1 + A) = [prompt_ids, `[SEP]`, answer_ids]; `attention_mask` = [prompt_mask, 1, answer_mask].
    - `labels` (N, P + 1 + A): `input_ids` on answer tokens and the `[EOS]`, -100 elsewhere (padding, prompt,
      `[SEP]`); unshifted, as transformers' causal LMs expect (they shift inside the loss).
    - `prompt_lengths`, `answer_lengths` (N,): token counts (the answer's without the `[EOS]`).

    ValueError naming the first offending example index when a prompt has more than P tokens, an answer plus
    `[EOS]` more than A, or (unless `allow_unknown`) a token is not in the vocabulary.
    """
    examples = list(examples)
    if not examples:
        raise ValueError("examples must not be empty")
    for index, example in enumerate(examples):
        if not isinstance(example, ReasoningExample):
            raise ValueError(f"examples[{index}] must be a ReasoningExample, got {type(example).__name__}")
    for name, limit in (("max_prompt_length", max_prompt_length), ("max_answer_length", max_answer_length)):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"{name} must be an integer >= 1 or None, got {limit!r}")
    vocab = tokenizer.get_vocab()
    if any(token not in vocab for token in REASONING_SPECIAL_TOKENS) or tokenizer.pad_token_id != vocab[PAD_TOKEN]:
        raise ValueError(
            f"tokenizer must hold {REASONING_SPECIAL_TOKENS} with [PAD] as its pad token "
            "(see build_reasoning_tokenizer)"
        )
    special = {"pad": vocab[PAD_TOKEN], "sep": vocab[SEP_TOKEN], "eos": vocab[EOS_TOKEN], "unk": vocab[UNK_TOKEN]}
    prompts = tokenizer([example.prompt for example in examples], add_special_tokens=False)["input_ids"]
    answers = tokenizer([example.answer for example in examples], add_special_tokens=False)["input_ids"]
    prompt_lengths = torch.tensor([len(ids) for ids in prompts], dtype=torch.long)
    answer_lengths = torch.tensor([len(ids) for ids in answers], dtype=torch.long)
    if max_prompt_length is None:
        max_prompt_length = max(int(prompt_lengths.max()), 1)
    if max_answer_length is None:
        max_answer_length = int(answer_lengths.max()) + 1
    too_long = torch.nonzero(prompt_lengths > max_prompt_length).flatten()
    if too_long.numel():
        index = int(too_long[0])
        raise ValueError(
            f"example {index}: the prompt has {int(prompt_lengths[index])} tokens, more than "
            f"max_prompt_length={max_prompt_length} ({too_long.numel()} example(s) too long)"
        )
    too_long = torch.nonzero(answer_lengths + 1 > max_answer_length).flatten()
    if too_long.numel():
        index = int(too_long[0])
        raise ValueError(
            f"example {index}: the answer has {int(answer_lengths[index])} tokens + [EOS], more than "
            f"max_answer_length={max_answer_length} ({too_long.numel()} example(s) too long)"
        )
    prompt_ids, prompt_mask = _pad(prompts, max_prompt_length, special["pad"], left=True)
    answer_ids, answer_mask = _pad(answers, max_answer_length, special["pad"], left=False)
    if not allow_unknown:
        unknown = ((prompt_ids == special["unk"]) & (prompt_mask == 1)).any(1) | (answer_ids == special["unk"]).any(1)
        if unknown.any():
            index = int(torch.nonzero(unknown).flatten()[0])
            try:
                check_known_tokens(tokenizer, examples[index].prompt + " " + examples[index].answer)
            except ValueError as error:
                raise ValueError(f"example {index}: {error}") from None
            raise ValueError(f"example {index} holds the literal token {UNK_TOKEN}")
    rows = torch.arange(len(examples))
    answer_ids[rows, answer_lengths] = special["eos"]
    answer_mask[rows, answer_lengths] = 1
    separator = torch.full((len(examples), 1), special["sep"], dtype=torch.long)
    input_ids = torch.cat([prompt_ids, separator, answer_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, torch.ones_like(separator), answer_mask], dim=1)
    labels = torch.cat(
        [
            torch.full_like(prompt_ids, IGNORE_INDEX),
            torch.full_like(separator, IGNORE_INDEX),
            answer_ids.masked_fill(answer_mask == 0, IGNORE_INDEX),
        ],
        dim=1,
    )
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "answer_ids": answer_ids,
        "answer_mask": answer_mask,
        "prompt_lengths": prompt_lengths,
        "answer_lengths": answer_lengths,
    }


def reasoning_dataset(
    examples: Sequence[ReasoningExample],
    tokenizer,
    max_prompt_length: int | None,
    max_answer_length: int | None,
    allow_unknown: bool = False,
):
    """A `datasets.Dataset` of `encode_reasoning_examples`'s columns plus the `prompt` / `answer` strings, formatted
    as torch tensors (`dataset[i]["input_ids"]` is a tensor; the strings stay strings)."""
    import datasets

    examples = list(examples)
    encoded = encode_reasoning_examples(examples, tokenizer, max_prompt_length, max_answer_length, allow_unknown)
    columns = {name: tensor.numpy() for name, tensor in encoded.items()}
    columns["prompt"] = [example.prompt for example in examples]
    columns["answer"] = [example.answer for example in examples]
    dataset = datasets.Dataset.from_dict(columns)
    dataset.set_format("torch", columns=list(encoded), output_all_columns=True)
    return dataset
