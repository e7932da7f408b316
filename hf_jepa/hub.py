"""Hub integration: model cards rendered from Jinja templates, and uploading a saved model folder.

Each family adds a ``render_<family>_card(config, metrics, ...)`` that builds its `ModelCardData` and template
variables and calls the shared :func:`_render`. Templates live in the repository's ``model_cards/`` folder, packaged
as ``hf_jepa.model_cards`` (see :func:`template_text`).

Only the values actually given in ``metrics`` reach the card: a missing metric is left out (never filled with a
default), and the paper's published figures are quoted as the paper's, in a separate section.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import inspect
import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from huggingface_hub import EvalResult, ModelCard, ModelCardData


logger = logging.getLogger(__name__)

__all__ = [
    "CARD_TAGS",
    "DEFAULT_IGNORE_PATTERNS",
    "EPM_JEPA_CARD_TAGS",
    "I_JEPA_CARD_TAGS",
    "MODEL_ID_PLACEHOLDER",
    "T_JEPA_CARD_TAGS",
    "bro_jepa_result_rows",
    "config_fields",
    "epm_jepa_result_rows",
    "i_jepa_result_rows",
    "push_to_hub",
    "render_bro_jepa_card",
    "render_epm_jepa_card",
    "render_i_jepa_card",
    "render_t_jepa_card",
    "t_jepa_result_rows",
    "template_text",
]

LIBRARY_NAME = "hf-jepa"
LICENSE = "apache-2.0"
MNIST_DATASET_ID = "ylecun/mnist"
CARD_TAGS = ["jepa", "bro-jepa", "modular-arithmetic", "self-supervised", "mnist"]
EPM_JEPA_CARD_TAGS = ["jepa", "epm-jepa", "world-model", "moving-mnist", "lora", "peft"]
# The usage snippet of a card rendered before the model has a Hub id shows this; `push_to_hub` replaces it.
MODEL_ID_PLACEHOLDER = "path/to/hf-jepa-model"
# Never uploaded: Accelerate `save_state` checkpoints and tracker logs of the run.
DEFAULT_IGNORE_PATTERNS = ["checkpoints/*", "checkpoints/**", "logs/*", "logs/**", "runs/**", ".cache/**", "*.lock"]
# TrainingArguments fields that describe housekeeping, not the training recipe: left out of the card.
_TRAINING_HOUSEKEEPING = {
    "output_dir", "logging_steps", "save_steps", "save_total_limit", "resume_from_checkpoint", "log_with",
    "disable_progress_bar", "save_model",
}
_TEMPLATE_PACKAGE = "hf_jepa.model_cards"


# ---------------------------------------------------------------------------------------------------- templates


def _template_dirs() -> list[Path]:
    """Fallback template folders: `<repo>/model_cards` next to the `hf_jepa` source folder (editable installs and
    source checkouts), and `hf_jepa/model_cards` inside the package."""
    package_dir = Path(__file__).resolve().parent
    return [package_dir.parent / "model_cards", package_dir / "model_cards"]


def template_text(name: str) -> str:
    """The text of the card template `name` (e.g. ``"bro_jepa.md"``).

    Looked up as a resource of the ``hf_jepa.model_cards`` package (wheel installs, where pyproject maps
    ``model_cards/`` to it), else in the repository's ``model_cards/`` folder (editable installs, where setuptools'
    editable finder does not expose a data folder without ``__init__.py``)."""
    try:
        candidate = importlib.resources.files(_TEMPLATE_PACKAGE).joinpath(name)
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    for folder in _template_dirs():
        if (folder / name).is_file():
            return (folder / name).read_text(encoding="utf-8")
    searched = [_TEMPLATE_PACKAGE] + [str(d) for d in _template_dirs()]
    raise FileNotFoundError(f"model card template {name!r} not found (searched {searched})")


def _render(template_name: str, card_data: ModelCardData, **variables: Any) -> ModelCard:
    """Render `template_name` with `card_data` as YAML front matter and `variables` for the Jinja body.

    Runs of blank lines left by Jinja blocks are collapsed so that tables and sections stay tidy."""
    card = ModelCard.from_template(card_data, template_str=template_text(template_name), **variables)
    text = re.sub(r"\n{3,}", "\n\n", str(card).strip() + "\n")
    return ModelCard(text)


# ---------------------------------------------------------------------------------------------------- formatting


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _percent(value: Any) -> str:
    return f"{100.0 * value:.2f}%" if _is_number(value) else "n/a"


def _format_value(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return str(value).replace("|", "\\|")


def _as_dict(obj: Any) -> dict[str, Any]:
    """A dataclass instance, a mapping or None as a plain dict."""
    if obj is None:
        return {}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    return dict(vars(obj))


def config_fields(config_class) -> dict[str, Any]:
    """A family config's own settings -> their defaults, in declaration order.

    Works for both config styles of transformers 5: keyword `__init__` parameters and annotated dataclass fields.
    `PretrainedConfig`'s generic fields (`dtype`, `id2label`, ...) are left out."""
    from transformers import PretrainedConfig

    base = {f.name for f in dataclasses.fields(PretrainedConfig)} if dataclasses.is_dataclass(PretrainedConfig) else set()
    if issubclass(config_class, PretrainedConfig):
        base |= set(inspect.signature(PretrainedConfig.__init__).parameters)
    out: dict[str, Any] = {}
    for p in inspect.signature(config_class.__init__).parameters.values():
        if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in base:
            out[p.name] = None if p.default is inspect.Parameter.empty else p.default
    if dataclasses.is_dataclass(config_class):
        for name, default in dataclass_defaults(config_class).items():
            if name not in base and name not in out:
                out[name] = default
    return out


def dataclass_defaults(cls) -> dict[str, Any]:
    """Each field of a dataclass -> its default (`None` when it has none)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            out[f.name] = None
    return out


def _config_rows(config) -> list[tuple[str, str]]:
    """The family's own config fields, in declaration order."""
    return [(name, _format_value(getattr(config, name))) for name in config_fields(type(config)) if hasattr(config, name)]


def _per_operation(metrics: Mapping, key: str) -> dict[int, float]:
    """Per-op accuracies with int keys (JSON round trips turn them into strings)."""
    return {int(k): v for k, v in (metrics.get(key) or {}).items()}


def _signed(k: int) -> str:
    return f"+{k}" if k > 0 else str(k)


