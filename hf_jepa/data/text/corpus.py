"""A sentence corpus for T-JEPA as a `DatasetDict` with `train` / `validation` / `test` splits.

Sources (`load_text_corpus`):

- `"embedded"` (the offline default): real English prose extracted from CPython's bundled documentation,
  `pydoc_data.topics.topics` (79 topics on Python 3.11, ~465 kB of reStructuredText rendered as plain text; the same
  text `help("assert")` prints). `embedded_sentences()` turns it into clean sentences, see below. Each sentence keeps
  its pydoc topic, and `TOPIC_GROUPS` maps the topics to a handful of coarse classes (the `label` column).
- `"c4"`: the first sentences of `allenai/c4` (`en`), streamed with `datasets.load_dataset(..., streaming=True)`;
  online only.
- a local path: a `save_to_disk` folder, a parquet / arrow / json(l) / csv file, a folder of `{split}.parquet` /
  `{split}.arrow` files, or a `.txt` file with one sentence per line. It needs a `text` column (`label` is kept).
"""

import logging
import math
import os
from pathlib import Path

import datasets
import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from ..sources import C4_HUB_ID, is_offline
from ..user_sources import open_source, rename_columns
from .sentences import _clean, embedded_sentences, is_clean_sentence, split_sentences
from .topics import COARSE_LABELS, topic_group

logger = logging.getLogger(__name__)


TEXT_ENV_VAR = "HF_JEPA_TEXT"


SPLIT_NAMES = ("train", "validation", "test")


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
    if is_offline():
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
    text_column: str = "text",
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
        text_column: the column of a local or Hub source holding the text (renamed to `text`; other columns are then
            dropped). A local path that none of the layouts above fits, or a Hub dataset id, is read by
            `hf_jepa.data.user_sources.open_source`.

    The source used is logged and stored in each split's `info.description` (`text_source_description`).
    """
    if source is None and os.environ.get(TEXT_ENV_VAR):
        source = os.environ[TEXT_ENV_VAR]
        logger.info("text source from $%s", TEXT_ENV_VAR)
    if text_column != "text" and (source is None or source in ("embedded", "c4")):
        raise ValueError(f"text_column={text_column!r} needs a source of your own (data= a Hub id or a local path)")
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
        try:
            corpus, kind = _load_local(path, split_seed, split_fractions) if path.exists() else (None, None)
        except FileNotFoundError:  # a folder in none of the layouts above: let `datasets` read it
            corpus = None
        if corpus is None:
            try:
                loaded = open_source(source, argument="data")
            except FileNotFoundError as error:
                raise FileNotFoundError(f"{error} (or use 'embedded' / 'c4')") from error
            if set(loaded) == set(SPLIT_NAMES):
                corpus = DatasetDict({name: loaded[name] for name in SPLIT_NAMES})
            else:
                merged = datasets.concatenate_datasets([loaded[name] for name in sorted(loaded)])
                corpus = _split(merged, split_seed, split_fractions)
            kind = "datasets " + ("Hub dataset" if not path.exists() else "folder")
        description = f"{'local ' if path.exists() else 'Hub '}{source if not path.exists() else path} ({kind})"
        if text_column != "text":
            corpus = rename_columns(corpus, {"text": text_column}, required=("text",))
        if kind == "txt" or kind.startswith("datasets") or text_column != "text":  # blank lines are not sentences
            corpus = DatasetDict({k: v.filter(lambda row: bool(row["text"].strip())) for k, v in corpus.items()})
    for name, split in corpus.items():
        if "text" not in split.column_names:
            raise ValueError(
                f"text_column='text': split {name!r} of the text source {description} has no 'text' column; its "
                f"columns are {split.column_names} (name yours with text_column=)"
            )
        split.info.description = description
    logger.info("Loaded text corpus from %s: %s", description, {k: v.num_rows for k, v in corpus.items()})
    return corpus


def text_source_description(corpus: DatasetDict) -> str:
    return next(iter(corpus.values())).info.description or "unknown"
