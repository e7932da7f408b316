"""Synthetic reasoning tasks for JEPA-Reasoner (latent reasoning decoupled from token generation), made by hf-jepa.

Every task here is synthetic: hf-jepa generates it from a seed, nothing is downloaded, and no example comes from a
published data set. The one exception is `load_gsm8k`, a thin online-only loader of the real GSM8K (`openai/gsm8k`).

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
"""

import itertools
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch


logger = logging.getLogger(__name__)

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
    `decode(ids, skip_special_tokens=True)` gives the tokens joined by single spaces. The tokenizer round-trips through
    `save_pretrained` / `AutoTokenizer.from_pretrained` offline.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
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


class TreeSearchTask(ReasoningTask):
    """Path finding in a random binary tree given as an unordered edge list.

    Each example draws a tree shape (node `k` attaches to a uniformly drawn earlier node that still has a free child
    slot, in a uniformly drawn free slot, left or right), gives its nodes distinct labels drawn without replacement
    from `n0 .. n{node_vocab_size - 1}`, and a target drawn uniformly among the non-root nodes (so every answer has
    at least two tokens). Prompt: the `num_nodes - 1` edges as `parent child` pairs in random order, separated by
    `,`, then `?` and the target, e.g. `n12 n7 , n12 n33 , n7 n2 ? n2`. The root is never stated: it is the only
    parent that is never a child, so the model has to infer it. Answer: the root-to-target path, e.g. `n12 n7 n2`.

    Args:
        num_nodes: nodes per tree (>= 2).
        node_vocab_size: number of node labels (>= num_nodes).
        seed: default seed of `generate`.
    """

    name = "tree_search"
    _salt = 101

    def __init__(self, num_nodes: int = 15, node_vocab_size: int = 64, seed: int = 0):
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 2:
            raise ValueError(f"num_nodes must be an integer >= 2, got {num_nodes!r}")
        if isinstance(node_vocab_size, bool) or not isinstance(node_vocab_size, int) or node_vocab_size < num_nodes:
            raise ValueError(f"node_vocab_size must be an integer >= num_nodes ({num_nodes}), got {node_vocab_size!r}")
        self.num_nodes = num_nodes
        self.node_vocab_size = node_vocab_size
        self.seed = _check_seed(seed)

    def __repr__(self) -> str:
        return f"TreeSearchTask(num_nodes={self.num_nodes}, node_vocab_size={self.node_vocab_size}, seed={self.seed})"

    def node_labels(self) -> list[str]:
        return [f"n{index}" for index in range(self.node_vocab_size)]

    def vocab(self) -> list[str]:
        """All node labels, then `,` and `?`."""
        return self.node_labels() + [",", "?"]

    @property
    def max_prompt_length(self) -> int:
        """`num_nodes - 1` edges of 2 tokens, `num_nodes - 2` commas, `?` and the target: `3 * num_nodes - 2`."""
        return 3 * self.num_nodes - 2

    @property
    def max_answer_length(self) -> int:
        """A path visits each node at most once: `num_nodes` tokens (a chain-shaped tree)."""
        return self.num_nodes

    def _generate_one(self, rng: np.random.Generator) -> ReasoningExample:
        n = self.num_nodes
        parent = [-1] * n
        free = {0: [0, 1]}  # node -> its free child slots (0 = left, 1 = right)
        for node in range(1, n):
            owners = sorted(free)
            owner = owners[int(rng.integers(len(owners)))]
            slots = free[owner]
            slots.pop(int(rng.integers(len(slots))))
            if not slots:
                del free[owner]
            parent[node] = owner
            free[node] = [0, 1]
        labels = [f"n{index}" for index in rng.choice(self.node_vocab_size, size=n, replace=False)]
        target = int(rng.integers(1, n))
        path = [target]
        while parent[path[-1]] >= 0:
            path.append(parent[path[-1]])
        edges = [f"{labels[parent[child]]} {labels[child]}" for child in rng.permutation(np.arange(1, n)).tolist()]
        prompt = " , ".join(edges) + f" ? {labels[target]}"
        return ReasoningExample(prompt, " ".join(labels[node] for node in reversed(path)))

    @staticmethod
    def parse_prompt(prompt: str) -> tuple[dict[str, str], str, str]:
        """`(parent_of, root, target)` of a prompt; ValueError if it is malformed or its edges are not one tree."""
        tokens = prompt.split()
        if tokens.count("?") != 1 or tokens.index("?") != len(tokens) - 2:
            raise ValueError(f"prompt must end with '? <target>' (one '?'), got {prompt!r}")
        target = tokens[-1]
        parent_of: dict[str, str] = {}
        parents = []
        for chunk in " ".join(tokens[:-2]).split(","):
            edge = chunk.split()
            if len(edge) != 2:
                raise ValueError(f"prompt edges must be 'parent child' pairs separated by ',', got {chunk.strip()!r}")
            if edge[1] in parent_of:
                raise ValueError(f"node {edge[1]!r} has two parents in {prompt!r}")
            parent_of[edge[1]] = edge[0]
            parents.append(edge[0])
        roots = {node for node in parents if node not in parent_of}
        if len(roots) != 1:
            raise ValueError(
                f"prompt edges must form one tree (one node that is never a child), roots: {sorted(roots)}"
            )
        root = roots.pop()
        for node in parent_of:  # every node must reach the root: no cycle hanging off the tree
            seen = set()
            while node != root:
                if node in seen or node not in parent_of:
                    raise ValueError(f"prompt edges must form one tree; {node!r} does not lead to the root {root!r}")
                seen.add(node)
                node = parent_of[node]
        if target != root and target not in parent_of:
            raise ValueError(f"target {target!r} is not a node of the tree")
        return parent_of, root, target

    def is_valid_path(self, prompt: str, answer: str) -> bool:
        """Whether `answer` is the path from the root to the target under `prompt`'s edges (ValueError: bad prompt)."""
        parent_of, root, target = self.parse_prompt(prompt)
        path = answer.split()
        if not path or path[0] != root or path[-1] != target:
            return False
        return all(parent_of.get(child) == node for node, child in zip(path, path[1:]))

    def score(self, example: ReasoningExample, predicted_answer: str) -> bool:
        """Exact match of the predicted path (whitespace-insensitive); in a tree the path is unique."""
        return predicted_answer.split() == example.answer.split()


