"""Text for T-JEPA: an offline English corpus, WordPiece tokenizers, downstream tasks and a synthetic ambiguity corpus.

Sources (`load_text_corpus`):

- `"embedded"` (the offline default): real English prose extracted from CPython's bundled documentation,
  `pydoc_data.topics.topics` (79 topics on Python 3.11, ~465 kB of reStructuredText rendered as plain text; the same
  text `help("assert")` prints). `embedded_sentences()` turns it into clean sentences, see below. Each sentence keeps
  its pydoc topic, and `TOPIC_GROUPS` maps the topics to a handful of coarse classes (the `label` column).
- `"c4"`: the first sentences of `allenai/c4` (`en`), streamed with `datasets.load_dataset(..., streaming=True)`;
  online only.
- a local path: a `save_to_disk` folder, a parquet / arrow / json(l) / csv file, a folder of `{split}.parquet` /
  `{split}.arrow` files, or a `.txt` file with one sentence per line. It needs a `text` column (`label` is kept).

Sentence extraction from the pydoc text (`embedded_sentences`), in order:

1. The text is cut into blocks at blank lines. Section headings (a title line followed by an underline row of
   `*`, `=`, `-`, `~`, `^`, `+`) are removed; blocks holding doctests (`>>>`), grammar productions (`::=`) or
   tables (rows starting with `+-`/`+=` or `|`) are dropped.
2. Indentation decides what is prose. reStructuredText renders a `::` literal block as a paragraph ending in ":"
   (or, for ` ::`, simply unfinished: "... is equivalent to") followed by a deeper-indented block: such a block, and
   every later block at least as deep, is code and dropped. Other deeper blocks are prose, notably the body of a
   definition term: a signature line such as `str.casefold()` or `class dict(**kwargs)`, a term such as
   `Integers ("int")` or `"__file__"`, or an admonition such as `Note:` (the term line itself is dropped). Bullet
   markers (`*`, `-`, `+`, `1.`, `(a)`) are stripped and each item becomes its own paragraph; footnote markers
   (`[1]`) and emphasis asterisks (`*word*`, `**words**`) are removed, typographic quotes become ASCII. Code that
   slips through (a literal block not announced by a colon) fails the sentence filter of step 5.
3. Wrapped lines are joined with a space, except after a letter + `-` line break (`built-` / `in` -> `built-in`).
4. Sentences (`split_sentences`): a paragraph is split after `.`, `!` or `?` (optionally followed by closing quotes or
   brackets) when whitespace and then an uppercase letter or an opening double quote follow, unless the word ending in
   the period is an abbreviation (`e.g.`, `i.e.`, `cf.`, `vs.`, `viz.`, `approx.`, `resp.`). So "e.g. "list"" stays
   whole, while "etc. The" is a sentence end.
5. A sentence is kept when it starts with an uppercase letter or a double quote, ends with `.`, `!` or `?`, has
   `min_words..max_words` whitespace-separated words, and is mostly alphabetic: at least 75% of its words are made of
   letters (after stripping surrounding punctuation and quotes; inner `-` and `'` allowed).
6. The same sentence appears in several topics (`compound` repeats `if`, `while`, ...; `specialnames` repeats
   `customization`, ...; `if` and `else` are the same page). Each distinct sentence is kept once, under the most
   specific topic holding it: the one with the shortest page text, ties broken by topic name.

On CPython 3.11.7 this gives 2,103 sentences (2,649 before de-duplication; mean 18.0 words) from 77 of the 79 topics,
in classes statements 464 / expressions 267 / lexical 146 / data_model 629 / builtin_types 365 / execution 232;
`load_text_corpus("embedded")` cuts them into 1,682 / 210 / 211 train / validation / test sentences, and a WordPiece
tokenizer trained on the train split has 3,106 tokens (below the 8,000 default cap: the corpus is small). Other
Python versions bundle other documentation and give other counts (topics the mapping does not know go to "other").

Downstream tasks built offline from the embedded corpus: `topic_classification_task` (coarse topic class of a
sentence) and `retrieval_task` (next-sentence retrieval); thin online loaders for the T-JEPA paper's downstream sets:
`load_imdb`, `load_snli`, `load_fever`, `load_ms_marco`.

`AmbiguityCorpus` is synthetic: template sentences whose masked slot has exactly `ambiguity` equally likely fillers
given the rest of the sentence, a knob on the conditional entropy (log(ambiguity) nats) of the target.
"""

import heapq
import logging
import math
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import datasets
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value


logger = logging.getLogger(__name__)

TEXT_ENV_VAR = "HF_JEPA_TEXT"
C4_HUB_ID = "allenai/c4"
SPLIT_NAMES = ("train", "validation", "test")

