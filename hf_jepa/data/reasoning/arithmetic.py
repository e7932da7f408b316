"""Arithmetic word problems in GSM8K's format: the synthetic `ArithmeticWordProblems` (the offline stand-in for
GSM8K), GSM8K's answer and few-shot prompt formats, and `load_gsm8k`, an online-only loader of the real GSM8K."""

import logging
import re
from collections.abc import Sequence

import numpy as np

from ..sources import GSM8K_HUB_ID, is_offline
from .common import ReasoningExample, ReasoningTask, _check_seed

logger = logging.getLogger(__name__)


_NAMES = (  # (name, He, he, him, his)
    ("Tom", "He", "he", "him", "his"),
    ("Anna", "She", "she", "her", "her"),
    ("Ben", "He", "he", "him", "his"),
    ("Maria", "She", "she", "her", "her"),
    ("Sam", "He", "he", "him", "his"),
    ("Lily", "She", "she", "her", "her"),
    ("Omar", "He", "he", "him", "his"),
    ("Zoe", "She", "she", "her", "her"),
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


# After `####`: an optional sign and `$`, then digits that may be split by spaces/tabs (the word-level format writes
# 72 as "7 2") and by thousands commas (real GSM8K: "1,000"; word-level: "1 , 0 0 0"), then an optional decimal part.
# Newlines never join digits: "#### 7\n2" is 7.
_NUMBER = re.compile(r"^[ \t]*(-?)[ \t]*\$?[ \t]*(\d(?:[ \t]*,?[ \t]*\d)*)?(?:[ \t]*\.[ \t]*(\d(?:[ \t]*\d)*))?")


def gsm8k_extract_answer(text: str) -> str | None:
    """The final answer of a GSM8K-style solution: the number after the last `####`, normalised, or None.

    Digits separated by spaces are re-joined (`#### 1 2` -> "12", the word-level format here), thousands commas are
    dropped (`#### 1,234` and `#### 1 , 2 3 4` -> "1234"), a `$` is skipped (`#### $5`, `#### -$5` -> "-5"), leading
    zeros and trailing decimal zeros go (`0 7` -> "7", `2.50` -> "2.5", `.5` -> "0.5"), a leading `-` and a decimal
    part are kept (`2 . 7 5` -> "2.75"); text after the number is ignored (`#### 72 apples` -> "72"). None when there
    is no `####` or no number right after the last one.
    """
    if not isinstance(text, str) or "####" not in text:
        return None
    match = _NUMBER.match(text.rsplit("####", 1)[1])
    sign, whole, fraction = match.group(1), match.group(2), match.group(3)
    if whole is None and fraction is None:
        return None
    whole = str(int(re.sub(r"[ \t,]", "", whole))) if whole else "0"
    fraction = re.sub(r"[ \t]", "", fraction or "").rstrip("0")
    number = whole + (f".{fraction}" if fraction else "")
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
            raise ValueError(
                f"min_steps and max_steps must satisfy 1 <= min_steps <= max_steps, got {min_steps!r} and {max_steps!r}"
            )
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
            question.append(
                template.format(
                    He=He,
                    he=he,
                    him=him,
                    his=his,
                    other=other,
                    obj=obj,
                    k=digit_tokens(k),
                    mult=_MULTIPLIER_WORDS.get(k),
                )
            )
            solution.append(
                _SOLUTION_TEMPLATES[op].format(
                    name=name, a=digit_tokens(value), k=digit_tokens(k), r=digit_tokens(result), obj=obj
                )
            )
            value = result
        question.append(_QUESTION_END.format(obj=obj, name=name))
        solution.append(f"#### {digit_tokens(value)}")
        return ReasoningExample(" ".join(question), " ".join(solution))

    extract_answer = staticmethod(gsm8k_extract_answer)

    def score(self, example: ReasoningExample, predicted_answer: str) -> bool:
        """Whether the final numbers (`gsm8k_extract_answer`) agree; a prediction without `#### n` is wrong."""
        predicted = gsm8k_extract_answer(predicted_answer)
        return predicted is not None and predicted == gsm8k_extract_answer(example.answer)


def load_gsm8k(split: str = "test", hub_id: str = GSM8K_HUB_ID, **kwargs):
    """The real GSM8K (`openai/gsm8k`, config "main": `question`, `answer` columns) from the Hub. Online only.

    Offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set) this raises RuntimeError: use `ArithmeticWordProblems`, the
    synthetic stand-in with the same answer format.
    """
    import datasets

    if is_offline():
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
    `"Question: {question}\\nAnswer:"` (the usual GSM8K evaluation uses k=8 exemplars from the train split; k=0 is
    the zero-shot prompt). ValueError when `shots` holds fewer than `k` pairs."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    shots = list(shots)
    if len(shots) < k:
        raise ValueError(f"shots must hold at least k={k} (question, answer) pairs, got {len(shots)}")
    for index, shot in enumerate(shots[:k]):
        if len(shot) != 2 or not all(isinstance(part, str) for part in shot):
            raise ValueError(f"shots[{index}] must be a (question, answer) pair of strings, got {shot!r}")
    blocks = [f"Question: {q.strip()}\nAnswer: {a.strip()}\n\n" for q, a in shots[:k]]
    return "".join(blocks) + f"Question: {question.strip()}\nAnswer:"
