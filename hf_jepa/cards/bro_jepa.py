"""The BRo-JEPA model card (`model_cards/bro_jepa.md`) and its result rows (also the CLI's printed table)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from huggingface_hub import EvalResult, ModelCard

from ..data.sources import MNIST_HUB_ID
from .common import (
    CardInputs,
    _config_rows,
    _data_is_mnist,
    _data_rows,
    _digit_sources,
    _eval_results,
    _is_number,
    _percent,
    _run_rows,
    _starting_point,
    _training_rows,
    card_renderer,
)

__all__ = ["CARD_TAGS", "render_card", "result_rows"]

CARD_TAGS = ["jepa", "bro-jepa", "modular-arithmetic", "self-supervised", "mnist"]


def _per_operation(metrics: Mapping, key: str) -> dict[int, float]:
    """Per-op accuracies with int keys (JSON round trips turn them into strings)."""
    return {int(k): v for k, v in (metrics.get(key) or {}).items()}


def _signed(k: int) -> str:
    return f"+{k}" if k > 0 else str(k)


def result_rows(metrics: Mapping[str, Any], seen_operations: Iterable[int] = (-1, 1)) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the BRo-JEPA results present in `metrics` (also used by the CLI)."""
    seen = sorted(seen_operations)
    ops = sorted(_per_operation(metrics, "accuracy_per_operation"))
    unseen = [k for k in ops if k not in seen and k != 0]
    magnitudes = sorted({abs(k) for k in unseen})
    if (
        unseen
        and set(unseen) == {s * m for m in magnitudes for s in (-1, 1)}
        and magnitudes == list(range(magnitudes[0], magnitudes[-1] + 1))
    ):
        unseen_text = f"±{magnitudes[0]}…±{magnitudes[-1]}"
    else:
        unseen_text = ", ".join(_signed(k) for k in unseen) or "none"
    seen_text = ", ".join(_signed(k) for k in seen)
    rows: list[tuple[str, str]] = []
    for key, name in (
        ("seen_accuracy", f"Seen-operation accuracy (k = {seen_text})"),
        (
            "zero_shot_accuracy",
            f"Zero-shot accuracy, mean over {len(unseen)} unseen ops ({unseen_text})"
            if unseen
            else "Zero-shot accuracy, unseen ops",
        ),
        ("rollout_accuracy", "Rollout accuracy, unseen ops (repeated ±1 steps)"),
        ("rollout_seen_accuracy", "Rollout accuracy, seen ops"),
        ("zero_shot_accuracy_shifted_2px", "Zero-shot accuracy, test digits moved by 2 px"),
        ("zero_shot_accuracy_rotated_15deg", "Zero-shot accuracy, test digits turned by ±15°"),
    ):
        if key in metrics and metrics[key] is not None:
            rows.append((name, _percent(metrics[key])))
    if _is_number(metrics.get("prototype_off_diagonal_cosine")):
        rows.append(
            (
                "Prototype off-diagonal cosine (lower = better separated)",
                f"{metrics['prototype_off_diagonal_cosine']:.4f}",
            )
        )
    if metrics.get("eval_images") is not None:
        rows.append(("Test images evaluated", str(metrics["eval_images"])))
    return rows + _run_rows(metrics)


def _names(config) -> tuple[str, str, str]:
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


def _bro_jepa_eval_results(metrics: Mapping, config, mnist: bool) -> list[EvalResult]:
    if mnist:
        dataset = dict(dataset_type=MNIST_HUB_ID, dataset_name="MNIST", dataset_split="test")
    else:
        dataset = dict(
            dataset_type="sklearn-digits", dataset_name="scikit-learn digits (upscaled to 28x28)", dataset_split="test"
        )
    task = dict(task_type="modular-arithmetic", task_name=f"Modular arithmetic y = (x + k) mod {config.modulus}")
    entries = (
        ("zero_shot_accuracy", "accuracy", "Zero-shot accuracy (unseen operations)", "zero_shot"),
        ("seen_accuracy", "accuracy", "Seen-operation accuracy", "seen_operations"),
        ("rollout_accuracy", "accuracy", "Rollout accuracy (unseen operations)", "rollout"),
    )
    return _eval_results(metrics, task, dataset, entries)


def _render_bro_jepa(card: CardInputs) -> ModelCard:
    """The model card of a BRo-JEPA checkpoint.

    config: the `BroJepaConfig` of the model. metrics: what `BroJepaRecipe.evaluate` and the trainer recorded.
    data_args: `BroJepaDataArguments`. reproduction: not read; the BRo-JEPA card has no reproduction section (the
    reproduction's table goes to its own `results.md`). base_model: the checkpoint training started from (relation
    `finetune`).
    """
    config, metrics, training, data = card.config, card.metrics, card.training, card.data
    mnist = _data_is_mnist(metrics, data)
    dataset_ids, provenance_lines = _digit_sources(metrics, data, mnist)
    base_id, relation, start_line = _starting_point(card.base_model, "finetune", "Started from the BRo-JEPA checkpoint")
    model_name, title, variant = _names(config)

    card_data = card.card_data(
        CARD_TAGS,
        # The encoder's latents are the features (the task head is the prototype lookup of the modular-arithmetic
        # pipeline); `image-feature-extraction` runs on the saved folder with its image processor.
        pipeline_tag="image-feature-extraction",
        base_model=base_id,
        base_model_relation=relation,
        datasets=dataset_ids or None,
        metrics=["accuracy"],
        model_name=model_name,
        eval_results=_bro_jepa_eval_results(metrics, config, mnist) or None,
    )

    training_rows = _training_rows(training, metrics)
    data_rows = _data_rows(data, digits=True, zero_means_all=("prototype_images", "eval_images"))

    direct = _per_operation(metrics, "accuracy_per_operation")
    rolled = _per_operation(metrics, "rollout_accuracy_per_operation")
    per_op_rows = [
        (_signed(k) + (" *" if k in (-1, 1) else ""), _percent(direct.get(k)), _percent(rolled.get(k)))
        for k in sorted(set(direct) | set(rolled))
    ]
    data_note = None
    if not mnist and metrics.get("data_source"):
        data_note = (
            f"Data: {metrics['data_source']}. This is not MNIST, so these numbers are not comparable with the paper's."
        )

    return card.render(
        "bro_jepa.md",
        card_data,
        provenance_lines,
        start_line,
        title=title,
        variant=variant,
        modulus=config.modulus,
        pixel_mean=config.pixel_mean,
        pixel_std=config.pixel_std,
        config_rows=_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=result_rows(metrics),
        per_op_rows=per_op_rows,
        data_note=data_note,
        data_is_mnist=mnist,
        supervised=config.objective == "supervised",
        pca_plot=metrics.get("pca_plot"),
        zero_shot_text=_percent(metrics["zero_shot_accuracy"])
        if _is_number(metrics.get("zero_shot_accuracy"))
        else None,
        rollout_text=_percent(metrics["rollout_accuracy"]) if _is_number(metrics.get("rollout_accuracy")) else None,
    )


render_card = card_renderer(_render_bro_jepa)