# Arithmetic expressions over three variables with two kinds of brackets. Right recursion keeps the grammar LL(1):
# one token of lookahead picks every production, so `CfgTask.is_valid` is an exact linear-time recogniser, and the
# grammar is unambiguous. Nesting comes from F -> ( E ) | [ E ], and brackets must match in kind.
CFG_GRAMMAR: dict[str, tuple[tuple[str, ...], ...]] = {
    "E": (("T",), ("T", "+", "E"), ("T", "-", "E")),
    "T": (("F",), ("F", "*", "T")),
    "F": (("x",), ("y",), ("z",), ("(", "E", ")"), ("[", "E", "]")),
}
CFG_START = "E"
CFG_TERMINALS = ("x", "y", "z", "+", "-", "*", "(", ")", "[", "]")
_VARIABLES = ("x", "y", "z")
_OPEN_CLOSE = {"(": ")", "[": "]"}
_END = "$"
# The LL(1) table of the left-factored grammar E -> T E', E' -> + E | - E | eps, T -> F T', T' -> * T | eps.
# Lookahead -> symbols pushed (in reading order); a missing entry is a syntax error.
_FIRST_F = {"x": ("x",), "y": ("y",), "z": ("z",), "(": ("(", "E", ")"), "[": ("[", "E", "]")}
_LL1 = {
    "E": {token: ("T", "E'") for token in _FIRST_F},
    "E'": {"+": ("+", "E"), "-": ("-", "E"), ")": (), "]": (), _END: ()},
    "T": {token: ("F", "T'") for token in _FIRST_F},
    "T'": {"*": ("*", "T"), "+": (), "-": (), ")": (), "]": (), _END: ()},
    "F": _FIRST_F,
}


