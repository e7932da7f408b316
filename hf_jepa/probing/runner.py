"""`run_probes`: the linear, kNN and attentive probes of one frozen encoder and of the same config freshly initialised
(the learned-vs-untrained rows), as the `probe_results.json` mapping; `results_table` prints it as markdown.

The probes (settings are `ProbeSettings` fields, the `--set` names of `hf-jepa probe`):

- linear: scikit-learn `LogisticRegression` (lbfgs solver, L2 penalty with C=1.0, at most 2000 iterations) on the
  pooled features standardised with the training set's mean and std (`metrics.downstream.linear_probe_accuracy`, the
  probe the families' own evaluations report).
- knn: cosine k-NN on the pooled features, `knn_k` neighbours (default 20), each voting `exp(cosine / T)` with
  `knn_temperature` T=0.07 (DINO's weighted k-NN; `knn_weighting=majority`: one vote each).
- attentive: a learned query, one cross-attention block and a linear head (V-JEPA's attentive probe, plus learned
  position embeddings: CNN map cells carry no position) over the per-channel standardised token / patch features, trained with AdamW (`attentive_learning_rate` 3e-3,
  `attentive_weight_decay` 0.01) for `attentive_steps` steps of `attentive_batch_size` examples, seeded by `seed`.
  An encoder with no token features (BRo-JEPA's MLP encoder) skips it and the results say why.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..recipes._checks import check_choice, check_count, check_types

logger = logging.getLogger(__name__)

PROBES = ("linear", "knn", "attentive")
SCHEMA_VERSION = 1
RESULTS_FILE = "probe_results.json"


@dataclass
class ProbeSettings:
    """Settings of `hf-jepa probe` (`--set name=value`).

    train_examples, test_examples: seeded samples of each split (0 = all). seed: the samples, the attentive probe and
    the untrained row's initialisation when the folder records no training seed (training_args.json). batch_size:
    inputs per feature-extraction pass. device: "auto" (CUDA when available), "cpu", "cuda", ... untrained: add the
    row of the freshly initialised config. image_column, text_column, label_column: the data's columns. max_length:
    tokens per text (cut to what the encoder's positions hold). knn_*, attentive_*: see the module docstring."""

    train_examples: int = 5000
    test_examples: int = 2000
    seed: int = 0
    batch_size: int = 128
    device: str = "auto"
    untrained: bool = True
    image_column: str = "image"
    text_column: str = "text"
    label_column: str = "label"
    max_length: int = 128
    knn_k: int = 20
    knn_temperature: float = 0.07
    knn_weighting: str = "temperature"
    attentive_steps: int = 500
    attentive_batch_size: int = 64
    attentive_learning_rate: float = 3e-3  # 1e-3 left BRo-JEPA's 196-cell map unconverged at 500 steps (85.0% vs 89.4%)
    attentive_weight_decay: float = 0.01
    attentive_heads: int = 4

    def __post_init__(self):
        from ..metrics.probes import KNN_WEIGHTINGS

        check_types(self)
        check_count(self, "train_examples", minimum=2, zero_means="all")
        check_count(self, "test_examples", minimum=1, zero_means="all")
        for name in ("batch_size", "max_length", "knn_k", "attentive_steps", "attentive_batch_size", "attentive_heads"):
            check_count(self, name)
        check_choice(self, "knn_weighting", KNN_WEIGHTINGS)
        if not self.knn_temperature > 0 or not self.attentive_learning_rate > 0:
            raise ValueError("knn_temperature and attentive_learning_rate must be > 0")


def parse_probes(text: str) -> tuple[str, ...]:
    """`"linear,knn"` -> ("linear", "knn"), in `PROBES` order; raises `ValueError` naming --probes for an unknown
    or empty list."""
    names = [name.strip() for name in str(text).split(",") if name.strip()]
    unknown = [name for name in names if name not in PROBES]
    if unknown or not names:
        raise ValueError(f"--probes {text!r}: unknown probe {unknown[0]!r}" if unknown else f"--probes {text!r}: empty")
    return tuple(name for name in PROBES if name in names)


def _row(encoder, data, probes, settings: ProbeSettings, label: str) -> dict[str, Any]:
    """{"accuracy": {probe: value}, "skipped": {probe: why}} of one encoder."""
    from ..metrics.downstream import linear_probe_accuracy
    from ..metrics.probes import attentive_probe_accuracy, knn_probe_accuracy

    positions = encoder.max_positions() if encoder.kind == "text" else None
    max_length = min(settings.max_length, positions) if positions else settings.max_length
    tokens = "attentive" in probes
    extract = dict(batch_size=settings.batch_size, with_tokens=tokens, max_length=max_length)
    train = encoder.features(data.train_inputs, description=f"features ({label}, train)", **extract)
    test = encoder.features(data.test_inputs, description=f"features ({label}, test)", **extract)
    accuracy, skipped = {}, {}
    if "linear" in probes:
        accuracy["linear"] = linear_probe_accuracy(
            train.pooled, data.train_labels.tolist(), test.pooled, data.test_labels.tolist()
        )
    if "knn" in probes:
        accuracy["knn"] = knn_probe_accuracy(
            train.pooled,
            data.train_labels,
            test.pooled,
            data.test_labels,
            k=settings.knn_k,
            temperature=settings.knn_temperature,
            weighting=settings.knn_weighting,
        )
    if tokens and train.tokens is None:
        skipped["attentive"] = train.no_tokens or "the encoder gives no token features"
    elif tokens:
        accuracy["attentive"] = attentive_probe_accuracy(
            train.tokens,
            data.train_labels,
            test.tokens,
            data.test_labels,
            train_mask=train.mask,
            test_mask=test.mask,
            steps=settings.attentive_steps,
            batch_size=settings.attentive_batch_size,
            learning_rate=settings.attentive_learning_rate,
            weight_decay=settings.attentive_weight_decay,
            num_heads=settings.attentive_heads,
            seed=settings.seed,
            device=encoder.device,
        )
    shapes = {"feature_dim": int(train.pooled.shape[1])}
    if train.tokens is not None:
        shapes.update(token_dim=int(train.tokens.shape[2]), tokens_per_input=int(train.tokens.shape[1]))
    return {"accuracy": accuracy, "skipped": skipped, **shapes}


def run_probes(encoder, data, probes=PROBES, settings: ProbeSettings | None = None, untrained_seed: int | None = None):
    """The `probe_results.json` mapping of `encoder` (a `probing.encoders.FrozenEncoder`) probed on `data` (a
    `probing.data.ProbeData`): one row "learned" and, when `settings.untrained`, a row "untrained" for the same config
    initialised after `torch.manual_seed(untrained_seed)` (default `settings.seed`), probed the same way."""
    from ..version import __version__

    settings = settings or ProbeSettings()
    seed = settings.seed if untrained_seed is None else untrained_seed
    logger.info(
        "Probing %s %s on %s (%d train / %d test) on device %s: %s",
        encoder.reference,
        encoder.description,
        data.source,
        len(data.train_labels),
        len(data.test_labels),
        encoder.device,
        ", ".join(probes),
    )
    started = time.perf_counter()
    rows = [{"name": "learned", **_row(encoder, data, probes, settings, "learned")}]
    if settings.untrained:
        fresh = encoder.untrained(seed)
        rows.append({"name": "untrained", "seed": seed, **_row(fresh, data, probes, settings, "untrained")})
    return {
        "schema_version": SCHEMA_VERSION,
        "model": str(encoder.reference),
        "encoder": {"family": encoder.family, "model_type": encoder.model_type, "kind": encoder.kind},
        "data": {
            "source": data.source,
            "kind": data.kind,
            "train_examples": len(data.train_labels),
            "test_examples": len(data.test_labels),
            "num_classes": data.num_classes,
            "label_names": data.label_names,
            "majority_baseline": data.majority_baseline,
        },
        "probes": list(probes),
        "settings": asdict(settings),
        "rows": rows,
        "device": str(encoder.device),
        "seconds": round(time.perf_counter() - started, 2),
        "hf_jepa_version": __version__,
    }


PROBE_TITLES = {"linear": "linear", "knn": "kNN", "attentive": "attentive"}


def probe_title(name: str, settings: dict[str, Any]) -> str:
    """The column title of a probe, with its main setting (e.g. "kNN (k=20)")."""
    return f"kNN (k={settings['knn_k']})" if name == "knn" else PROBE_TITLES[name]


def results_table(results: dict[str, Any]) -> str:
    """Markdown: one row per encoder row (accuracy in %, "skipped" where a probe could not run), then the data,
    majority baseline, device and the reasons of skipped probes."""
    probes, settings = results["probes"], results["settings"]
    lines = [
        "| Encoder | " + " | ".join(probe_title(p, settings) for p in probes) + " |",
        "|---|" + "---|" * len(probes),
    ]
    for row in results["rows"]:
        name = row["name"] if row["name"] != "untrained" else f"untrained (same config, seed {row['seed']})"
        cells = [f"{100 * row['accuracy'][p]:.2f}%" if p in row["accuracy"] else "skipped" for p in probes]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    data = results["data"]
    lines += [
        "",
        f"Model: {results['model']} ({results['encoder']['family']}, {results['encoder']['kind']} encoder). "
        f"Data: {data['source']}, {data['train_examples']} train / {data['test_examples']} test examples, "
        f"{data['num_classes']} classes (majority class {100 * data['majority_baseline']:.2f}%). "
        f"Device: {results['device']}; {results['seconds']:.1f} s.",
    ]
    reasons = {why for row in results["rows"] for why in row["skipped"].values()}
    lines += [f"Skipped: {why}." for why in sorted(reasons)]
    return "\n".join(lines)


__all__ = ["PROBES", "RESULTS_FILE", "ProbeSettings", "parse_probes", "results_table", "run_probes"]
