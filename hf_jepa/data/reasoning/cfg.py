"""`CfgTask`: complete a prefix of a sentence of a fixed, nested context-free grammar (`CFG_GRAMMAR`), scored by an
exact LL(1) recogniser; `corrupt_prompt` for robustness curves (synthetic)."""

from collections.abc import Sequence

import numpy as np

from .common import ReasoningExample, ReasoningTask, _check_count, _check_seed, _example_rng

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
            raise ValueError(
                f"min_length and max_length must satisfy 3 <= min_length <= max_length, got "
                f"{min_length!r} and {max_length!r}"
            )
        if min_length == max_length and min_length % 2 == 0:
            raise ValueError(
                f"every sentence of the grammar has an odd length; min_length == max_length == {min_length} leaves none"
            )
        if not isinstance(max_depth, int) or max_depth < 1:
            raise ValueError(f"max_depth must be an integer >= 1, got {max_depth!r}")
        self.seed = _check_seed(seed)
        self.min_length, self.max_length, self.max_depth = min_length, max_length, max_depth

    def __repr__(self) -> str:
        return (
            f"CfgTask(seed={self.seed}, min_length={self.min_length}, max_length={self.max_length}, "
            f"max_depth={self.max_depth})"
        )

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
        if (
            isinstance(prefix_fraction, bool)
            or not isinstance(prefix_fraction, (int, float))
            or not (0.0 < prefix_fraction < 1.0)
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