def _data_is_mnist(metrics: Mapping, data_args: Mapping) -> bool:
    """True when the data was MNIST (Hub or a local MNIST folder); False for the embedded digits or when unknown."""
    source = metrics.get("data_source") or data_args.get("data")
    if not source:
        return False
    return not any(word in str(source).lower() for word in ("embedded", "scikit"))


def _run_rows(metrics: Mapping[str, Any], data_label: str = "Data source") -> list[tuple[str, str]]:
    """The rows every family's table ends with: training time, data source, device and hardware (those present)."""
    rows: list[tuple[str, str]] = []
    if _is_number(metrics.get("train_time_s")):
        steps = f" ({metrics['train_steps']} steps)" if metrics.get("train_steps") is not None else ""
        rows.append(("Training time", f"{metrics['train_time_s']:.1f} s{steps}"))
    elif metrics.get("train_steps") is not None:
        rows.append(("Training steps", _format_value(metrics["train_steps"])))
    if metrics.get("data_source"):
        rows.append((data_label, _format_value(metrics["data_source"])))
    if metrics.get("device"):
        processes = metrics.get("num_processes")
        suffix = f" × {processes} process{'es' if processes != 1 else ''}" if processes is not None else ""
        rows.append(("Device", f"{metrics['device']}{suffix}"))
    if metrics.get("hardware"):
        rows.append(("Hardware", _format_value(metrics["hardware"])))
    return rows