# Coarse classes of the pydoc topics for `topic_classification_task`: one explicit entry per topic of CPython 3.11's
# `pydoc_data.topics` (79 topics). Sections follow the Python Language Reference / Library Reference chapters the
# topics come from. A topic missing here (another Python version) is put in "other".
TOPIC_GROUPS: dict[str, tuple[str, ...]] = {
    # Language Reference ch. 7-8: simple and compound statements.
    "statements": (
        "assert", "assignment", "async", "augassign", "break", "class", "compound", "continue", "del", "else",
        "for", "function", "global", "if", "import", "nonlocal", "pass", "raise", "return", "try", "while",
        "with", "yield",
    ),
    # Language Reference ch. 6: expressions and operators.
    "expressions": (
        "atom-identifiers", "atom-literals", "attribute-references", "await", "binary", "bitwise", "booleans",
        "calls", "comparisons", "conversions", "dict", "exprlists", "in", "lambda", "lists", "operator-summary",
        "power", "shifting", "slicings", "subscriptions", "unary",
    ),
    # Language Reference ch. 2 (lexical analysis: identifiers and literals) and the format-string mini-language.
    "lexical": (
        "floating", "formatstrings", "id-classes", "identifiers", "imaginary", "integers", "numbers", "strings",
    ),
    # Language Reference ch. 3: the data model and special methods.
    "data_model": (
        "attribute-access", "callable-types", "context-managers", "customization", "numeric-types", "objects",
        "sequence-types", "specialattrs", "specialnames", "types",
    ),
    # Library Reference "Built-in Types".
    "builtin_types": (
        "bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object", "bltin-type-objects", "string-methods",
        "truth", "typesfunctions", "typesmapping", "typesmethods", "typesmodules", "typesseq", "typesseq-mutable",
    ),
    # Language Reference ch. 4 (execution model, names, exceptions) and the debugger.
    "execution": ("debugger", "dynamic-features", "exceptions", "execmodel", "naming"),
}
OTHER_GROUP = "other"
COARSE_LABELS: tuple[str, ...] = tuple(TOPIC_GROUPS) + (OTHER_GROUP,)
_TOPIC_TO_GROUP = {topic: group for group, topics in TOPIC_GROUPS.items() for topic in topics}


def topic_groups() -> dict[str, str]:
    """pydoc topic -> coarse class, for every topic of this Python's `pydoc_data.topics` (unknown ones: "other")."""
    from pydoc_data.topics import topics

    return {topic: topic_group(topic) for topic in sorted(topics)}


def topic_group(topic: str) -> str:
    """The coarse class of one pydoc topic (`TOPIC_GROUPS`), `"other"` for a topic the mapping does not list."""
    return _TOPIC_TO_GROUP.get(topic, OTHER_GROUP)


# ---------------------------------------------------------------------------------------------------------------------
# Sentence extraction


