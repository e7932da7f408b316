"""Synthetic reasoning tasks for JEPA-Reasoner (latent reasoning decoupled from token generation), made by hf-jepa.

Every task here is synthetic: hf-jepa generates it from a seed, nothing is downloaded, and no example comes from a
published data set. The exceptions read the real GSM8K: `load_gsm8k`, a thin online-only loader of `openai/gsm8k`,
and `load_gsm8k_pairs`, which also reads a local copy of it.

All tasks are word-level: an example is a `ReasoningExample(prompt, answer)` whose strings are tokens joined by single
spaces, and each task has a closed vocabulary (`task.vocab()`), so `build_reasoning_tokenizer(task.vocab())` maps
every generated token to its own id and `[UNK]` only ever marks a token that the task cannot produce (which
`check_known_tokens` and `encode_reasoning_examples` reject). Generation is deterministic: example `i` of
`generate(n, seed)` depends only on `(seed, i)` (its own `numpy` stream), so a longer draw extends a shorter one and
different seeds give different examples. Generating a few thousand examples in Python takes well under a second;
the training hot path is `encode_reasoning_examples`, which pads a whole batch with tensor ops.

Tasks (`load_reasoning_task(name)`):

- `"tree_search"` (`TreeSearchTask`): the edges of a random binary tree in random order and a target node; the
  answer is the path from the (unstated) root to the target. Needs search over a structure given only implicitly.
- `"cfg"` (`CfgTask`): a prefix of a sentence of a fixed, nested context-free grammar (`CFG_GRAMMAR`, arithmetic
  expressions with two kinds of brackets); the answer is the rest of the sentence, and any completion the grammar
  accepts scores as correct. `corrupt_prompt` replaces a fraction of the prefix for robustness curves.
- `"arithmetic"` (`ArithmeticWordProblems`): multi-step arithmetic word problems in GSM8K's answer format (worked
  lines with `<< a + b = c >>` calculator annotations, then `#### answer`), numbers written digit by digit so the
  vocabulary stays closed. The offline stand-in for GSM8K.

Batching (`encode_reasoning_examples`, `reasoning_dataset`) gives fixed-shape tensors: the prompt left-padded (so its
last token sits at a fixed position, where a latent reasoner reads it), `[SEP]`, then the answer, `[EOS]` and right
padding (so generation starts at a fixed position), plus `labels` for a coupled next-token baseline.

Modules: `common` (special tokens, `ReasoningExample`, `ReasoningTask`, the tokenizer), `tree_search`, `cfg`,
`arithmetic` (with the GSM8K formats and loader), `gsm8k` (GSM8K few-shot prompts, word-level tokens and encoded
splits for the GSM8K protocol), `registry` (`load_reasoning_task`) and `encoding` (batching); every
public name is re-exported here.
"""

from ..sources import GSM8K_HUB_ID
from .arithmetic import ArithmeticWordProblems, digit_tokens, gsm8k_extract_answer, gsm8k_few_shot_prompt, load_gsm8k
from .cfg import CFG_GRAMMAR, CFG_START, CFG_TERMINALS, CfgTask
from .common import (
    BOS_TOKEN,
    EOS_TOKEN,
    IGNORE_INDEX,
    PAD_TOKEN,
    REASONING_SPECIAL_TOKENS,
    SEP_TOKEN,
    UNK_TOKEN,
    ReasoningExample,
    ReasoningTask,
    build_reasoning_tokenizer,
    check_known_tokens,
)
from .encoding import encode_reasoning_examples, reasoning_dataset
from .gsm8k import Gsm8kFewShotData, gsm8k_words, load_gsm8k_pairs, synthetic_gsm8k_pairs
from .registry import REASONING_TASKS, load_reasoning_task
from .splits import ReasoningData
from .tree_search import TreeSearchTask

__all__ = [
    "BOS_TOKEN",
    "CFG_GRAMMAR",
    "CFG_START",
    "CFG_TERMINALS",
    "EOS_TOKEN",
    "GSM8K_HUB_ID",
    "IGNORE_INDEX",
    "PAD_TOKEN",
    "REASONING_SPECIAL_TOKENS",
    "REASONING_TASKS",
    "SEP_TOKEN",
    "UNK_TOKEN",
    "ArithmeticWordProblems",
    "CfgTask",
    "ReasoningData",
    "ReasoningExample",
    "Gsm8kFewShotData",
    "ReasoningTask",
    "TreeSearchTask",
    "build_reasoning_tokenizer",
    "check_known_tokens",
    "digit_tokens",
    "encode_reasoning_examples",
    "gsm8k_extract_answer",
    "gsm8k_few_shot_prompt",
    "gsm8k_words",
    "load_gsm8k",
    "load_gsm8k_pairs",
    "load_reasoning_task",
    "reasoning_dataset",
    "synthetic_gsm8k_pairs",
]