class CfgTask(ReasoningTask):
    """Complete a prefix of a sentence of a fixed context-free grammar (`CFG_GRAMMAR`).

    The grammar (start symbol E; 10 terminals `x y z + - * ( ) [ ]`)::

        E -> T | T + E | T - E
        T -> F | F * T
        F -> x | y | z | ( E ) | [ E ]

    e.g. `[ x + y ] * ( z - x )`; every sentence has an odd number of tokens. `is_valid` is an LL(1) pushdown
    recogniser (explicit stack, no recursion, linear time) and is exact for this grammar. `sample_sentence` expands E
    with continuation probabilities (another `+`/`-` term with p=0.4, another `*` factor with p=0.3, a bracketed
    factor with p=0.35 below `max_depth` bracket levels, round or square with equal odds) and redraws until the
    sentence has `min_length .. max_length` tokens.

    An example cuts a sampled sentence of `n` tokens after `round(prefix_fraction * n)` tokens (clipped to
    `1 .. n - 1`): the prompt is the prefix and the answer the rest. Many completions are valid, so `score` accepts
    any completion that makes prefix + completion a sentence (the valid-under-grammar rate), not only the original.

    Args:
        seed: default seed of `generate`.
        min_length, max_length: sentence length bounds in tokens (3 <= min_length <= max_length).
        max_depth: the most bracket levels a sampled sentence nests (>= 1).
    """

    name = "cfg"
    _salt = 202
    _P_MORE_TERMS, _P_MORE_FACTORS, _P_BRACKET = 0.4, 0.3, 0.35

    def __init__(self, seed: int = 0, min_length: int = 8, max_length: int = 30, max_depth: int = 4):
        if not isinstance(min_length, int) or not isinstance(max_length, int) or not 3 <= min_length <= max_length:
            raise ValueError(f"min_length and max_length must satisfy 3 <= min_length <= max_length, got "
                             f"{min_length!r} and {max_length!r}")
        if min_length == max_length and min_length % 2 == 0:
            raise ValueError(f"every sentence of the grammar has an odd length; min_length == max_length == "
                             f"{min_length} leaves none")
        if not isinstance(max_depth, int) or max_depth < 1:
            raise ValueError(f"max_depth must be an integer >= 1, got {max_depth!r}")
        self.seed = _check_seed(seed)
        self.min_length, self.max_length, self.max_depth = min_length, max_length, max_depth

    def __repr__(self) -> str:
        return (f"CfgTask(seed={self.seed}, min_length={self.min_length}, max_length={self.max_length}, "
                f"max_depth={self.max_depth})")

    def vocab(self) -> list[str]:
        """The 10 terminals."""
        return list(CFG_TERMINALS)

    @property
    def max_prompt_length(self) -> int:
        return self.max_length - 1

    @property
    def max_answer_length(self) -> int:
        """A completion leaves at least one token to the prefix: `max_length - 1`."""
        return self.max_length - 1

    @staticmethod
    def is_valid(tokens: Sequence[str] | str) -> bool:
        """Whether `tokens` (a token sequence, or a string split at whitespace) is a sentence of the grammar."""
        if isinstance(tokens, str):
            tokens = tokens.split()
        stack = [CFG_START]  # symbols still to match, top at the end
        position, tokens = 0, list(tokens)
        while stack:
            symbol = stack.pop()
            lookahead = tokens[position] if position < len(tokens) else _END
            if symbol in _LL1:
                production = _LL1[symbol].get(lookahead)
                if production is None:
                    return False
                stack.extend(reversed(production))
            elif symbol == lookahead:
                position += 1
            else:
                return False
        return position == len(tokens)

    def _sample_once(self, rng: np.random.Generator) -> list[str]:
        out: list[str] = []
        # Explicit work stack of ("E" | "T" | "F", depth) and literal closing brackets; depth = enclosing brackets.
        work: list = [("E", 0)]
        while work:
            item = work.pop()
            if isinstance(item, str):
                out.append(item)
                continue
            symbol, depth = item
            if symbol == "E":
                if rng.random() < self._P_MORE_TERMS:
                    work += [("E", depth), "+" if rng.random() < 0.5 else "-"]
                work.append(("T", depth))
            elif symbol == "T":
                if rng.random() < self._P_MORE_FACTORS:
                    work += [("T", depth), "*"]
                work.append(("F", depth))
            elif depth < self.max_depth and rng.random() < self._P_BRACKET:
                opening = "(" if rng.random() < 0.5 else "["
                out.append(opening)
                work += [_OPEN_CLOSE[opening], ("E", depth + 1)]
            else:
                out.append(_VARIABLES[int(rng.integers(len(_VARIABLES)))])
            if len(out) > self.max_length:
                break  # too long already: redraw
        return out

    def sample_sentence(self, rng: np.random.Generator, max_tries: int = 10_000) -> list[str]:
        """A sentence of `min_length .. max_length` tokens (rejection sampling of the expansion above)."""
        for _ in range(max_tries):
            sentence = self._sample_once(rng)
            if self.min_length <= len(sentence) <= self.max_length:
                return sentence
        raise RuntimeError(f"no sentence of {self.min_length}..{self.max_length} tokens in {max_tries} draws")

    def generate(
        self, num_examples: int, seed: int | None = None, prefix_fraction: float = 0.5
    ) -> list[ReasoningExample]:
        """Examples `0 .. num_examples - 1` of the stream of `seed`: a sentence cut into prefix (prompt) and rest."""
        if isinstance(prefix_fraction, bool) or not isinstance(prefix_fraction, (int, float)) or not (
            0.0 < prefix_fraction < 1.0
        ):
            raise ValueError(f"prefix_fraction must lie strictly between 0 and 1, got {prefix_fraction!r}")
        num_examples = _check_count(num_examples)
        seed = _check_seed(self.seed if seed is None else seed)
        return [
            self._generate_one(_example_rng(seed, index, self._salt), prefix_fraction) for index in range(num_examples)
        ]

    def _generate_one(self, rng: np.random.Generator, prefix_fraction: float = 0.5) -> ReasoningExample:
        sentence = self.sample_sentence(rng)
        cut = min(max(round(prefix_fraction * len(sentence)), 1), len(sentence) - 1)
        return ReasoningExample(" ".join(sentence[:cut]), " ".join(sentence[cut:]))

    def score(self, example: ReasoningExample, predicted_answer: str, original_prompt: str | None = None) -> bool:
        """Whether prefix + `predicted_answer` is a sentence of the grammar.

        The prefix is `original_prompt` when given (score a completion the model made from a corrupted prompt
        against the clean prefix), else `example.prompt`. Only the concatenation matters, so an empty completion
        counts when the prefix is already a whole sentence (generated answers are never empty).
        """
        prefix = example.prompt if original_prompt is None else original_prompt
        return self.is_valid(prefix.split() + predicted_answer.split())

    def corrupt_prompt(self, prompt: str, rate: float, seed: int) -> str:
        """`prompt` with exactly `round(rate * n)` of its `n` tokens replaced by a different, uniformly drawn terminal.

        The positions are drawn without replacement; `round` is Python's (half to even). Deterministic per `seed`.
        """
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must lie in [0, 1], got {rate!r}")
        seed = _check_seed(seed)
        tokens = prompt.split()
        count = round(rate * len(tokens))
        if count == 0:
            return " ".join(tokens)
        rng = np.random.default_rng([seed, self._salt, 7])
        for position in rng.choice(len(tokens), size=count, replace=False).tolist():
            others = [terminal for terminal in CFG_TERMINALS if terminal != tokens[position]]
            tokens[position] = others[int(rng.integers(len(others)))]
        return " ".join(tokens)