def bro_jepa_result_rows(metrics: Mapping[str, Any], seen_operations: Iterable[int] = (-1, 1)) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the BRo-JEPA results present in `metrics` (also used by the CLI)."""
    seen = sorted(seen_operations)
    ops = sorted(_per_operation(metrics, "accuracy_per_operation"))
    unseen = [k for k in ops if k not in seen and k != 0]
    magnitudes = sorted({abs(k) for k in unseen})
    if unseen and set(unseen) == {s * m for m in magnitudes for s in (-1, 1)} and magnitudes == list(
        range(magnitudes[0], magnitudes[-1] + 1)
    ):
        unseen_text = f"±{magnitudes[0]}…±{magnitudes[-1]}"
    else:
        unseen_text = ", ".join(_signed(k) for k in unseen) or "none"
    seen_text = ", ".join(_signed(k) for k in seen)
    rows: list[tuple[str, str]] = []
    for key, name in (
        ("seen_accuracy", f"Seen-operation accuracy (k = {seen_text})"),
        ("zero_shot_accuracy", f"Zero-shot accuracy, mean over {len(unseen)} unseen ops ({unseen_text})" if unseen
         else "Zero-shot accuracy, unseen ops"),
        ("rollout_accuracy", "Rollout accuracy, unseen ops (repeated ±1 steps)"),
        ("rollout_seen_accuracy", "Rollout accuracy, seen ops"),
    ):
        if key in metrics and metrics[key] is not None:
            rows.append((name, _percent(metrics[key])))
    if _is_number(metrics.get("prototype_off_diagonal_cosine")):
        rows.append(("Prototype off-diagonal cosine (lower = better separated)",
                     f"{metrics['prototype_off_diagonal_cosine']:.4f}"))
    if metrics.get("eval_images") is not None:
        rows.append(("Test images evaluated", str(metrics["eval_images"])))
    return rows + _run_rows(metrics)


# ---------------------------------------------------------------------------------------------------- BRo-JEPA card


def _bro_jepa_names(config) -> tuple[str, str, str]:
    """(model-index name, title, one-line variant description) of a BRo-JEPA config."""
    encoder = {"mlp": "MLP", "cnn": "CNN", "resnet18": "ResNet-18"}.get(config.encoder_type, config.encoder_type)
    if config.objective == "supervised":
        short = "supervised"
        predictor = "supervised cross-entropy baseline"
    elif config.predictor_type == "block_rotation":
        short = "mfr" if config.rotation_frequencies == "multi" else "sfr"
        angle = "learnable" if config.learnable_angle else "fixed"
        predictor = f"{short.upper()} block-rotation predictor, {angle} angle"
    else:
        short = "additive"
        predictor = "additive-embedding MLP predictor"
    if config.objective != "supervised" and config.predictor_type == "additive_mlp" and config.composition_weight:
        predictor += f" + composition-consistency loss (weight {config.composition_weight:g})"
    model_name = f"bro-jepa-{short}-{config.encoder_type}"
    title = f"BRo-JEPA ({predictor.split(',')[0]}, {encoder} encoder)"
    objective = "JEPA objective (VICReg + EMA target encoder)" if config.objective == "jepa" else "supervised objective"
    variant = f"{encoder} encoder, {config.latent_dim}-dim latent, {predictor}, {objective}"
    return model_name, title, variant


def _eval_results(metrics: Mapping, config, mnist: bool, model_name: str) -> list[EvalResult]:
    if mnist:
        dataset = dict(dataset_type=MNIST_DATASET_ID, dataset_name="MNIST", dataset_split="test")
    else:
        dataset = dict(dataset_type="sklearn-digits", dataset_name="scikit-learn digits (upscaled to 28x28)",
                       dataset_split="test")
    task = dict(task_type="modular-arithmetic", task_name=f"Modular arithmetic y = (x + k) mod {config.modulus}")
    results = []
    for key, config_name, name in (
        ("zero_shot_accuracy", "zero_shot", "Zero-shot accuracy (unseen operations)"),
        ("seen_accuracy", "seen_operations", "Seen-operation accuracy"),
        ("rollout_accuracy", "rollout", "Rollout accuracy (unseen operations)"),
    ):
        value = metrics.get(key)
        if _is_number(value):
            results.append(EvalResult(**task, **dataset, metric_type="accuracy", metric_value=float(value),
                                      metric_name=name, metric_config=config_name))
    return results


def render_bro_jepa_card(
    config,
    metrics: Mapping[str, Any] | None,
    training_args: Any = None,
    data_args: Any = None,
    repo_id: str | None = None,
) -> ModelCard:
    """The model card of a BRo-JEPA checkpoint.

    Args:
        config: the `BroJepaConfig` of the model.
        metrics: what `BroJepaRecipe.evaluate` and the trainer recorded (or `eval_results.json` loaded back); only
            the keys present are shown and put in the `model-index`.
        training_args / data_args: `TrainingArguments` / `BroJepaDataArguments` (dataclasses or dicts), optional.
        repo_id: Hub id shown in the usage snippet; default :data:`MODEL_ID_PLACEHOLDER`, which `push_to_hub`
            replaces with the real id.
    """
    from . import __version__

    metrics = dict(metrics or {})
    training = _as_dict(training_args)
    data = _as_dict(data_args)
    mnist = _data_is_mnist(metrics, data)
    model_name, title, variant = _bro_jepa_names(config)

    # With `auto_map` (modeling code saved next to the weights) plain transformers loads the checkpoint
    # (`trust_remote_code=True`), so the Hub's transformers snippet works; otherwise it needs `import hf_jepa`.
    remote_code = bool(getattr(config, "auto_map", None))
    card_data = ModelCardData(
        library_name="transformers" if remote_code else LIBRARY_NAME,
        license=LICENSE,
        tags=[*CARD_TAGS, LIBRARY_NAME],
        datasets=[MNIST_DATASET_ID] if mnist else None,
        metrics=["accuracy"],
        model_name=model_name,
        eval_results=_eval_results(metrics, config, mnist, model_name) or None,
    )

    training_rows = [(k, _format_value(v)) for k, v in training.items() if k not in _TRAINING_HOUSEKEEPING]
    if training and metrics.get("num_processes") is not None:
        effective = (training.get("per_device_batch_size") or 0) * (training.get("gradient_accumulation_steps") or 1)
        training_rows.append(("effective batch size", str(effective * int(metrics["num_processes"]))))
    data_rows = []
    for key, value in data.items():
        if key == "plot":
            continue
        if key == "data" and value is None:
            value = "default ($HF_JEPA_MNIST, else Hub ylecun/mnist, else embedded digits)"
        elif key in ("prototype_images", "eval_images") and value == 0:
            value = "0 (all)"
        data_rows.append((key, _format_value(value)))

    direct = _per_operation(metrics, "accuracy_per_operation")
    rolled = _per_operation(metrics, "rollout_accuracy_per_operation")
    per_op_rows = [
        (_signed(k) + (" *" if k in (-1, 1) else ""), _percent(direct.get(k)), _percent(rolled.get(k)))
        for k in sorted(set(direct) | set(rolled))
    ]
    data_note = None
    if not mnist and metrics.get("data_source"):
        data_note = (f"Data: {metrics['data_source']}. This is not MNIST, so these numbers are not comparable with the "
                     "paper's.")

    return _render(
        "bro_jepa.md",
        card_data,
        title=title,
        variant=variant,
        model_id=repo_id or MODEL_ID_PLACEHOLDER,
        modulus=config.modulus,
        pixel_mean=config.pixel_mean,
        pixel_std=config.pixel_std,
        config_rows=_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=bro_jepa_result_rows(metrics),
        per_op_rows=per_op_rows,
        data_note=data_note,
        data_is_mnist=mnist,
        supervised=config.objective == "supervised",
        remote_code=remote_code,
        pca_plot=metrics.get("pca_plot"),
        zero_shot_text=_percent(metrics["zero_shot_accuracy"]) if _is_number(metrics.get("zero_shot_accuracy")) else None,
        rollout_text=_percent(metrics["rollout_accuracy"]) if _is_number(metrics.get("rollout_accuracy")) else None,
        hf_jepa_version=__version__,
    )


# ---------------------------------------------------------------------------------------------------- EPM-JEPA card

# Sub-folder of a saved track-C model holding the experience adapter (peft files), see `save_experience_adapter`.
EPM_JEPA_ADAPTER_FOLDER = "experience_adapter"
_EPM_TRACK_LETTERS = {"vanilla": "A", "ei": "B", "epm": "C"}


def _epm_track_name(track: str) -> str:
    from .modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES

    return TRACK_NAMES.get(track, str(track))


def _number(value: Any, digits: int = 4) -> str:
    return f"{value:.{digits}f}"


def epm_jepa_result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the EPM-JEPA results present in `metrics` (what `EpmJepaRecipe.evaluate` and
    the trainer recorded); a missing or non-numeric metric gives no row. Also used by the CLI's printed table."""
    rows: list[tuple[str, str]] = []
    if metrics.get("track"):
        stage = f" ({metrics['stage']} stage)" if metrics.get("stage") else ""
        rows.append(("Track", f"{_epm_track_name(metrics['track'])}{stage}"))
    for key, name in (
        ("d_shift", "D_shift: normalised error on held-out shifted sequences (g > 0)"),
        ("d_shift_copy_last", "D_shift of copying the last latent (baseline)"),
        ("d_train", "D on the training distribution (g = 0)"),
        ("d_train_copy_last", "D on g = 0 of copying the last latent (baseline)"),
    ):
        if _is_number(metrics.get(key)):
            rows.append((name, _number(metrics[key])))
    for key, name in (
        ("gate_fire_rate_shift", "Surprisal-gate firing rate, shifted sequences"),
        ("gate_fire_rate_train", "Surprisal-gate firing rate, g = 0"),
    ):
        if _is_number(metrics.get(key)):
            rows.append((name, _percent(metrics[key])))
    if _is_number(metrics.get("sigma_embed_shift")):
        value = metrics["sigma_embed_shift"]
        flag = " (below the paper's 0.5 safety threshold)" if value < 0.5 else ""
        rows.append(("sigma_embed of the predicted latents, shifted sequences", f"{value:.4f}{flag}"))
    if _is_number(metrics.get("eval_predictions")):
        rows.append(("One-step predictions scored (shifted set)", str(int(metrics["eval_predictions"]))))
    if _is_number(metrics.get("buffer_occupancy")):
        rows.append(("Experience buffer occupancy (fraction of capacity)", _percent(metrics["buffer_occupancy"])))
    if _is_number(metrics.get("buffer_turnover")):
        rows.append(("Experience buffer turnover (writes / capacity)", f"{metrics['buffer_turnover']:.2f}"))
    return rows + _run_rows(metrics, data_label="Digit source")


def _epm_jepa_eval_results(metrics: Mapping, mnist: bool, data_source: str | None) -> list[EvalResult]:
    digits = "MNIST test digits" if mnist else (f"{data_source} (not MNIST)" if data_source else "unknown digits")
    dataset = dict(dataset_type="moving-mnist-gravity", dataset_name=f"Moving MNIST with gravity (hf-jepa; {digits})",
                   dataset_split="test")
    task = dict(task_type="latent-world-model",
                task_name="One-step latent prediction (normalised error D, lower is better)")
    results = []
    for key, config_name, name in (
        ("d_shift", "shift", "D_shift (shifted gravity)"),
        ("d_train", "train", "D on the training distribution (g = 0)"),
    ):
        value = metrics.get(key)
        if _is_number(value):
            results.append(EvalResult(**task, **dataset, metric_type="normalized_prediction_error",
                                      metric_value=float(value), metric_name=name, metric_config=config_name))
    return results


