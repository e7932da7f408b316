"""A synthetic conditional-ambiguity corpus for T-JEPA.

`AmbiguityCorpus` is synthetic: template sentences whose masked slot has exactly `ambiguity` equally likely fillers
given the rest of the sentence, a knob on the conditional entropy (log(ambiguity) nats) of the target.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

AMBIGUITY_SUBJECTS = (
    "cat",
    "dog",
    "fox",
    "owl",
    "goat",
    "horse",
    "rabbit",
    "mouse",
    "duck",
    "sheep",
    "bear",
    "wolf",
    "deer",
    "frog",
    "lion",
    "tiger",
    "monkey",
    "zebra",
    "camel",
    "otter",
    "badger",
    "beaver",
    "parrot",
    "pigeon",
    "turtle",
    "snake",
    "squirrel",
    "hamster",
    "donkey",
    "llama",
    "panda",
    "koala",
)
AMBIGUITY_OBJECTS = (
    "mat",
    "rug",
    "chair",
    "table",
    "bench",
    "box",
    "bed",
    "sofa",
    "stool",
    "desk",
    "shelf",
    "crate",
    "barrel",
    "basket",
    "blanket",
    "pillow",
    "cushion",
    "log",
    "rock",
    "stone",
    "fence",
    "wall",
    "step",
    "ladder",
    "bucket",
    "cart",
    "wagon",
    "boat",
    "roof",
    "porch",
    "bridge",
    "carpet",
    "towel",
    "coat",
    "hat",
    "book",
    "drum",
    "piano",
    "trunk",
    "suitcase",
    "bag",
    "sack",
    "tray",
    "plate",
    "bowl",
    "pan",
    "pot",
    "jar",
    "bottle",
    "cup",
    "lamp",
    "clock",
    "radio",
    "phone",
    "tire",
    "wheel",
    "sled",
    "kite",
    "ball",
    "tent",
    "hammock",
    "swing",
    "gate",
    "door",
)
AMBIGUITY_PLACES = (
    "river",
    "lake",
    "barn",
    "house",
    "garden",
    "forest",
    "field",
    "road",
    "school",
    "market",
    "church",
    "station",
    "harbor",
    "village",
    "castle",
    "farm",
)
# The T-JEPA recipe's streams: training batch `step` of `rank` is the `batch_size` sentences of the training seed from
# `training_start(step, rank, batch_size)` (up to RANK_STRIDE ranks draw disjoint sentences); the validation sentences
# come from seed `VALIDATION_SEED_OFFSET + seed`; the WordPiece tokenizer learns from the first TOKENIZER_SENTENCES
# sentences of seed TOKENIZER_SEED (`AmbiguityCorpus.train_tokenizer`).
RANK_STRIDE = 64
VALIDATION_SEED_OFFSET = 10_000
TOKENIZER_SEED = 10_000
TOKENIZER_SENTENCES = 4096


def training_start(step: int, rank: int, batch_size: int) -> int:
    """The stream index of the first sentence of training batch `step` of `rank` in the T-JEPA recipe."""
    return (step * RANK_STRIDE + rank) * batch_size


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

    def train_tokenizer(self, vocab_size: int = 8000):
        """The WordPiece tokenizer the T-JEPA recipe trains for this corpus (`vocab_size` is an upper bound: the
        backbone's vocabulary), learnt from the first `TOKENIZER_SENTENCES` sentences of seed `TOKENIZER_SEED`."""
        from .wordpiece import train_wordpiece_tokenizer

        texts = self.sample(TOKENIZER_SENTENCES, seed=TOKENIZER_SEED).texts
        return train_wordpiece_tokenizer(texts, vocab_size=vocab_size)

    def to_dataset(self, num_sentences: int, seed: int | None = None, start: int = 0):
        """`sample(num_sentences, seed, start)` as an in-memory `datasets.Dataset`, one row per sentence: `text`,
        `span_char_start` / `span_char_end` (the ambiguous slot), `span_word_index`, `filler`, `subject`, `place`,
        `template_id` and `sentence_index` (the row's index in the stream of `seed`). Text, not token ids: the model's
        input comes from the tokenizer, through `set_transform(ambiguity_model_inputs(tokenizer, max_length))`."""
        import datasets

        sample = self.sample(num_sentences, seed=seed, start=start)
        columns = {
            "text": sample.texts,
            "span_char_start": sample.span_char_start,
            "span_char_end": sample.span_char_end,
            "span_word_index": sample.span_word_index,
            "filler": sample.fillers,
            "subject": sample.subjects,
            "place": sample.places,
            "template_id": sample.template_ids,
            "sentence_index": sample.sentence_indices,
        }
        integer = datasets.Value("int64")
        features = datasets.Features(
            {
                name: datasets.Value("string") if isinstance(values[0], str) else integer
                for name, values in columns.items()
            }
        )
        return datasets.Dataset.from_dict(columns, features=features)


def ambiguity_model_inputs(tokenizer, max_length: int = 64) -> Callable[[dict], dict]:
    """A `Dataset.set_transform` / `with_transform` function for `AmbiguityCorpus.to_dataset` rows: a batch of rows
    becomes exactly what the T-JEPA recipe feeds the model for those sentences (the default `jepa` objective):
    `input_ids`, `attention_mask`, `target_mask` and `span_ids` (int64/bool tensors, padded to the batch's longest),
    the ambiguous slot being the one target span. `tokenizer`: the model's (or `AmbiguityCorpus.train_tokenizer`);
    `max_length`: the recipe's `max_length` data argument."""
    from ..masking import SpanMaskingCollator

    collator = SpanMaskingCollator(tokenizer=tokenizer, max_length=max_length)

    def transform(rows: dict) -> dict:
        spans = [[(start, end)] for start, end in zip(rows["span_char_start"], rows["span_char_end"])]
        batch = collator.mask_char_spans(list(rows["text"]), spans)
        return {key: batch[key] for key in ("input_ids", "attention_mask", "target_mask", "span_ids")}

    return transform