# -- arithmetic word problems (GSM8K format) --------------------------------------------------------------------------

GSM8K_HUB_ID = "openai/gsm8k"
_NAMES = (  # (name, He, he, him, his)
    ("Tom", "He", "he", "him", "his"), ("Anna", "She", "she", "her", "her"), ("Ben", "He", "he", "him", "his"),
    ("Maria", "She", "she", "her", "her"), ("Sam", "He", "he", "him", "his"), ("Lily", "She", "she", "her", "her"),
    ("Omar", "He", "he", "him", "his"), ("Zoe", "She", "she", "her", "her"),
)
_OBJECTS = ("apples", "marbles", "stickers", "pencils", "cookies", "cards", "books", "shells")
_MULTIPLIER_WORDS = {2: "doubles", 3: "triples"}
# Question sentences per operation; {k} is the operand, {name}/{He}/{he}/{him}/{his} the person, {other} another.
_QUESTION_TEMPLATES = {
    "+": ("{He} buys {k} more {obj} .", "{He} finds {k} more {obj} .", "{other} gives {him} {k} more {obj} ."),
    "-": ("{He} gives {k} {obj} to {other} .", "{He} sells {k} {obj} .", "{He} loses {k} {obj} ."),
    "*": ("Then the number of {obj} {he} has {mult} .",),
    "/": ("{He} splits {his} {obj} equally into {k} groups and keeps one group .",),
}
_INTRO_TEMPLATE = "{name} has {a} {obj} ."
_QUESTION_END = "How many {obj} does {name} have now ?"
_SOLUTION_TEMPLATES = {
    "+": "{name} then has {a} + {k} = << {a} + {k} = {r} >> {r} {obj} .",
    "-": "{name} then has {a} - {k} = << {a} - {k} = {r} >> {r} {obj} .",
    "*": "{name} then has {a} * {k} = << {a} * {k} = {r} >> {r} {obj} .",
    "/": "{name} keeps {a} / {k} = << {a} / {k} = {r} >> {r} {obj} .",
}
_MAX_VALUE = 999  # every quantity, operand and result stays in 0 .. 999 (at most 3 digits)