def _reproduction_text(reproduction: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(markdown table, one-line description) of a `reproduce_epm_jepa` summary, or (None, None)."""
    if not reproduction:
        return None, None
    from .reproductions.epm_jepa import format_results_table

    table = format_results_table(reproduction)
    parts = []
    if reproduction.get("seeds") is not None:
        seeds = reproduction["seeds"]
        listed = ", ".join(str(s) for s in seeds) if isinstance(seeds, (list, tuple)) else str(seeds)
        parts.append(f"seeds {listed}")
    if reproduction.get("pretrain_steps") is not None:
        parts.append(f"{reproduction['pretrain_steps']} pretraining steps (g = 0)")
    if reproduction.get("experience_steps") is not None:
        parts.append(f"n = {reproduction['experience_steps']} experience steps")
    if reproduction.get("preset"):
        parts.append(f"preset `{reproduction['preset']}`")
    if reproduction.get("data_source"):
        parts.append(f"digits: {reproduction['data_source']}")
    note = "; ".join(parts) or None
    if reproduction.get("quick"):
        note = (note + ". " if note else "") + "**Smoke run (`--quick`): tiny model, a few steps; not a result.**"
    return table, note


def render_epm_jepa_card(
    config,
    metrics: Mapping[str, Any] | None,
    training_args: Any = None,
    data_args: Any = None,
    reproduction: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
) -> ModelCard:
    """The model card of an EPM-JEPA checkpoint (any track, pretraining or experience stage).

    Args:
        config: the `EpmJepaConfig` of the model.
        metrics: what `EpmJepaRecipe.evaluate` and the trainer recorded (or `eval_results.json` loaded back); only
            the keys present are shown and put in the `model-index` (D_shift and D on g = 0).
        training_args / data_args: `TrainingArguments` / `EpmJepaDataArguments` (dataclasses or dicts), optional.
        reproduction: optional summary returned by `reproduce_epm_jepa`; rendered with `format_results_table`.
        repo_id: Hub id shown in the usage snippet; default :data:`MODEL_ID_PLACEHOLDER`, which `push_to_hub`
            replaces with the real id.
    """
    from . import __version__

    metrics = dict(metrics or {})
    training = _as_dict(training_args)
    data = _as_dict(data_args)
    mnist = _data_is_mnist(metrics, data)
    track = config.track
    stage = metrics.get("stage") or data.get("stage")
    model_name = f"epm-jepa-{track}" + ("-base" if stage == "pretrain" else "")
    remote_code = bool(getattr(config, "auto_map", None))

    card_data = ModelCardData(
        library_name="transformers" if remote_code else LIBRARY_NAME,
        license=LICENSE,
        tags=[*EPM_JEPA_CARD_TAGS, LIBRARY_NAME],
        datasets=[MNIST_DATASET_ID] if mnist else None,
        model_name=model_name,
        eval_results=_epm_jepa_eval_results(metrics, mnist, metrics.get("data_source")) or None,
    )

    training_rows = [(k, _format_value(v)) for k, v in training.items() if k not in _TRAINING_HOUSEKEEPING]
    if training and metrics.get("num_processes") is not None:
        effective = (training.get("per_device_batch_size") or 0) * (training.get("gradient_accumulation_steps") or 1)
        training_rows.append(("effective batch size", str(effective * int(metrics["num_processes"]))))
    data_rows = []
    for key, value in data.items():
        if key == "plot":
            continue
        if key == "data" and value is None:
            value = "default ($HF_JEPA_MNIST, else Hub ylecun/mnist, else embedded digits)"
        data_rows.append((key, _format_value(value)))

    if stage == "adapt":
        steps = metrics.get("train_steps", training.get("max_steps"))
        n_text = f"n = {steps} " if steps is not None else ""
        stage_text = (f"after the experience phase ({n_text}optimiser steps on shifted sequences, started from a "
                      "vanilla base pretrained on g = 0)")
    elif stage == "pretrain":
        stage_text = "pretrained on the training distribution (g = 0, no gravity), before any experience"
    else:
        stage_text = None

    shift_range = None
    if data.get("shift_gravity_min") is not None and data.get("shift_gravity_max") is not None:
        shift_range = f"({data['shift_gravity_min']:g}, {data['shift_gravity_max']:g}]"
    data_note = None
    if not mnist and metrics.get("data_source"):
        data_note = (f"Digits: {metrics['data_source']}. These are not MNIST digits, so the numbers are not "
                     "comparable with the paper's.")
    reproduction_table, reproduction_note = _reproduction_text(reproduction)

    return _render(
        "epm_jepa.md",
        card_data,
        title=f"EPM-JEPA world model (track {_epm_track_name(track)})",
        track=track,
        track_letter=_EPM_TRACK_LETTERS.get(track, "?"),
        track_name=_epm_track_name(track),
        stage=stage,
        stage_text=stage_text,
        uses_memory=track in ("ei", "epm"),
        has_adapter=track == "epm",
        adapter_folder=EPM_JEPA_ADAPTER_FOLDER,
        model_id=repo_id or MODEL_ID_PLACEHOLDER,
        image_size=config.image_size,
        num_channels=config.num_channels,
        context_length=config.context_length,
        latent_dim=config.latent_dim,
        lora_rank=config.lora_rank,
        buffer_capacity=config.buffer_capacity,
        buffer_entry=config.buffer_entry,
        config_rows=_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=epm_jepa_result_rows(metrics),
        data_source=metrics.get("data_source"),
        device=metrics.get("device"),
        eval_predictions=metrics.get("eval_predictions") if _is_number(metrics.get("eval_predictions")) else None,
        shift_range=shift_range,
        data_note=data_note,
        data_is_mnist=mnist,
        remote_code=remote_code,
        diagnostics_plot=metrics.get("diagnostics_plot"),
        d_shift_text=_number(metrics["d_shift"]) if _is_number(metrics.get("d_shift")) else None,
        copy_last_text=(_number(metrics["d_shift_copy_last"]) if _is_number(metrics.get("d_shift_copy_last"))
                        else None),
        reproduction_table=reproduction_table,
        reproduction_note=reproduction_note,
        hf_jepa_version=__version__,
    )


# ---------------------------------------------------------------------------------------------------- T-JEPA / I-JEPA

T_JEPA_CARD_TAGS = ["jepa", "t-jepa", "jepa-paradox", "text", "bert", "self-supervised", "feature-extraction"]
I_JEPA_CARD_TAGS = ["jepa", "i-jepa", "jepa-paradox", "vision", "vit", "self-supervised", "image-feature-extraction"]
C4_DATASET_ID = "allenai/c4"

# objective -> (display name, model-index name, one-line description)
_T_JEPA_OBJECTIVES = {
    "jepa": ("T-JEPA", "t-jepa",
             "latent prediction: the predictor regresses the EMA target encoder's layer-normalised token "
             "representations of the target spans from the context"),
    "mlm": ("MLM baseline", "t-jepa-mlm-baseline",
            "BERT masked language modelling: the same spans are replaced by `[MASK]` and their tokens predicted with "
            "a softmax over the vocabulary (cross-entropy)"),
    "vicreg": ("VICReg baseline", "t-jepa-vicreg-baseline",
               "VICReg on two views of each sentence (two independent span maskings): invariance + variance + "
               "covariance terms on the projected, mean-pooled encoder outputs"),
    "barlow_twins": ("Barlow Twins baseline", "t-jepa-barlow-twins-baseline",
                     "Barlow Twins on two views of each sentence: the cross-correlation of the projected, mean-pooled "
                     "encoder outputs is pushed towards the identity"),
    "byol": ("BYOL baseline", "t-jepa-byol-baseline",
             "BYOL on two views of each sentence: an online predictor regresses the EMA target network's projection "
             "of the other view (cosine loss, symmetrised)"),
}
# Step metrics: present with the value None means "looked for, not observed in the run".
_STEP_METRICS = {
    "mi_saturation_step": "MI proxy saturation step",
    "divergence_step": "Train/validation loss divergence step",
    "rank_collapse_step": "Effective-rank collapse step",
}
_PARADOX_KNOWN_KEYS = {
    "objective", "val_loss", "mi_proxy", "effective_rank", "cosine_mean", "cosine_variance", "embedding_std",
    "probe_accuracy", "retrieval_recall_at_1", "retrieval_recall_at_10", "irreducible_variance", *_STEP_METRICS,
    "data_source", "diagnostics_plot", "train_time_s", "train_steps", "device", "num_processes", "hardware",
}


def _generic_rows(metrics: Mapping[str, Any], known: set) -> list[tuple[str, str]]:
    """Rows for scalar metrics the card has no special wording for (nested values and None are left out)."""
    rows = []
    for key, value in metrics.items():
        if key in known or value is None or isinstance(value, (dict, list, tuple)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        rows.append((f"`{key}`", _format_value(value)))
    return rows


def _paradox_result_rows(metrics: Mapping[str, Any], image: bool) -> list[tuple[str, str]]:
    """The rows shared by the T-JEPA and I-JEPA cards; only what `metrics` holds."""
    rows: list[tuple[str, str]] = []
    objective = metrics.get("objective")
    if objective:
        name = _T_JEPA_OBJECTIVES.get(objective, (None,))[0] if not image else None
        rows.append(("Objective", f"{name} (`{objective}`)" if name else _format_value(objective)))
    for key, name, digits in (
        ("val_loss", "Validation loss (the objective's own)", 4),
        ("mi_proxy", "MI proxy, InfoNCE bound (nats)", 4),
        ("effective_rank", "Effective rank of the validation embeddings", 2),
        ("cosine_mean", "Mean pairwise cosine similarity of embeddings", 4),
        ("cosine_variance", "Variance of pairwise cosine similarity", None),
        ("embedding_std", "Embedding std (mean over dimensions)", 4),
        ("irreducible_variance", "Irreducible conditional target variance", 4),
    ):
        if _is_number(metrics.get(key)):
            rows.append((name, _number(metrics[key], digits) if digits else f"{metrics[key]:.4g}"))
    probe_task = "digit classification" if image else "topic classification"
    for key, name in (
        ("probe_accuracy", f"Linear-probe accuracy ({probe_task})"),
        ("retrieval_recall_at_1", "Retrieval recall@1 (next sentence)" if not image else "Retrieval recall@1"),
        ("retrieval_recall_at_10", "Retrieval recall@10 (next sentence)" if not image else "Retrieval recall@10"),
    ):
        if _is_number(metrics.get(key)):
            rows.append((name, _percent(metrics[key])))
    for key, name in _STEP_METRICS.items():
        if key in metrics:
            value = metrics[key]
            if value is None:
                rows.append((name, "not observed"))
            elif _is_number(value):
                rows.append((name, f"{int(value):,}"))
    return rows + _run_rows(metrics) + _generic_rows(metrics, _PARADOX_KNOWN_KEYS)


def t_jepa_result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the T-JEPA (or text baseline) results present in `metrics`; a missing or
    non-numeric metric gives no row, a step metric present as None reads "not observed", other scalar keys get a
    generic row. Also usable for the CLI's printed table."""
    return _paradox_result_rows(metrics, image=False)


def i_jepa_result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the I-JEPA baseline's results present in `metrics` (see `t_jepa_result_rows`)."""
    return _paradox_result_rows(metrics, image=True)


def _text_data_is_c4(metrics: Mapping, data: Mapping) -> bool:
    source = metrics.get("data_source") or data.get("data") or data.get("corpus")
    return bool(source) and "c4" in str(source).lower()


def _paradox_eval_results(metrics: Mapping, task: dict, probe_dataset: dict, retrieval_dataset: dict | None,
                          ) -> list[EvalResult]:
    results = []
    if _is_number(metrics.get("probe_accuracy")):
        results.append(EvalResult(**task, **probe_dataset, metric_type="accuracy",
                                  metric_value=float(metrics["probe_accuracy"]), metric_name="Linear-probe accuracy",
                                  metric_config="linear_probe"))
    if retrieval_dataset is not None:
        for key, k in (("retrieval_recall_at_1", 1), ("retrieval_recall_at_10", 10)):
            if _is_number(metrics.get(key)):
                results.append(EvalResult(task_type="sentence-similarity", task_name="Next-sentence retrieval",
                                          **retrieval_dataset, metric_type=f"recall_at_{k}",
                                          metric_value=float(metrics[key]), metric_name=f"Recall@{k}",
                                          metric_config="retrieval"))
    return results


def _reproduction_table(reproduction: Mapping[str, Any] | None, label: str) -> tuple[str | None, str | None]:
    """A markdown table of a multi-run summary: `reproduction["runs"]` (or `["objectives"]`) maps a run name (an
    objective, or a family) to its metrics; other scalar keys of `reproduction` become the one-line settings note."""
    if not reproduction:
        return None, None
    runs = reproduction.get("runs") or reproduction.get("objectives") or {}
    columns = [(key, name) for key, name in (
        ("probe_accuracy", "Probe accuracy"), ("retrieval_recall_at_1", "Recall@1"), ("mi_proxy", "MI proxy (nats)"),
        ("effective_rank", "Effective rank"), ("cosine_mean", "Mean cosine"), ("val_loss", "Validation loss"),
        ("divergence_step", "Divergence step"),
    ) if any(isinstance(m, Mapping) and key in m for m in runs.values())]
    table = None
    if runs and columns:
        lines = [f"| {label} | " + " | ".join(name for _, name in columns) + " |",
                 "|---|" + "---|" * len(columns)]
        for run, run_metrics in runs.items():
            run_metrics = run_metrics if isinstance(run_metrics, Mapping) else {}
            cells = []
            for key, _ in columns:
                value = run_metrics.get(key)
                if key in ("probe_accuracy", "retrieval_recall_at_1") and _is_number(value):
                    cells.append(_percent(value))
                elif key == "divergence_step":
                    cells.append("not observed" if key in run_metrics and value is None
                                 else (f"{int(value):,}" if _is_number(value) else "–"))
                elif _is_number(value):
                    cells.append(_number(value, 2 if key == "effective_rank" else 4))
                else:
                    cells.append("–")
            name = _T_JEPA_OBJECTIVES.get(run, (run,))[0]
            lines.append(f"| {_format_value(name)} | " + " | ".join(cells) + " |")
        table = "\n".join(lines)
    notes = [f"{key}: {_format_value(value)}" for key, value in reproduction.items()
             if key not in ("runs", "objectives", "quick") and not isinstance(value, (dict, list, tuple))
             and value is not None]
    note = "; ".join(notes) or None
    if reproduction.get("quick"):
        note = (note + ". " if note else "") + "**Smoke run (`--quick`): tiny models, a few steps; not a result.**"
    return table, note


def _settings_rows(training: Mapping, data: Mapping, metrics: Mapping) -> tuple[list, list]:
    training_rows = [(k, _format_value(v)) for k, v in training.items() if k not in _TRAINING_HOUSEKEEPING]
    if training.get("per_device_batch_size") and metrics.get("num_processes") is not None:
        effective = training["per_device_batch_size"] * (training.get("gradient_accumulation_steps") or 1)
        training_rows.append(("effective batch size", str(effective * int(metrics["num_processes"]))))
    data_rows = [(k, _format_value(v)) for k, v in data.items() if k != "plot"]
    return training_rows, data_rows


def _own_config_rows(config) -> list[tuple[str, str]]:
    """The family's own config fields except the nested backbone config (shown as its own rows)."""
    return [(k, v) for k, v in _config_rows(config) if k != "backbone_config"]


def render_t_jepa_card(
    config,
    metrics: Mapping[str, Any] | None,
    training_args: Any = None,
    data_args: Any = None,
    reproduction: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
) -> ModelCard:
    """The model card of a T-JEPA checkpoint, or of one of its text baselines (`config.objective`).

    Args:
        config: the `TJepaConfig` of the model.
        metrics: what the T-JEPA recipe and the trainer recorded (or `eval_results.json` loaded back): `objective`,
            `val_loss`, `mi_proxy`, `effective_rank`, `cosine_mean`, `cosine_variance`, `embedding_std`,
            `probe_accuracy`, `retrieval_recall_at_1`, `retrieval_recall_at_10`, `irreducible_variance`,
            `mi_saturation_step`, `divergence_step`, `rank_collapse_step` (None: not observed), `data_source`,
            `diagnostics_plot` (a PNG file name next to the card), `train_time_s`, `train_steps`, `device`,
            `num_processes`; other scalar keys get generic rows. Only the keys present are shown.
        training_args / data_args: `TrainingArguments` / the recipe's data arguments (dataclasses or dicts).
        reproduction: optional multi-objective summary, `{"runs": {objective: metrics, ...}, <settings>...}`.
        repo_id: Hub id shown in the usage snippets; default :data:`MODEL_ID_PLACEHOLDER`, which `push_to_hub`
            replaces with the real id.
    """
    from . import __version__

    metrics = dict(metrics or {})
    training, data = _as_dict(training_args), _as_dict(data_args)
    objective = config.objective
    display, model_name, objective_text = _T_JEPA_OBJECTIVES.get(objective, (objective, f"t-jepa-{objective}", ""))
    backbone = config.backbone_config
    is_bert_large = (backbone.hidden_size, backbone.num_hidden_layers, backbone.num_attention_heads,
                     backbone.intermediate_size) == (1024, 24, 16, 4096)
    c4 = _text_data_is_c4(metrics, data)
    remote_code = bool(getattr(config, "auto_map", None))
    corpus = metrics.get("data_source") or None
    probe_dataset = dict(dataset_type="hf-jepa-pydoc-topics", dataset_name="CPython documentation sentences, "
                         "coarse topic classes (hf-jepa)", dataset_split="test")
    retrieval_dataset = dict(dataset_type="hf-jepa-pydoc-next-sentence", dataset_name="CPython documentation "
                             "sentences, next-sentence retrieval (hf-jepa)", dataset_split="test")
    if metrics.get("data_source") and not c4 and "embedded" not in str(metrics["data_source"]).lower():
        probe_dataset["dataset_name"] = retrieval_dataset["dataset_name"] = str(metrics["data_source"])
    eval_results = _paradox_eval_results(
        metrics, dict(task_type="text-classification", task_name="Linear probe on frozen sentence embeddings"),
        probe_dataset, retrieval_dataset)
    card_data = ModelCardData(
        library_name="transformers" if remote_code else LIBRARY_NAME,
        license=LICENSE,
        tags=[*T_JEPA_CARD_TAGS, *([objective.replace("_", "-")] if objective != "jepa" else []), LIBRARY_NAME],
        pipeline_tag="feature-extraction",
        datasets=[C4_DATASET_ID] if c4 else None,
        model_name=model_name,
        eval_results=eval_results or None,
    )
    training_rows, data_rows = _settings_rows(training, data, metrics)
    reproduction_table, reproduction_note = _reproduction_table(reproduction, "Objective")
    number = lambda key, digits=4: _number(metrics[key], digits) if _is_number(metrics.get(key)) else None  # noqa: E731
    divergence = metrics.get("divergence_step")
    return _render(
        "t_jepa.md",
        card_data,
        title=f"{display} (text JEPA study, BERT backbone)" if objective != "jepa" else
        "T-JEPA: I-JEPA's latent prediction on text (BERT backbone)",
        objective=objective,
        objective_name=display,
        objective_text=objective_text,
        is_jepa=objective == "jepa",
        uses_target_encoder=config.uses_target_encoder,
        model_id=repo_id or MODEL_ID_PLACEHOLDER,
        hidden_size=backbone.hidden_size,
        num_layers=backbone.num_hidden_layers,
        num_heads=backbone.num_attention_heads,
        intermediate_size=backbone.intermediate_size,
        vocab_size=backbone.vocab_size,
        max_positions=backbone.max_position_embeddings,
        is_bert_large=is_bert_large,
        predictor_hidden_size=config.predictor_hidden_size,
        predictor_num_layers=config.predictor_num_layers,
        loss_name="squared error" if config.loss_type == "mse" else "smooth L1",
        mask_ratio=config.mask_ratio,
        min_span=config.min_span_length,
        max_span=config.max_span_length,
        num_spans=config.num_spans,
        normalize_targets=config.normalize_targets,
        config_rows=_own_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=t_jepa_result_rows(metrics),
        corpus=corpus,
        data_is_c4=c4,
        device=metrics.get("device"),
        remote_code=remote_code,
        diagnostics_plot=metrics.get("diagnostics_plot"),
        mi_text=number("mi_proxy"),
        rank_text=number("effective_rank", 2),
        probe_text=_percent(metrics["probe_accuracy"]) if _is_number(metrics.get("probe_accuracy")) else None,
        divergence_text=(f"{int(divergence):,}" if _is_number(divergence) else
                         ("not observed" if "divergence_step" in metrics and divergence is None else None)),
        reproduction_table=reproduction_table,
        reproduction_note=reproduction_note,
        hf_jepa_version=__version__,
    )


def render_i_jepa_card(
    config,
    metrics: Mapping[str, Any] | None,
    training_args: Any = None,
    data_args: Any = None,
    reproduction: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
) -> ModelCard:
    """The model card of an I-JEPA checkpoint, the image control of the JEPA-paradox study.

    Args:
        config: the `IJepaConfig` of the model (`backbone_config` a ViTConfig; `pixel_mean` / `pixel_std`).
        metrics: as for :func:`render_t_jepa_card` (`probe_accuracy` is digit classification here); only the keys
            present are shown.
        training_args / data_args / reproduction / repo_id: as for :func:`render_t_jepa_card`.
    """
    from . import __version__

    metrics = dict(metrics or {})
    training, data = _as_dict(training_args), _as_dict(data_args)
    backbone = config.backbone_config
    mnist = _data_is_mnist(metrics, data)
    remote_code = bool(getattr(config, "auto_map", None))
    if mnist:
        dataset = dict(dataset_type=MNIST_DATASET_ID, dataset_name="MNIST", dataset_split="test")
    else:
        source = metrics.get("data_source")
        dataset = dict(dataset_type="hf-jepa-images", dataset_name=str(source) if source else "unknown images",
                       dataset_split="test")
    eval_results = _paradox_eval_results(
        metrics, dict(task_type="image-classification", task_name="Linear probe on frozen image embeddings"),
        dataset, None)
    card_data = ModelCardData(
        library_name="transformers" if remote_code else LIBRARY_NAME,
        license=LICENSE,
        tags=[*I_JEPA_CARD_TAGS, LIBRARY_NAME],
        pipeline_tag="image-feature-extraction",
        datasets=[MNIST_DATASET_ID] if mnist else None,
        model_name="i-jepa",
        eval_results=eval_results or None,
    )
    training_rows, data_rows = _settings_rows(training, data, metrics)
    reproduction_table, reproduction_note = _reproduction_table(reproduction, "Run")
    image_size, patch_size = backbone.image_size, backbone.patch_size
    data_note = None
    if not mnist and metrics.get("data_source"):
        data_note = f"Images: {metrics['data_source']}. These are not MNIST digits."
    return _render(
        "i_jepa.md",
        card_data,
        title="I-JEPA baseline (image control of the JEPA-paradox study, ViT backbone)",
        model_id=repo_id or MODEL_ID_PLACEHOLDER,
        hidden_size=backbone.hidden_size,
        num_layers=backbone.num_hidden_layers,
        num_heads=backbone.num_attention_heads,
        image_size=image_size,
        patch_size=patch_size,
        grid_size=image_size // patch_size,
        num_channels=backbone.num_channels,
        pixel_mean=_format_value(list(config.pixel_mean)),
        pixel_std=_format_value(list(config.pixel_std)),
        predictor_hidden_size=config.predictor_hidden_size,
        predictor_num_layers=config.predictor_num_layers,
        num_target_blocks=config.num_target_blocks,
        loss_name="smooth L1" if config.loss_type == "smooth_l1" else "squared error",
        config_rows=_own_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=i_jepa_result_rows(metrics),
        data_is_mnist=mnist,
        data_note=data_note,
        device=metrics.get("device"),
        data_source=metrics.get("data_source"),
        remote_code=remote_code,
        diagnostics_plot=metrics.get("diagnostics_plot"),
        mi_text=_number(metrics["mi_proxy"]) if _is_number(metrics.get("mi_proxy")) else None,
        rank_text=_number(metrics["effective_rank"], 2) if _is_number(metrics.get("effective_rank")) else None,
        reproduction_table=reproduction_table,
        reproduction_note=reproduction_note,
        hf_jepa_version=__version__,
    )


# ------------------------------------------------------------------------------------------------ JEPA-Reasoner

JEPA_REASONER_CARD_TAGS = ["jepa", "jepa-reasoner", "latent-reasoning", "hypersphere", "synthetic-data"]

_JEPA_REASONER_ROLES = {
    "jepa_reasoner": ("JEPA-Reasoner (latent reasoner)", "jepa-reasoner",
                      "The reasoner alone: it turns a prompt into a latent chain; pair it with a Talker to get text."),
    "jepa_mono_talker": ("Mono-Talker", "jepa-mono-talker",
                         "A Mono-Talker (decoder only) trained on a frozen reasoner's latent chains."),
    "jepa_dual_talker": ("Dual-Talker", "jepa-dual-talker",
                         "A Dual-Talker (context encoder + decoder) trained on a frozen reasoner's latent chains."),
    "jepa_reasoner_with_talker": ("JEPA-Reasoner + Talker", "jepa-reasoner-with-talker",
                                  "A reasoner and its Talker in one checkpoint: text in, latent chain, text out."),
    "jepa_coupled_lm": ("coupled transformer (baseline)", "jepa-coupled-lm",
                        "The paper's coupled baseline: a standard next-token transformer of the reasoner's size."),
    "jepa_coconut": ("COCONUT-style latent LM (baseline)", "jepa-coconut",
                     "The coupled latent baseline: continuous thoughts (the last hidden state fed back as the next "
                     "input embedding) between prompt and answer, then tokens, in one model."),
}

_JEPA_REASONER_METRICS = {
    "accuracy": ("task accuracy (greedy)", _percent),
    "accuracy_shuffled_chain": ("accuracy with another example's latent chain (ablation)", _percent),
    "eval_loss": ("eval loss", lambda v: _number(v)),
    "teacher_forced_cosine": ("teacher-forced cosine to the target latents", lambda v: _number(v)),
    "free_running_cosine": ("free-running chain cosine to the target latents", lambda v: _number(v)),
    "nearest_token_cosine": ("cosine of a predicted latent to its nearest vocabulary latent", lambda v: _number(v)),
    "second_token_cosine": ("... to its second-nearest vocabulary latent", lambda v: _number(v)),
    "eval_examples": ("eval examples", str),
    "train_steps": ("training steps", str),
    "train_time_s": ("training time (s)", lambda v: f"{v:.1f}"),
}


def jepa_reasoner_result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The card/CLI rows of a JEPA-Reasoner-family run's metrics (only the keys present)."""
    rows = [(label, fmt(metrics[key])) for key, (label, fmt) in _JEPA_REASONER_METRICS.items()
            if _is_number(metrics.get(key))]
    if metrics.get("example_answer"):
        rows.append(("first eval answer", f"`{_format_value(metrics['example_answer'])}`"))
    return rows


def _architecture_rows(config) -> list[tuple[str, str]]:
    subs = [("reasoner", config.reasoner_config), ("talker", config.talker_config)] \
        if getattr(config, "model_type", "") == "jepa_reasoner_with_talker" else [("", config)]
    rows = []
    for prefix, sub in subs:
        for key in ("vocab_size", "hidden_size", "num_encoder_layers", "num_hidden_layers", "num_context_layers",
                    "num_attention_heads", "intermediate_size", "latent_size", "num_reasoning_steps",
                    "num_latent_thoughts", "cosine_loss_scale", "max_position_embeddings"):
            if hasattr(sub, key):
                rows.append((f"{prefix} {key}".strip(), _format_value(getattr(sub, key))))
    return rows


def render_jepa_reasoner_card(config, metrics: Mapping[str, Any] | None, training_args: Any = None,
                              data_args: Any = None, repo_id: str | None = None,
                              example_prompt: str | None = None) -> ModelCard:
    """The model card of any JEPA-Reasoner-family checkpoint: the reasoner, a Talker, the reasoner+Talker pair, or
    one of the coupled baselines (chosen by `config.model_type`). Only the metrics present are shown."""
    metrics = dict(metrics or {})
    training, data = _as_dict(training_args), _as_dict(data_args)
    model_type = config.model_type
    role, model_name, role_text = _JEPA_REASONER_ROLES.get(model_type, (model_type, model_type, ""))
    remote_code = bool(getattr(config, "auto_map", None))
    training_rows, data_rows = _settings_rows(training, data, metrics)
    card_data = ModelCardData(library_name="transformers" if remote_code else LIBRARY_NAME, license=LICENSE,
                              tags=[*JEPA_REASONER_CARD_TAGS, LIBRARY_NAME], model_name=model_name)
    steps = getattr(getattr(config, "reasoner_config", config), "num_reasoning_steps", 8)
    return _render(
        "jepa_reasoner.md",
        card_data,
        title=f"{role}" + (f" on {data['task']}" if data.get("task") else ""),
        role=role,
        role_text=role_text,
        model_type=model_type,
        model_id=repo_id or MODEL_ID_PLACEHOLDER,
        architecture_rows=_architecture_rows(config),
        example_prompt=example_prompt or "n3 n7 , n3 n1 ? n7",
        num_steps=steps,
        remote_code=remote_code,
        result_rows=jepa_reasoner_result_rows(metrics),
        data_source=metrics.get("data_source"),
        device=metrics.get("device"),
        mixed_latents_plot=metrics.get("mixed_latents_plot"),
        config_rows=[(k, v) for k, v in _config_rows(config) if not k.endswith("_config")],
        training_rows=training_rows,
        data_rows=data_rows,
    )


# ---------------------------------------------------------------------------------------------------- upload


def push_to_hub(
    model_dir: str | os.PathLike,
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload hf-jepa model",
    ignore_patterns: list[str] | None = None,
) -> str:
    """Upload a saved model folder (weights, config, card, image processor, figures, metrics) to `repo_id`.

    Creates the repo if needed and uploads the folder in one commit with `huggingface_hub.upload_folder` (not
    `PreTrainedModel.push_to_hub`, which would replace README.md with a default card). Accelerate checkpoints and
    tracker logs are left out (`DEFAULT_IGNORE_PATTERNS`). When the folder's README.md still shows
    `MODEL_ID_PLACEHOLDER` in its usage snippet, the placeholder is replaced by the repo id in the local README first,
    so the local and the uploaded card stay identical. Returns the repo URL.
    """
    from huggingface_hub import create_repo, upload_folder

    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved model folder (no config.json)")
    if not (folder / "README.md").is_file():
        logger.warning("%s has no README.md: the repo will have no model card", folder)
    repo_url = create_repo(repo_id, token=token, private=private, exist_ok=True, repo_type="model")
    readme = folder / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        if MODEL_ID_PLACEHOLDER in text:
            readme.write_text(text.replace(MODEL_ID_PLACEHOLDER, repo_url.repo_id), encoding="utf-8")
    commit = upload_folder(
        repo_id=repo_url.repo_id,
        folder_path=str(folder),
        token=token,
        commit_message=commit_message,
        ignore_patterns=DEFAULT_IGNORE_PATTERNS if ignore_patterns is None else ignore_patterns,
    )
    logger.info("Uploaded %s to %s (%s)", folder, repo_url.repo_id, commit.commit_url)
    return str(repo_url)
