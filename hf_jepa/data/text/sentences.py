"""Clean English sentences from CPython's bundled documentation, the offline text corpus of T-JEPA.

The source is `pydoc_data.topics.topics` (79 topics on Python 3.11, ~465 kB of reStructuredText rendered as plain
text; the same text `help("assert")` prints). `embedded_sentences()` turns it into clean sentences; each sentence keeps
its pydoc topic, and `TOPIC_GROUPS` (`topics.py`) maps the topics to a handful of coarse classes (the `label` column).

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
"""

import re

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