def digit_tokens(value: int) -> str:
    """A non-negative integer written digit by digit: `digit_tokens(120) == "1 2 0"` (keeps the vocabulary closed)."""
    if value < 0:
        raise ValueError(f"value must be non-negative, got {value}")
    return " ".join(str(value))


_NUMBER = re.compile(r"^\s*(-?)\s*(\d[\d,]*(?:\s+\d[\d,]*)*)(?:\s*\.\s*(\d+))?")


def gsm8k_extract_answer(text: str) -> str | None:
    """The final answer of a GSM8K-style solution: the number after the last `####`, normalised, or None.

    Digits separated by spaces are re-joined (`#### 1 2` -> "12", the word-level format here), thousands commas are
    dropped (`#### 1,234` -> "1234", real GSM8K), leading zeros go (`0 7` -> "7"), a leading `-` and a decimal part
    are kept. None when there is no `####` or no number right after the last one.
    """
    if not isinstance(text, str) or "####" not in text:
        return None
    match = _NUMBER.match(text.rsplit("####", 1)[1])
    if match is None:
        return None
    sign, whole, fraction = match.group(1), re.sub(r"[\s,]", "", match.group(2)), match.group(3)
    whole = str(int(whole)) if whole else "0"
    number = whole + (f".{fraction.rstrip('0')}" if fraction and fraction.rstrip("0") else "")
    return "0" if number == "0" else sign + number


