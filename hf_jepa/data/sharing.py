"""Share hf-jepa's generated data as Hub datasets: build the splits, render an honest dataset card, push both.

Kinds (`DATASET_KINDS`, the `KIND` of `hf-jepa push-dataset KIND REPO_ID`), each with its parameters dataclass whose
fields are the generator's settings (the `--set` keys) and whose defaults are the training recipe's:

- `moving-mnist-gravity` (`MovingMnistGravityParameters`): EPM-JEPA's Moving MNIST with gravity. Configuration
  `sequences`, splits `train` (g = `train_gravity`, MNIST train digits: the pretraining stream) and `adapt`
  (g ~ U(`shift_gravity_min`, `shift_gravity_max`], train digits: the experience phase); configuration `evaluation`
  (longer sequences), splits `eval_shift` and `eval_train` (MNIST test digits, the recipe's fixed evaluation sets).
  `pixel_values` is float32 `(T, 1, H, W)`: the model's input, exactly.
- `ambiguity-corpus` (`AmbiguityCorpusParameters`): T-JEPA's synthetic ambiguity corpus, splits `train` and
  `validation` (text and the ambiguous span), with the corpus's WordPiece tokenizer in `tokenizer/`;
  `set_transform(ambiguity_model_inputs(tokenizer))` gives the model's input.
- `reasoning-tree-search`, `reasoning-cfg`, `reasoning-arithmetic` (`TreeSearchParameters`, `CfgParameters`,
  `ArithmeticParameters`): JEPA-Reasoner's tasks, splits `train` and `test` (strings and the encoded int64 columns),
  with the task's word-level tokenizer in `tokenizer/`.

Nothing here writes outside a temporary folder: the user's files and caches stay as they were. Templates live in the
repository's `dataset_cards/` folder, packaged as `hf_jepa.dataset_cards`. `datasets` and `huggingface_hub` are
imported inside the functions that use them.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..templates import read_template
from .moving_mnist import (
    CANVAS_SIZE,
    DIGIT_SIZE,
    EVAL_SEQUENCE_LENGTH,
    EVAL_SEQUENCES,
    NUM_DIGITS,
    SEQUENCE_LENGTH,
    SHIFT_GRAVITY,
    TRAIN_GRAVITY,
    check_gravity_settings,
)
from .sources import EMBEDDED_DIGITS_LICENSE, MNIST_HUB_ID, MNIST_LICENSE

__all__ = [
    "DATASET_KINDS",
    "AmbiguityCorpusParameters",
    "ArithmeticParameters",
    "CfgParameters",
    "MovingMnistGravityParameters",
    "SharedDataset",
    "TreeSearchParameters",
    "build_shared_dataset",
    "dataset_parameters",
    "push_dataset",
    "render_dataset_card",
    "save_dataset_folder",
]

# The data hf-jepa generates itself (templates, grammars, trees, word problems) is released under the project's licence.
GENERATED_DATA_LICENSE = "apache-2.0"
DATA_FOLDER = "data"
TOKENIZER_FOLDER = "tokenizer"


def _check_counts(parameters, *names: str, minimum: int = 0) -> None:
    for name in names:
        value = getattr(parameters, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


# ---------------------------------------------------------------------------------------------------- parameters


@dataclass
class MovingMnistGravityParameters:
    """Moving MNIST with gravity (`hf_jepa.data.moving_mnist.MovingMnist`); defaults are the EPM-JEPA recipe's (the
    constants of `hf_jepa.data.moving_mnist`), and the fields the recipe shares are checked as it checks them
    (`check_gravity_settings`).

    data: MNIST source (a local folder, "hub" or "embedded"; default: $HF_JEPA_MNIST, else the Hub, else embedded).
    seed: the training run's seed (training sequences); the evaluation splits always use `EVAL_SEED`.
    train_sequences, adapt_sequences, eval_sequences: rows of `train`, `adapt`, and of each evaluation split (0 drops it).
    batch_size: the training run's per-device batch size: chunk k of `train`/`adapt` is the recipe's batch of step k.
    """

    data: str | None = None
    seed: int = 0
    train_sequences: int = 1024
    adapt_sequences: int = 1024
    eval_sequences: int = EVAL_SEQUENCES
    batch_size: int = 32
    sequence_length: int = SEQUENCE_LENGTH
    eval_sequence_length: int = EVAL_SEQUENCE_LENGTH
    num_digits: int = NUM_DIGITS
    train_gravity: float = TRAIN_GRAVITY
    shift_gravity_min: float = SHIFT_GRAVITY[0]
    shift_gravity_max: float = SHIFT_GRAVITY[1]
    canvas_size: int = CANVAS_SIZE

    def __post_init__(self):
        _check_counts(self, "seed", "train_sequences", "adapt_sequences", "eval_sequences")
        _check_counts(self, "batch_size", minimum=1)
        _check_counts(self, "canvas_size", minimum=DIGIT_SIZE + 1)
        check_gravity_settings(self)
        if not self.train_sequences + self.adapt_sequences + self.eval_sequences:
            raise ValueError("train_sequences, adapt_sequences and eval_sequences are all 0: nothing to share")


@dataclass
class AmbiguityCorpusParameters:
    """The synthetic ambiguity corpus (`hf_jepa.data.text.AmbiguityCorpus`); defaults are the T-JEPA recipe's.

    ambiguity: valid fillers per masked slot (log(ambiguity) nats of irreducible uncertainty).
    seed: the training run's seed (the validation split uses `VALIDATION_SEED_OFFSET + seed`).
    world_seed: seed of the subject -> valid fillers assignment (the corpus's "language").
    train_sentences, validation_sentences: rows of each split (the recipe's fixed validation batch is the first 128).
    """

    ambiguity: int = 1
    seed: int = 0
    world_seed: int = 1234
    train_sentences: int = 16_384
    validation_sentences: int = 128

    def __post_init__(self):
        _check_counts(self, "seed", "world_seed")
        _check_counts(self, "ambiguity", "train_sentences", "validation_sentences", minimum=1)


@dataclass
class _ReasoningParameters:
    """Shared by the reasoning kinds; defaults are the JEPA-Reasoner recipe's (`JepaReasonerDataArguments`).

    num_train_examples, num_eval_examples: rows of `train` and `test`; task_seed: the generator seed of `train` (`test`
    uses `task_seed + 1`, without any example of `train`)."""

    num_train_examples: int = 20_000
    num_eval_examples: int = 500
    task_seed: int = 0

    def __post_init__(self):
        _check_counts(self, "task_seed")
        _check_counts(self, "num_eval_examples", minimum=1)
        _check_counts(self, "num_train_examples", minimum=2)


@dataclass
class TreeSearchParameters(_ReasoningParameters):
    """Tree search (`TreeSearchTask`): num_nodes nodes labelled from node_vocab_size names."""

    num_nodes: int = 7
    node_vocab_size: int = 32


@dataclass
class CfgParameters(_ReasoningParameters):
    """Context-free-grammar completion (`CfgTask`)."""


@dataclass
class ArithmeticParameters(_ReasoningParameters):
    """Arithmetic word problems (`ArithmeticWordProblems`) of min_operations .. max_operations steps."""

    min_operations: int = 2
    max_operations: int = 4


DATASET_KINDS: dict[str, type] = {
    "moving-mnist-gravity": MovingMnistGravityParameters,
    "ambiguity-corpus": AmbiguityCorpusParameters,
    "reasoning-tree-search": TreeSearchParameters,
    "reasoning-cfg": CfgParameters,
    "reasoning-arithmetic": ArithmeticParameters,
}
_TEMPLATES = {
    "moving-mnist-gravity": "moving_mnist_gravity.md",
    "ambiguity-corpus": "ambiguity_corpus.md",
    "reasoning-tree-search": "reasoning.md",
    "reasoning-cfg": "reasoning.md",
    "reasoning-arithmetic": "reasoning.md",
}
_REASONING_TASK = {"reasoning-tree-search": "tree_search", "reasoning-cfg": "cfg", "reasoning-arithmetic": "arithmetic"}


def _check_kind(kind: str) -> type:
    if kind not in DATASET_KINDS:
        raise ValueError(f"unknown dataset kind {kind!r}; choose one of: {', '.join(DATASET_KINDS)}")
    return DATASET_KINDS[kind]


def dataset_parameters(kind: str, **values: Any):
    """The parameters dataclass of `kind` built from `values` (ValueError naming a bad kind, key or value)."""
    parameters_class = _check_kind(kind)
    names = [f.name for f in dataclasses.fields(parameters_class)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"{kind} has no parameter {unknown[0]!r}; valid: {', '.join(names)}")
    return parameters_class(**values)


# ---------------------------------------------------------------------------------------------------- building


@dataclass
class SharedDataset:
    """A generated dataset ready to share: its configurations, the tokenizer that encodes it (or None), and what its
    card says.

    configs: configuration name -> `datasets.DatasetDict` of its splits (split names unique across configurations).
    A configuration's splits share one schema (the Hub's viewer and `load_dataset` read one per configuration), so
    Moving MNIST's longer evaluation sequences get their own (`evaluation`) beside `sequences`; the first is the
    default. facts: template variables for the card (source of outside data, licence...)."""

    kind: str
    parameters: Any
    configs: dict[str, Any]
    tokenizer: Any = None
    facts: dict[str, Any] = field(default_factory=dict)


def build_shared_dataset(kind: str, parameters=None) -> SharedDataset:
    """Generate the splits of `kind` with `parameters` (its dataclass; default: the recipe's defaults)."""
    parameters_class = _check_kind(kind)
    parameters = parameters_class() if parameters is None else parameters
    if not isinstance(parameters, parameters_class):
        raise ValueError(f"parameters of {kind} must be a {parameters_class.__name__}, got {type(parameters).__name__}")
    if kind == "moving-mnist-gravity":
        return _moving_mnist(parameters)
    if kind == "ambiguity-corpus":
        return _ambiguity(parameters)
    return _reasoning(kind, parameters)


def _moving_mnist(p: MovingMnistGravityParameters) -> SharedDataset:
    import datasets

    from .mnist import MnistSplits
    from .moving_mnist import EVAL_SEED, MovingMnist

    digits = MnistSplits(p.data)
    shift = (p.shift_gravity_min, p.shift_gravity_max)
    plan = {  # split: (digit images, their labels, gravity, rows, frames per sequence)
        "train": (digits.train_images, digits.train_labels, p.train_gravity, p.train_sequences, p.sequence_length),
        "adapt": (digits.train_images, digits.train_labels, shift, p.adapt_sequences, p.sequence_length),
        "eval_shift": (digits.test_images, digits.test_labels, shift, p.eval_sequences, p.eval_sequence_length),
        "eval_train": (
            digits.test_images,
            digits.test_labels,
            p.train_gravity,
            p.eval_sequences,
            p.eval_sequence_length,
        ),
    }
    splits = {}
    for name, (images, labels, gravity, rows, frames) in plan.items():
        if not rows:
            continue
        evaluation = name.startswith("eval")
        world = MovingMnist(
            images=images,
            labels=labels,
            sequence_length=frames,
            num_digits=p.num_digits,
            gravity=gravity,
            canvas_size=p.canvas_size,
            seed=EVAL_SEED if evaluation else p.seed,
        )
        # The recipe draws each evaluation set as one batch, and trains on batches of the per-device batch size.
        config = splits.setdefault("evaluation" if evaluation else "sequences", {})
        config[name] = world.to_dataset(rows, batch_size=rows if evaluation else p.batch_size)
    source = digits.source
    if source.startswith("Hub"):
        licence, source_datasets = MNIST_LICENSE, [MNIST_HUB_ID]
    elif source.startswith("embedded"):
        licence, source_datasets = EMBEDDED_DIGITS_LICENSE, []
    else:
        licence, source_datasets = "other", []
    return SharedDataset(
        "moving-mnist-gravity",
        p,
        {name: datasets.DatasetDict(config) for name, config in splits.items()},
        facts={
            "digit_source": source,
            "license": licence,
            "source_datasets": source_datasets,
            "eval_seed": EVAL_SEED,
        },
    )


def _ambiguity(p: AmbiguityCorpusParameters) -> SharedDataset:
    import datasets

    from .text.ambiguity import RANK_STRIDE, VALIDATION_SEED_OFFSET, AmbiguityCorpus

    corpus = AmbiguityCorpus(ambiguity=p.ambiguity, seed=p.seed, world_seed=p.world_seed)
    validation_seed = VALIDATION_SEED_OFFSET + p.seed
    splits = {
        "train": corpus.to_dataset(p.train_sentences, seed=p.seed),
        "validation": corpus.to_dataset(p.validation_sentences, seed=validation_seed),
    }
    return SharedDataset(
        "ambiguity-corpus",
        p,
        {"default": datasets.DatasetDict(splits)},
        tokenizer=corpus.train_tokenizer(),
        facts={
            "license": GENERATED_DATA_LICENSE,
            "source_datasets": [],
            "validation_seed": validation_seed,
            "rank_stride": RANK_STRIDE,
            "ambiguity_nats": corpus.ambiguity_nats,
        },
    )


def _reasoning(kind: str, p: _ReasoningParameters) -> SharedDataset:
    from types import SimpleNamespace

    from .reasoning import ReasoningData

    task = _REASONING_TASK[kind]
    data = ReasoningData(SimpleNamespace(task=task, **dataclasses.asdict(p)))
    return SharedDataset(
        kind,
        p,
        {"default": data.to_dataset()},
        tokenizer=data.tokenizer,
        facts={
            "license": GENERATED_DATA_LICENSE,
            "source_datasets": [],
            "task": task,
            "task_class": type(data.task).__name__,
            "vocab_size": data.vocab_size,
            "max_prompt_length": data.max_prompt_length,
            "max_answer_length": data.max_answer_length,
            "example": data.train_examples[0],
        },
    )


# ---------------------------------------------------------------------------------------------------- card


def _size_category(rows: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < limit:
            return label
    return "1M<n<10M"


def _setting(value: Any) -> str:
    """A parameter value as `--set` reads it back (YAML)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def regenerate_command(kind: str, parameters, repo_id: str) -> str:
    """The one command that generates these splits again and pushes them to `repo_id`."""
    settings = " ".join(
        shlex.quote(f"{name}={_setting(value)}")
        for name, value in dataclasses.asdict(parameters).items()
        if value is not None
    )
    return f"hf-jepa push-dataset {kind} {repo_id} --set {settings}"


def render_dataset_card(shared: SharedDataset, repo_id: str | None = None):
    """The dataset card (`huggingface_hub.DatasetCard`): YAML metadata (licence, sizes, split files, the generator,
    its version and every parameter under `hf_jepa`) and the body rendered from `dataset_cards/<kind>.md`."""
    from huggingface_hub import DatasetCard, DatasetCardData

    from ..version import __version__

    repo_id = repo_id or f"your-name/{shared.kind}"
    parameters = dataclasses.asdict(shared.parameters)
    rows = {name: split.num_rows for config in shared.configs.values() for name, split in config.items()}
    text_kind = shared.kind == "ambiguity-corpus" or shared.kind == "reasoning-arithmetic"
    card_data = DatasetCardData(
        pretty_name=f"hf-jepa {shared.kind} (synthetic)",
        license=shared.facts["license"],
        language=["en"] if text_kind else None,
        size_categories=[_size_category(sum(rows.values()))],
        source_datasets=shared.facts["source_datasets"] or ["original"],
        annotations_creators=["machine-generated"],
        language_creators=["machine-generated"] if text_kind else None,
        tags=["synthetic", "hf-jepa", shared.kind],
        configs=[
            {
                "config_name": config_name,
                "data_files": [
                    {"split": name, "path": f"{DATA_FOLDER}/{config_name}/{name}-*.parquet"} for name in config
                ],
                **({"default": True} if index == 0 and config_name != "default" else {}),
            }
            for index, (config_name, config) in enumerate(shared.configs.items())
        ],
        hf_jepa={"kind": shared.kind, "version": __version__, "parameters": parameters},
    )
    columns = {
        config_name: {name: str(feature) for name, feature in next(iter(config.values())).features.items()}
        for config_name, config in shared.configs.items()
    }
    card = DatasetCard.from_template(
        card_data,
        template_str=read_template("dataset_cards", _TEMPLATES[shared.kind]),
        kind=shared.kind,
        repo_id=repo_id,
        version=__version__,
        parameters=parameters,
        rows=rows,
        columns=columns,
        split_config={name: config_name for config_name, config in shared.configs.items() for name in config},
        has_tokenizer=shared.tokenizer is not None,
        tokenizer_folder=TOKENIZER_FOLDER,
        regenerate=regenerate_command(shared.kind, shared.parameters, repo_id),
        **shared.facts,
    )
    return DatasetCard(re.sub(r"\n{3,}", "\n\n", str(card).strip() + "\n"))


# ---------------------------------------------------------------------------------------------------- writing, pushing


def save_dataset_folder(shared: SharedDataset, folder: str | Path, repo_id: str | None = None) -> Path:
    """Write the Hub layout into `folder`: `data/<config>/<split>-00000-of-00001.parquet`, `README.md` (the card) and,
    when the data comes with one, `tokenizer/`. Returns the folder."""
    folder = Path(folder)
    for config_name, config in shared.configs.items():
        (folder / DATA_FOLDER / config_name).mkdir(parents=True, exist_ok=True)
        for name, split in config.items():
            split.to_parquet(str(folder / DATA_FOLDER / config_name / f"{name}-00000-of-00001.parquet"))
    if shared.tokenizer is not None:
        shared.tokenizer.save_pretrained(str(folder / TOKENIZER_FOLDER))
    render_dataset_card(shared, repo_id).save(str(folder / "README.md"))
    return folder


def push_dataset(
    kind: str,
    repo_id: str,
    parameters=None,
    *,
    token: str | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Generate `kind` with `parameters`, then push the splits (parquet), the card and the tokenizer to the dataset
    repo `repo_id` in one commit (on branch `revision`, created from main when missing). The repo is created first,
    so a missing login or an offline Hub fails before anything is generated. Earlier `data/` files are replaced.
    Returns the commit URL."""
    from huggingface_hub import HfApi

    parameters_class = _check_kind(kind)
    parameters = parameters_class() if parameters is None else parameters
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    if revision:
        api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
    shared = build_shared_dataset(kind, parameters)
    with tempfile.TemporaryDirectory(prefix="hf-jepa-dataset-") as folder:
        save_dataset_folder(shared, folder, repo_id)
        commit = api.upload_folder(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=folder,
            revision=revision,
            commit_message=commit_message or f"Upload hf-jepa {kind} dataset",
            delete_patterns=[f"{DATA_FOLDER}/*"],
        )
    return commit.commit_url