_UNDERLINE = re.compile(r"^\s*([*=\-~^+#])\1{2,}\s*$")
_BULLET = re.compile(r"^(\s*)([*\-+\u2022]|\d+\.|\(\w\)|\w\))\s+(?=\S)")
_FOOTNOTE = re.compile(r"\s*\[\d+\]")
_STRONG = re.compile(r"(?<![\w*\"'])\*\*(\w[^*]*?)\*\*(?![\w*\"'])")
_EMPHASIS = re.compile(r"(?<![\w*\"'])\*{1,2}(\w(?:[^*]*?\w)?)\*{1,2}(?![\w*\"'])")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+(?=[A-Z\"])")
_ABBREVIATIONS = {"e.g.", "i.e.", "cf.", "vs.", "viz.", "approx.", "resp."}
_TERMINAL = re.compile(r"[.!?][\"')\]]*$")
_CODE_LINE = re.compile(r"^\s*(>>>|\+[-=]{3,}|\|)|.*::=")  # doctests, tables, grammar productions
_ADMONITION = re.compile(
    r"^(note|warning|tip|hint|important|caution|attention|see also|seealso|deprecated)\b.*:$", re.IGNORECASE
)
_TYPOGRAPHIC = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2026": "..."})
_WORD_STRIP = "\"'()[]{},.;:!?*`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blocks(text: str) -> list[list[str]]:
    blocks, current = [], []
    for line in text.splitlines():
        if line.strip():
            current.append(line.rstrip())
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _drop_headings(block: list[str]) -> list[str]:
    kept, index = [], 0
    while index < len(block):
        if index + 1 < len(block) and _UNDERLINE.match(block[index + 1]) and not _UNDERLINE.match(block[index]):
            index += 2  # title + underline
        elif _UNDERLINE.match(block[index]):
            index += 1  # an overline or a stray rule
        else:
            kept.append(block[index])
            index += 1
    return kept


def _is_code_or_table(block: list[str]) -> bool:
    return any(_CODE_LINE.match(line) for line in block)


def _ends_sentence(line: str) -> bool:
    return bool(re.search(r"[\w\"')\]*][.!?][\"')\]]*$", line.rstrip()))  # "f(x[, ...])" does not


def _is_term(lines: list[str]) -> bool:
    """A definition term, signature or admonition heading: the next, deeper-indented block is its (prose) body.

    One short line that does not end a sentence or with ":" (`str.casefold()`, `"__file__"`, `Integers ("int")`),
    an admonition (`Note:`), or several lines that all look like signatures (`class dict(**kwargs)` overloads).
    """
    last = lines[-1].strip()
    if len(lines) == 1:
        return bool(_ADMONITION.match(last)) or (
            len(last.split()) <= 12 and not _ends_sentence(last) and not last.endswith(":")
        )
    return all(re.search(r"\w\(.*\)\]?$", line.strip()) for line in lines)


def _join(lines: list[str]) -> str:
    text = ""
    for line in lines:
        piece = line.strip()
        if not text:
            text = piece
        elif re.search(r"[A-Za-z]-$", text):
            text += piece  # a word broken at its hyphen by the text wrapper: "built-" + "in"
        else:
            text += " " + piece
    return text


def _paragraphs(text: str):
    """Yield the prose paragraphs of one pydoc page (steps 1-3 of the module docstring)."""
    prose_indent, prose_colon = 0, False  # indentation of the last prose paragraph, and whether it ended with ":"
    term_indent = None  # set after a definition term: a deeper block is its (prose) body
    code_indent = None  # set inside a literal block: blocks at least this deep continue it
    for block in _blocks(text):
        block = _drop_headings(block)
        if not block:
            continue
        indent = _indent(block[0])
        if term_indent is not None and indent > term_indent:
            code_indent = None  # the body of a definition term is prose
        elif code_indent is not None and indent >= code_indent:
            continue  # a literal block going on after a blank line
        elif indent > prose_indent and prose_colon:
            code_indent = indent  # rst `::` -> a trailing ":" and an indented literal block
            continue
        else:
            code_indent = None
        term_indent = None
        if _is_code_or_table(block):
            continue
        # A term and its body in one block: `Integers ("int")` then 3-space-indented description lines.
        head = [line for line in block if _indent(line) == indent]
        if len(head) < len(block) and block[: len(head)] == head and not _BULLET.match(block[0]) and _is_term(head):
            block = block[len(head) :]
            indent = _indent(block[0])
        elif not _BULLET.match(block[0]) and _is_term(block):
            term_indent = indent
            continue
        # A paragraph ending in ":" (rst `::`) or unfinished ("... is equivalent to") announces a literal block.
        prose_indent, prose_colon = indent, not _ends_sentence(block[-1])
        # Bullet items: each marker line starts a new item; continuation lines are indented under the text.
        items, current = [], []
        for line in block:
            if _BULLET.match(line) and _indent(line) == indent and current:
                items.append(current)
                current = []
            current.append(_BULLET.sub(r"\1", line, count=1) if not current else line)
        items.append(current)
        for item in items:
            yield _join(item)


def split_sentences(paragraph: str) -> list[str]:
    """Split a paragraph at `[.!?]` + whitespace + an uppercase letter or `"`, keeping abbreviations intact."""
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        end = match.start() + 1
        last_word = paragraph[start:end].rsplit(None, 1)[-1].lstrip("(\"'").lower()
        if last_word in _ABBREVIATIONS:
            continue
        sentences.append(paragraph[start : match.end()].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _clean(sentence: str) -> str:
    sentence = sentence.translate(_TYPOGRAPHIC)
    sentence = _FOOTNOTE.sub("", sentence)
    sentence = _STRONG.sub(r"\1", sentence)
    sentence = _EMPHASIS.sub(r"\1", sentence)
    return re.sub(r"\s+", " ", sentence).strip()


def is_clean_sentence(sentence: str, min_words: int = 5, max_words: int = 64, min_alpha: float = 0.75) -> bool:
    """Step 5 of the module docstring: capitalised, terminated, `min_words..max_words` words, mostly alphabetic."""
    words = sentence.split()
    if not min_words <= len(words) <= max_words:
        return False
    if not (sentence[0].isupper() or sentence[0] == '"') or not _TERMINAL.search(sentence):
        return False
    alphabetic = sum(1 for word in words if re.fullmatch(r"[A-Za-z]+(?:['-][A-Za-z]+)*", word.strip(_WORD_STRIP)))
    return alphabetic >= min_alpha * len(words)


def extract_sentences(page: str, min_words: int = 5, max_words: int = 64) -> list[str]:
    """The clean sentences of one pydoc page, in reading order (steps 1-5 of the module docstring)."""
    kept = []
    for paragraph in _paragraphs(page):
        for sentence in split_sentences(paragraph):
            sentence = _clean(sentence)
            if sentence and is_clean_sentence(sentence, min_words, max_words):
                kept.append(sentence)
    return kept


def embedded_sentences(min_words: int = 5, max_words: int = 64) -> list[dict]:
    """Clean English sentences from CPython's bundled docs (`pydoc_data.topics`), in a deterministic order.

    Rows `{"text", "topic", "position"}`: `topic` is the pydoc topic key, `position` the index of the sentence among the
    sentences kept for that topic, in reading order (rows are sorted by topic, then position). See the module
    docstring for the extraction rules and the de-duplication across topics.
    """
    if min_words < 1 or max_words < min_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got min_words={min_words}, max_words={max_words}")
    from pydoc_data.topics import topics

    candidates = {topic: extract_sentences(topics[topic], min_words, max_words) for topic in sorted(topics)}
    # Each distinct sentence once, under the most specific topic holding it (shortest page, then name).
    owner: dict[str, str] = {}
    for topic in sorted(topics, key=lambda name: (len(topics[name]), name)):
        for sentence in candidates[topic]:
            owner.setdefault(sentence, topic)
    rows = []
    for topic in sorted(topics):
        position = 0
        for sentence in candidates[topic]:
            if owner.get(sentence) == topic:
                del owner[sentence]  # a repeat inside the same page is kept once too
                rows.append({"text": sentence, "topic": topic, "position": position})
                position += 1
    return rows


# ---------------------------------------------------------------------------------------------------------------------
# Corpus loading


def _is_offline() -> bool:
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(var, "").lower() in truthy for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _split(dataset: Dataset, split_seed: int, fractions: tuple[float, float, float]) -> DatasetDict:
    """A seeded shuffle cut into train/validation/test; each split keeps the rows' original order."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
        raise ValueError(f"split_fractions must be three non-negative numbers summing to 1, got {fractions}")
    count = len(dataset)
    order = np.random.default_rng(split_seed).permutation(count)
    num_train = int(round(count * fractions[0]))
    num_validation = int(round(count * fractions[1]))
    parts = (order[:num_train], order[num_train : num_train + num_validation], order[num_train + num_validation :])
    return DatasetDict({name: dataset.select(np.sort(part)) for name, part in zip(SPLIT_NAMES, parts)})


def embedded_text_dataset(min_words: int = 5, max_words: int = 64) -> Dataset:
    """`embedded_sentences` as one `Dataset`: `text`, `topic`, `position` and the coarse class `label`."""
    rows = embedded_sentences(min_words, max_words)
    features = Features(
        {
            "text": Value("string"),
            "topic": Value("string"),
            "position": Value("int32"),
            "label": ClassLabel(names=list(COARSE_LABELS)),
        }
    )
    return Dataset.from_dict(
        {
            "text": [row["text"] for row in rows],
            "topic": [row["topic"] for row in rows],
            "position": [row["position"] for row in rows],
            "label": [COARSE_LABELS.index(topic_group(row["topic"])) for row in rows],
        },
        features=features,
    )


def _c4_sentences(num_sentences: int, min_words: int, max_words: int) -> Dataset:
    if _is_offline():
        raise RuntimeError(
            f"source='c4' streams {C4_HUB_ID} from the Hub, but HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set; "
            "use source='embedded' (the offline corpus) or a local file"
        )
    try:
        stream = datasets.load_dataset(C4_HUB_ID, "en", split="train", streaming=True)
        texts = []
        for document in stream:
            for paragraph in document["text"].split("\n"):
                for sentence in split_sentences(paragraph.strip()):
                    sentence = _clean(sentence)
                    if sentence and is_clean_sentence(sentence, min_words, max_words):
                        texts.append(sentence)
            if len(texts) >= num_sentences:
                break
    except Exception as error:  # noqa: BLE001 - any network failure: say what to do instead
        raise RuntimeError(
            f"could not stream {C4_HUB_ID} ({type(error).__name__}: {error}); use source='embedded' offline"
        ) from error
    return Dataset.from_dict({"text": texts[:num_sentences]})


def _load_local(path: Path, split_seed: int, fractions) -> tuple[DatasetDict, str]:
    suffixes = "".join(path.suffixes).lower()
    if path.is_dir() and (path / "dataset_dict.json").exists():
        loaded = datasets.load_from_disk(str(path))
        if set(loaded) == set(SPLIT_NAMES):
            return DatasetDict({name: loaded[name] for name in SPLIT_NAMES}), "save_to_disk DatasetDict"
        merged = datasets.concatenate_datasets([loaded[name] for name in sorted(loaded)])
        return _split(merged, split_seed, fractions), f"save_to_disk DatasetDict {sorted(loaded)} re-split"
    if path.is_dir() and (path / "state.json").exists():
        return _split(datasets.load_from_disk(str(path)), split_seed, fractions), "save_to_disk Dataset"
    if path.is_dir():
        for extension in ("parquet", "arrow"):
            files = {name: path / f"{name}.{extension}" for name in SPLIT_NAMES}
            if all(f.exists() for f in files.values()):
                loaded = datasets.load_dataset(extension, data_files={k: str(v) for k, v in files.items()})
                return DatasetDict({name: loaded[name] for name in SPLIT_NAMES}), f"{extension} split files"
        raise FileNotFoundError(
            f"text source {str(path)!r} is a folder but not a `save_to_disk` directory nor a folder holding "
            "train/validation/test .parquet or .arrow files"
        )
    if suffixes.endswith(".txt"):
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        return _split(Dataset.from_dict({"text": [line for line in lines if line]}), split_seed, fractions), "txt"
    builders = {".parquet": "parquet", ".arrow": "arrow", ".jsonl": "json", ".json": "json", ".csv": "csv"}
    for suffix, builder in builders.items():
        if suffixes.endswith(suffix):
            loaded = datasets.load_dataset(builder, data_files=str(path), split="train")
            return _split(loaded, split_seed, fractions), builder
    raise ValueError(
        f"text source {str(path)!r}: unsupported file type; use .txt (one sentence per line), .parquet, .arrow, "
        ".json/.jsonl, .csv or a `save_to_disk` folder"
    )


def load_text_corpus(
    source: str | os.PathLike | None = None,
    split_seed: int = 0,
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    num_sentences: int = 100_000,
    min_words: int = 5,
    max_words: int = 64,
) -> DatasetDict:
    """A sentence corpus as a `DatasetDict` with `train` / `validation` / `test` splits and a `text` column.

    Args:
        source: `"embedded"` (CPython's docs, offline; columns `text`, `topic`, `position`, `label`), `"c4"` (the first
            `num_sentences` sentences of `allenai/c4` `en`, streamed; online only), or a local path (see the module
            docstring). `None`: `$HF_JEPA_TEXT` when set, else `"embedded"` (never the network implicitly).
        split_seed: seed of the shuffle that cuts a single-split source into train/validation/test.
        split_fractions: train/validation/test fractions of that cut (rows keep their source order within a split).
        num_sentences: how many sentences to take from C4.
        min_words, max_words: sentence length filter for the embedded and C4 sources.

    The source used is logged and stored in each split's `info.description` (`text_source_description`).
    """
    if source is None and os.environ.get(TEXT_ENV_VAR):
        source = os.environ[TEXT_ENV_VAR]
        logger.info("text source from $%s", TEXT_ENV_VAR)
    if source is None or source == "embedded":
        corpus = _split(embedded_text_dataset(min_words, max_words), split_seed, split_fractions)
        description = "embedded CPython documentation sentences (pydoc_data.topics)"
    elif source == "c4":
        if num_sentences < 1:
            raise ValueError(f"num_sentences must be >= 1, got {num_sentences}")
        corpus = _split(_c4_sentences(num_sentences, min_words, max_words), split_seed, split_fractions)
        description = f"Hub {C4_HUB_ID} (en, streamed, first {num_sentences} sentences)"
    else:
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"text source path {str(path)!r} does not exist (or use 'embedded' / 'c4')")
        corpus, kind = _load_local(path, split_seed, split_fractions)
        description = f"local {path} ({kind})"
    for name, split in corpus.items():
        if "text" not in split.column_names:
            raise ValueError(f"text source {description}: split {name!r} has no 'text' column ({split.column_names})")
        split.info.description = description
    logger.info("Loaded text corpus from %s: %s", description, {k: v.num_rows for k, v in corpus.items()})
    return corpus


def text_source_description(corpus: DatasetDict) -> str:
    return next(iter(corpus.values())).info.description or "unknown"


# ---------------------------------------------------------------------------------------------------------------------
# Tokenizer


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
        models.WordPiece({token: index for index, token in enumerate(vocab)}, unk_token="[UNK]",
                         continuing_subword_prefix="##")
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


# ---------------------------------------------------------------------------------------------------------------------
# Downstream tasks (offline, from the embedded corpus)


@dataclass
class TopicClassificationTask:
    """Sentence -> coarse pydoc topic class (`TOPIC_GROUPS`); `labels` index `label_names`."""

    train_texts: list[str]
    train_labels: list[int]
    test_texts: list[str]
    test_labels: list[int]
    label_names: list[str]

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


def topic_classification_task(
    corpus: DatasetDict | None = None, train_split: str = "train", test_split: str = "test"
) -> TopicClassificationTask:
    """Coarse topic classification on the embedded corpus (default: `load_text_corpus("embedded")`).

    Built offline from the CPython docs: the label of a sentence is the `TOPIC_GROUPS` class of its pydoc topic. A
    probe trained on `train_split` and scored on `test_split` measures how much topical information the frozen encoder
    keeps. Chance is the majority class share (the classes are unbalanced: report it next to the accuracy).
    """
    corpus = load_text_corpus("embedded") if corpus is None else corpus
    for split in (train_split, test_split):
        if split not in corpus:
            raise ValueError(f"split {split!r} not in the corpus (splits: {list(corpus)})")
        if "label" not in corpus[split].column_names:
            raise ValueError(f"corpus split {split!r} has no 'label' column: use the embedded corpus")
    label_feature = corpus[train_split].features["label"]
    names = list(label_feature.names) if isinstance(label_feature, ClassLabel) else sorted(
        {str(v) for v in corpus[train_split]["label"]}
    )
    return TopicClassificationTask(
        train_texts=list(corpus[train_split]["text"]),
        train_labels=[int(v) for v in corpus[train_split]["label"]],
        test_texts=list(corpus[test_split]["text"]),
        test_labels=[int(v) for v in corpus[test_split]["label"]],
        label_names=names,
    )


@dataclass
class RetrievalTask:
    """Queries, a document pool, and for each query the indices of its relevant documents (exactly one here)."""

    queries: list[str]
    documents: list[str]
    positives: list[list[int]]
    query_topics: list[str] = field(default_factory=list)

    def relevance(self):
        """Dense `(num_queries, num_documents)` bool relevance matrix."""
        import torch

        matrix = torch.zeros(len(self.queries), len(self.documents), dtype=torch.bool)
        for query, positives in enumerate(self.positives):
            matrix[query, positives] = True
        return matrix


def retrieval_task(corpus=None, num_queries: int | None = 500, seed: int = 0) -> RetrievalTask:
    """Next-sentence retrieval built offline from the embedded corpus (paraphrase-free).

    A query is a sentence; its one relevant document is the NEXT sentence of the same pydoc topic (the row with the
    same `topic` and `position + 1`). Queries are drawn (seeded) among sentences that have a successor, such that no
    query is another query's positive; the document pool is every other sentence of `corpus` (positives and
    distractors alike), so no query text is in the pool and every query has exactly one positive (sentence texts are
    unique in the embedded corpus). The encoder is frozen: this probes whether embeddings keep the discourse
    continuity that a next sentence shares with its predecessor.

    Args:
        corpus: rows with `text`, `topic`, `position`: a list of dicts, a `Dataset`, or a `DatasetDict` (all splits
            are pooled, so consecutive sentences are found whatever the split). Default: `embedded_sentences()`.
        num_queries: how many queries (None: as many as the rule allows).
        seed: seed of the query draw.
    """
    if corpus is None:
        rows = embedded_sentences()
    elif isinstance(corpus, DatasetDict):
        rows = [row for name in corpus for row in corpus[name]]
    else:
        rows = list(corpus)
    missing = {"text", "topic", "position"} - set(rows[0] if rows else {})
    if not rows or missing:
        raise ValueError(
            f"corpus rows need 'text', 'topic' and 'position' (missing {sorted(missing)}): use the embedded corpus"
        )
    texts = [row["text"] for row in rows]
    if len(set(texts)) != len(texts):
        raise ValueError("corpus texts must be unique for unambiguous relevance")
    where = {(row["topic"], int(row["position"])): index for index, row in enumerate(rows)}
    successor = {index: where.get((row["topic"], int(row["position"]) + 1)) for index, row in enumerate(rows)}
    candidates = [index for index in sorted(successor) if successor[index] is not None]
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    chosen_set: set[int] = set()
    positive_set: set[int] = set()
    for index in rng.permutation(candidates):
        index = int(index)
        if successor[index] in chosen_set or index in positive_set:
            continue  # a query must never be (or have as positive) another query
        chosen.append(index)
        chosen_set.add(index)
        positive_set.add(successor[index])
        if num_queries is not None and len(chosen) == num_queries:
            break
    if num_queries is not None and len(chosen) < num_queries:
        raise ValueError(f"num_queries={num_queries} but the corpus allows only {len(chosen)} queries")
    documents = [index for index in range(len(rows)) if index not in chosen_set]
    document_position = {index: position for position, index in enumerate(documents)}
    return RetrievalTask(
        queries=[texts[index] for index in chosen],
        documents=[texts[index] for index in documents],
        positives=[[document_position[successor[index]]] for index in chosen],
        query_topics=[rows[index]["topic"] for index in chosen],
    )


# ---------------------------------------------------------------------------------------------------------------------
# Online loaders for the T-JEPA paper's downstream sets


IMDB_HUB_ID = "stanfordnlp/imdb"
SNLI_HUB_ID = "stanfordnlp/snli"
FEVER_HUB_ID = "mteb/fever"
MS_MARCO_HUB_ID = "microsoft/ms_marco"


def _load_online(hub_id: str, *args, **kwargs):
    if _is_offline():
        raise RuntimeError(
            f"{hub_id} is only on the Hub and HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set; unset them to download it, "
            "or evaluate offline with topic_classification_task() / retrieval_task() on the embedded corpus"
        )
    try:
        dataset = datasets.load_dataset(hub_id, *args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a network or Hub failure: say what to do instead
        raise RuntimeError(
            f"could not load {hub_id} ({type(error).__name__}: {error}); offline, use topic_classification_task() "
            "or retrieval_task() on the embedded corpus"
        ) from error
    logger.info("Loaded %s from the Hub", hub_id)
    return dataset


def load_imdb(hub_id: str = IMDB_HUB_ID, **kwargs):
    """IMDB sentiment (`stanfordnlp/imdb`: 25k train / 25k test reviews, `text` + `label`). Online only."""
    return _load_online(hub_id, **kwargs)


def load_snli(hub_id: str = SNLI_HUB_ID, **kwargs):
    """SNLI (`stanfordnlp/snli`: `premise`, `hypothesis`, `label`, -1 where there is no gold label). Online only."""
    return _load_online(hub_id, **kwargs)


def load_fever(name: str = "default", hub_id: str = FEVER_HUB_ID, **kwargs):
    """FEVER in its BEIR/MTEB retrieval form (`mteb/fever`; configs `default` = qrels, `corpus`, `queries`). Online
    only. Pass another `hub_id` (and `name`) for a claim-verification version."""
    return _load_online(hub_id, name, **kwargs)


def load_ms_marco(name: str = "v1.1", hub_id: str = MS_MARCO_HUB_ID, **kwargs):
    """MS MARCO passage ranking (`microsoft/ms_marco`, config `v1.1` or `v2.1`). Online only."""
    return _load_online(hub_id, name, **kwargs)


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic conditional-ambiguity corpus


AMBIGUITY_SUBJECTS = (
    "cat", "dog", "fox", "owl", "goat", "horse", "rabbit", "mouse", "duck", "sheep", "bear", "wolf", "deer", "frog",
    "lion", "tiger", "monkey", "zebra", "camel", "otter", "badger", "beaver", "parrot", "pigeon", "turtle", "snake",
    "squirrel", "hamster", "donkey", "llama", "panda", "koala",
)
AMBIGUITY_OBJECTS = (
    "mat", "rug", "chair", "table", "bench", "box", "bed", "sofa", "stool", "desk", "shelf", "crate", "barrel",
    "basket", "blanket", "pillow", "cushion", "log", "rock", "stone", "fence", "wall", "step", "ladder", "bucket",
    "cart", "wagon", "boat", "roof", "porch", "bridge", "carpet", "towel", "coat", "hat", "book", "drum", "piano",
    "trunk", "suitcase", "bag", "sack", "tray", "plate", "bowl", "pan", "pot", "jar", "bottle", "cup", "lamp",
    "clock", "radio", "phone", "tire", "wheel", "sled", "kite", "ball", "tent", "hammock", "swing", "gate", "door",
)
AMBIGUITY_PLACES = (
    "river", "lake", "barn", "house", "garden", "forest", "field", "road", "school", "market", "church", "station",
    "harbor", "village", "castle", "farm",
)
# The slot `{object}` is the ambiguous (masked) one; `{subject}` is the context word that selects its valid fillers.
AMBIGUITY_TEMPLATES = (
    "the {subject} sat on the {object} near the {place}",
    "a {subject} slept under the {object} by the {place}",
    "every morning the {subject} looked at the {object} behind the {place}",
    "the old {subject} carried the {object} to the {place}",
)


@dataclass
class AmbiguitySample:
    """`texts[i]` fills template `template_ids[i]`; its ambiguous slot is word `span_word_index[i]` (0-based,
    whitespace words), characters `span_char_start[i]:span_char_end[i]`, holding `fillers[i]`; the context word that
    selects the valid fillers is `subjects[i]`; `sentence_indices` are the stream indices (for `candidates`)."""

    texts: list[str]
    span_word_index: list[int]
    span_char_start: list[int]
    span_char_end: list[int]
    fillers: list[str]
    subjects: list[str]
    places: list[str]
    template_ids: list[int]
    sentence_indices: list[int]


@dataclass
class AmbiguityCorpus:
    """A SYNTHETIC corpus whose masked slot has exactly `ambiguity` equally likely valid fillers given its context.

    Sentences come from `AMBIGUITY_TEMPLATES`, e.g. "the {subject} sat on the {object} near the {place}". The slot
    `{object}` is the one to mask. Each subject `s` owns a fixed ordered list of valid objects (a permutation of
    `AMBIGUITY_OBJECTS` drawn once from `world_seed`); a sentence uses one of the first `ambiguity` of them, uniformly.
    So `ambiguity = 1` makes the filler a function of the context word (zero conditional entropy), and
    `ambiguity = K` leaves log(K) nats of irreducible uncertainty (the template and place are drawn independently and
    carry no information about the filler). The valid sets are nested: K=2's fillers contain K=1's.

    Sentence `i` of seed `seed` is the same whatever the `num_sentences` asked (sentences are drawn in chunks of 1024
    seeded by `(seed, chunk)`), so `candidates(i, seed)` can rebuild it.

    Args:
        ambiguity: number of valid fillers per context, 1..len(AMBIGUITY_OBJECTS) (64).
        seed: default sampling seed.
        world_seed: seed of the subject -> valid objects assignment (the "language"); keep it fixed across runs.
    """

    ambiguity: int = 1
    seed: int = 0
    world_seed: int = 1234
    _chunk: int = field(default=1024, init=False, repr=False)

    def __post_init__(self):
        if not 1 <= self.ambiguity <= len(AMBIGUITY_OBJECTS):
            raise ValueError(f"ambiguity must be in [1, {len(AMBIGUITY_OBJECTS)}], got {self.ambiguity}")
        rng = np.random.default_rng(self.world_seed)
        self._valid = np.stack([rng.permutation(len(AMBIGUITY_OBJECTS)) for _ in AMBIGUITY_SUBJECTS])

    @property
    def ambiguity_nats(self) -> float:
        """The conditional entropy of the masked filler given its context, log(ambiguity)."""
        return math.log(self.ambiguity)

    def valid_fillers(self, subject: str) -> list[str]:
        """The `ambiguity` valid fillers of the slot for a context subject, in their fixed order."""
        if subject not in AMBIGUITY_SUBJECTS:
            raise ValueError(f"subject must be one of AMBIGUITY_SUBJECTS, got {subject!r}")
        row = self._valid[AMBIGUITY_SUBJECTS.index(subject)]
        return [AMBIGUITY_OBJECTS[j] for j in row[: self.ambiguity]]

    def _draw_chunk(self, seed: int, chunk: int) -> np.ndarray:
        """(chunk_size, 4) int: template, subject, filler rank within the valid set, place."""
        rng = np.random.default_rng([seed, chunk])
        size = self._chunk
        return np.stack(
            [
                rng.integers(0, len(AMBIGUITY_TEMPLATES), size),
                rng.integers(0, len(AMBIGUITY_SUBJECTS), size),
                rng.integers(0, self.ambiguity, size),
                rng.integers(0, len(AMBIGUITY_PLACES), size),
            ],
            axis=1,
        )

    def _codes(self, indices: np.ndarray, seed: int) -> np.ndarray:
        out = np.empty((len(indices), 4), dtype=np.int64)
        chunks = indices // self._chunk
        for chunk in np.unique(chunks):
            members = chunks == chunk
            out[members] = self._draw_chunk(seed, int(chunk))[indices[members] % self._chunk]
        return out

    @staticmethod
    def _render(template_id: int, subject: str, filler: str, place: str) -> tuple[str, int, int, int]:
        template = AMBIGUITY_TEMPLATES[template_id]
        prefix = template.split("{object}")[0].format(subject=subject)
        text = template.format(subject=subject, object=filler, place=place)
        return text, len(prefix.split()), len(prefix), len(prefix) + len(filler)

    def sample(self, num_sentences: int, seed: int | None = None, start: int = 0) -> AmbiguitySample:
        """Sentences `start .. start + num_sentences - 1` of the stream of `seed` (default: `self.seed`)."""
        if num_sentences < 1:
            raise ValueError(f"num_sentences must be >= 1, got {num_sentences}")
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        seed = self.seed if seed is None else seed
        indices = np.arange(start, start + num_sentences)
        codes = self._codes(indices, seed)
        sample = AmbiguitySample([], [], [], [], [], [], [], [], [int(i) for i in indices])
        for template_id, subject_id, rank, place_id in codes.tolist():
            subject, place = AMBIGUITY_SUBJECTS[subject_id], AMBIGUITY_PLACES[place_id]
            filler = AMBIGUITY_OBJECTS[self._valid[subject_id, rank]]
            text, word, char_start, char_end = self._render(template_id, subject, filler, place)
            sample.texts.append(text)
            sample.span_word_index.append(word)
            sample.span_char_start.append(char_start)
            sample.span_char_end.append(char_end)
            sample.fillers.append(filler)
            sample.subjects.append(subject)
            sample.places.append(place)
            sample.template_ids.append(template_id)
        return sample

    def candidates(self, sentence_index: int, seed: int | None = None, num_candidates: int | None = 16) -> list[str]:
        """Full sentences with each valid filler in the slot of sentence `sentence_index` of the stream of `seed`.

        `num_candidates=None`: exactly the `ambiguity` valid completions (uniform weights). An integer `n` (default 16,
        to estimate the irreducible target variance with a fixed number of forward passes): when `ambiguity >= n`, `n`
        distinct valid completions drawn uniformly without replacement (seeded by the sentence); when `ambiguity < n`,
        the valid completions repeated cyclically to length `n` (an exactly uniform multiset when `ambiguity` divides
        `n`, e.g. 1, 2, 4, 8 for 16; otherwise the first `n mod ambiguity` completions appear once more).
        """
        if sentence_index < 0:
            raise ValueError(f"sentence_index must be >= 0, got {sentence_index}")
        if num_candidates is not None and num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1 or None, got {num_candidates}")
        seed = self.seed if seed is None else seed
        template_id, subject_id, _, place_id = self._codes(np.array([sentence_index]), seed)[0].tolist()
        subject, place = AMBIGUITY_SUBJECTS[subject_id], AMBIGUITY_PLACES[place_id]
        fillers = self.valid_fillers(subject)
        if num_candidates is not None:
            if self.ambiguity >= num_candidates:
                rng = np.random.default_rng([seed, sentence_index, 7919])
                fillers = [fillers[j] for j in sorted(rng.choice(self.ambiguity, num_candidates, replace=False))]
            else:
                fillers = [fillers[j % self.ambiguity] for j in range(num_candidates)]
        return [self._render(template_id, subject, filler, place)[0] for filler in fillers]


__all__ = [
    "AMBIGUITY_OBJECTS",
    "AMBIGUITY_PLACES",
    "AMBIGUITY_SUBJECTS",
    "AMBIGUITY_TEMPLATES",
    "AmbiguityCorpus",
    "AmbiguitySample",
    "COARSE_LABELS",
    "C4_HUB_ID",
    "RetrievalTask",
    "SPECIAL_TOKENS",
    "TOPIC_GROUPS",
    "TopicClassificationTask",
    "embedded_sentences",
    "embedded_text_dataset",
    "extract_sentences",
    "is_clean_sentence",
    "learn_wordpiece_vocab",
    "load_fever",
    "load_imdb",
    "load_ms_marco",
    "load_snli",
    "load_text_corpus",
    "retrieval_task",
    "split_sentences",
    "text_source_description",
    "topic_classification_task",
    "topic_group",
    "topic_groups",
    "train_wordpiece_tokenizer",
]