class ArithmeticWordProblems(ReasoningTask):
    """Multi-step arithmetic word problems in GSM8K's format, with a closed word-level vocabulary.

    A person starts with `a` objects and `min_steps .. max_steps` operations follow, each drawn uniformly among the
    ones that keep every value an integer in 0 .. 999: buys/finds/is given `k` more (`+`, k in 2..50), gives away /
    sells / loses `k` (`-`, k in 2..a-1, so the count stays positive), the count doubles/triples (`*`), or splits
    into `k` equal groups keeping one (`/`, k in 2..5 dividing the count). Prompt (question), e.g.::

        Tom has 5 apples . He buys 3 more apples . He gives 2 apples to Anna . How many apples does Tom have now ?

    Answer: one worked line per operation with a GSM8K calculator annotation, then `#### <answer>`::

        Tom then has 5 + 3 = << 5 + 3 = 8 >> 8 apples . Tom then has 8 - 2 = << 8 - 2 = 6 >> 6 apples . #### 6

    Every token is separated by spaces (the annotation `<<5+3=8>>` becomes `<< 5 + 3 = 8 >>`) and numbers are
    written digit by digit (12 -> `1 2`), so `vocab()` is finite and covers every generated token. Worked lines are
    joined by a space (GSM8K uses newlines; whitespace tokenisation treats both alike).

    Args:
        seed: default seed of `generate`.
        min_steps, max_steps: the number of operations per problem (1 <= min_steps <= max_steps).
    """

    name = "arithmetic"
    _salt = 303

    def __init__(self, seed: int = 0, min_steps: int = 2, max_steps: int = 4):
        if not isinstance(min_steps, int) or not isinstance(max_steps, int) or not 1 <= min_steps <= max_steps:
            raise ValueError(f"min_steps and max_steps must satisfy 1 <= min_steps <= max_steps, got {min_steps!r} "
                             f"and {max_steps!r}")
        self.seed = _check_seed(seed)
        self.min_steps, self.max_steps = min_steps, max_steps

    def __repr__(self) -> str:
        return f"ArithmeticWordProblems(seed={self.seed}, min_steps={self.min_steps}, max_steps={self.max_steps})"

    @staticmethod
    def _all_templates() -> list[str]:
        templates = [_INTRO_TEMPLATE, _QUESTION_END, *_SOLUTION_TEMPLATES.values()]
        return templates + [template for group in _QUESTION_TEMPLATES.values() for template in group]

    def vocab(self) -> list[str]:
        """Every token a problem or solution can hold: template words, names, pronouns, objects, digits, symbols."""
        words: dict[str, None] = {}
        for template in self._all_templates():
            for token in template.split():
                if not (token.startswith("{") and token.endswith("}")):
                    words[token] = None
        for person in _NAMES:
            words.update(dict.fromkeys(person))
        words.update(dict.fromkeys(_OBJECTS))
        words.update(dict.fromkeys(_MULTIPLIER_WORDS.values()))
        words.update(dict.fromkeys(str(d) for d in range(10)))
        words.update(dict.fromkeys(("+", "-", "*", "/", "=", "<<", ">>", "####")))
        return list(words)

    @staticmethod
    def _fill_longest(template: str) -> int:
        # Every placeholder is one word except numbers (at most 3 digit tokens); {k}/{mult} bounded the same way.
        return sum(3 if token in ("{a}", "{k}", "{r}") else 1 for token in template.split())

    @property
    def max_prompt_length(self) -> int:
        """An upper bound on question tokens: intro + `max_steps` of the longest operation sentence + the question."""
        longest = max(self._fill_longest(t) for group in _QUESTION_TEMPLATES.values() for t in group)
        return self._fill_longest(_INTRO_TEMPLATE) + self.max_steps * longest + self._fill_longest(_QUESTION_END)

    @property
    def max_answer_length(self) -> int:
        """An upper bound on solution tokens: `max_steps` of the longest worked line, `####` and 3 digits."""
        return self.max_steps * max(self._fill_longest(t) for t in _SOLUTION_TEMPLATES.values()) + 4

    def _generate_one(self, rng: np.random.Generator) -> ReasoningExample:
        person = int(rng.integers(len(_NAMES)))
        name, He, he, him, his = _NAMES[person]
        other = _NAMES[(person + 1 + int(rng.integers(len(_NAMES) - 1))) % len(_NAMES)][0]
        obj = _OBJECTS[int(rng.integers(len(_OBJECTS)))]
        value = int(rng.integers(2, 51))
        question = [_INTRO_TEMPLATE.format(name=name, a=digit_tokens(value), obj=obj)]
        solution = []
        for _ in range(int(rng.integers(self.min_steps, self.max_steps + 1))):
            feasible = ["+"]
            if value >= 3:
                feasible.append("-")
            if value * 2 <= _MAX_VALUE:
                feasible.append("*")
            if any(value % k == 0 and value // k >= 2 for k in range(2, 6)):
                feasible.append("/")
            op = feasible[int(rng.integers(len(feasible)))]
            if op == "+":
                k = int(rng.integers(2, min(50, _MAX_VALUE - value) + 1))
                result = value + k
            elif op == "-":
                k = int(rng.integers(2, value))
                result = value - k
            elif op == "*":
                choices = [k for k in _MULTIPLIER_WORDS if value * k <= _MAX_VALUE]
                k = choices[int(rng.integers(len(choices)))]
                result = value * k
            else:
                choices = [k for k in range(2, 6) if value % k == 0 and value // k >= 2]
                k = choices[int(rng.integers(len(choices)))]
                result = value // k
            templates = _QUESTION_TEMPLATES[op]
            template = templates[int(rng.integers(len(templates)))]
            question.append(template.format(
                He=He, he=he, him=him, his=his, other=other, obj=obj, k=digit_tokens(k), mult=_MULTIPLIER_WORDS.get(k)
            ))
            solution.append(_SOLUTION_TEMPLATES[op].format(
                name=name, a=digit_tokens(value), k=digit_tokens(k), r=digit_tokens(result), obj=obj
            ))
            value = result
        question.append(_QUESTION_END.format(obj=obj, name=name))
        solution.append(f"#### {digit_tokens(value)}")
        return ReasoningExample(" ".join(question), " ".join(solution))

    extract_answer = staticmethod(gsm8k_extract_answer)

    def score(self, example: ReasoningExample, predicted_answer: str) -> bool:
        """Whether the final numbers (`gsm8k_extract_answer`) agree; a prediction without `#### n` is wrong."""
        predicted = gsm8k_extract_answer(predicted_answer)
        return predicted is not None and predicted == gsm8k_extract_answer(example.answer)


def _is_offline() -> bool:
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(var, "").lower() in truthy for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def load_gsm8k(split: str = "test", hub_id: str = GSM8K_HUB_ID, **kwargs):
    """The real GSM8K (`openai/gsm8k`, config "main": `question`, `answer` columns) from the Hub. Online only.

    Offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set) this raises RuntimeError: use `ArithmeticWordProblems`, the
    synthetic stand-in with the same answer format.
    """
    import datasets

    if _is_offline():
        raise RuntimeError(
            f"load_gsm8k needs the Hub ({hub_id}) but HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set; unset them to "
            "download it, or use ArithmeticWordProblems() (load_reasoning_task('arithmetic')) for synthetic "
            "GSM8K-format problems offline"
        )
    try:
        dataset = datasets.load_dataset(hub_id, "main", split=split, **kwargs)
    except Exception as error:  # noqa: BLE001 - a network or Hub failure: say what to do instead
        raise RuntimeError(
            f"could not load {hub_id} ({type(error).__name__}: {error}); offline, use ArithmeticWordProblems()"
        ) from error
    logger.info("Loaded %s (%s) from the Hub", hub_id, split)
    return dataset


def gsm8k_few_shot_prompt(question: str, shots: Sequence[tuple[str, str]], k: int = 8) -> str:
    """The k-shot prompt: `"Question: {q}\\nAnswer: {a}\\n\\n"` for the first `k` shots, then
    `"Question: {question}\\nAnswer:"` (the usual GSM8K evaluation uses k=8 exemplars from the train split)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    shots = list(shots)
    if len(shots) < k:
        raise ValueError(f"shots must hold at least k={k} (question, answer) pairs, got {len(shots)}")
    for index, shot in enumerate(shots[:k]):
        if len(shot) != 2 or not all(isinstance(part, str) for part in shot):
            raise ValueError(f"shots[{index}] must be a (question, answer) pair of strings, got {shot!r}")
    blocks = [f"Question: {q.strip()}\nAnswer: {a.strip()}\n\n" for q, a in shots[:k]]
    return "".join(blocks) + f"Question: {question.strip()}\nAnswer:"


# ---------------------------------------------------------------------------------------------------------------------
# Factory and batching


REASONING_TASKS = {"tree_search": TreeSearchTask, "cfg": CfgTask, "arithmetic": ArithmeticWordProblems}


def load_reasoning_task(name: str, **kwargs) -> ReasoningTask:
    """A task by name: "tree_search" (`TreeSearchTask`), "cfg" (`CfgTask`), "arithmetic" (`ArithmeticWordProblems`);
    `kwargs` go to its constructor."""
    if name not in REASONING_TASKS:
        raise ValueError(f"name must be one of {sorted(REASONING_TASKS)}, got {name!r}")
    return REASONING_TASKS[name](**kwargs)


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
        raise ValueError(f"tokenizer must hold {REASONING_SPECIAL_TOKENS} with [PAD] as its pad token "
                         "(see build_reasoning_tokenizer)")
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
        raise ValueError(f"example {index}: the prompt has {int(prompt_lengths[index])} tokens, more than "
                         f"max_prompt_length={max_prompt_length} ({too_long.numel()} example(s) too long)")
    too_long = torch.nonzero(answer_lengths + 1 > max_answer_length).flatten()
    if too_long.numel():
        index = int(too_long[0])
        raise ValueError(f"example {index}: the answer has {int(answer_lengths[index])} tokens + [EOS], more than "
                         f"max_answer_length={max_answer_length} ({too_long.numel()} example(s) too long)")
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
    labels = torch.cat([torch.full_like(prompt_ids, IGNORE_INDEX), torch.full_like(separator, IGNORE_INDEX),
                        answer_ids.masked_fill(answer_mask == 0, IGNORE_INDEX)], dim=1)
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
    "ReasoningExample",
    "ReasoningTask",
    "TreeSearchTask",
    "build_reasoning_tokenizer",
    "check_known_tokens",
    "digit_tokens",
    "encode_reasoning_examples",
    "gsm8k_extract_answer",
    "gsm8k_few_shot_prompt",
    "load_gsm8k",
    "load_reasoning_task",
    "reasoning_dataset",
]
