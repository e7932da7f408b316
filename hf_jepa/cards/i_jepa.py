"""The I-JEPA model card (`model_cards/i_jepa.md`): the image control of the JEPA-paradox study, sharing its rows,
`model-index` entries and reproduction table with the T-JEPA card (`cards/t_jepa.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from huggingface_hub import ModelCard

from ..data.sources import MNIST_HUB_ID
from .common import (
    CardInputs,
    _data_is_mnist,
    _digit_sources,
    _format_value,
    _is_number,
    _number,
    _settings_rows,
    _starting_point,
    card_renderer,
)
from .t_jepa import own_config_rows, paradox_eval_results, paradox_result_rows, reproduction_table

__all__ = ["CARD_TAGS", "render_card", "result_rows"]

CARD_TAGS = ["jepa", "i-jepa", "jepa-paradox", "vision", "vit", "self-supervised", "image-feature-extraction"]


def result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the I-JEPA baseline's results present in `metrics` (see
    `cards.t_jepa.result_rows`)."""
    return paradox_result_rows(metrics, image=True)


def _render_i_jepa(card: CardInputs) -> ModelCard:
    """The model card of an I-JEPA checkpoint, the image control of the JEPA-paradox study.

    config: the `IJepaConfig` of the model (`backbone_config` a ViTConfig; `pixel_mean` / `pixel_std`). metrics,
    reproduction: as for `cards.t_jepa.render_card` (`probe_accuracy` is digit classification here). base_model: the
    I-JEPA checkpoint training started from (relation `finetune`).
    """
    config, metrics, training, data = card.config, card.metrics, card.training, card.data
    backbone = config.backbone_config
    mnist = _data_is_mnist(metrics, data)
    dataset_ids, provenance_lines = _digit_sources(metrics, data, mnist)
    base_id, relation, start_line = _starting_point(card.base_model, "finetune", "Started from the I-JEPA checkpoint")
    if mnist:
        dataset = dict(dataset_type=MNIST_HUB_ID, dataset_name="MNIST", dataset_split="test")
    else:
        source = metrics.get("data_source")
        dataset = dict(
            dataset_type="hf-jepa-images",
            dataset_name=str(source) if source else "unknown images",
            dataset_split="test",
        )
    eval_results = paradox_eval_results(
        metrics,
        dict(task_type="image-classification", task_name="Linear probe on frozen image embeddings"),
        dataset,
        None,
    )
    card_data = card.card_data(
        CARD_TAGS,
        pipeline_tag="image-feature-extraction",
        base_model=base_id,
        base_model_relation=relation,
        datasets=dataset_ids or None,
        model_name="i-jepa",
        eval_results=eval_results or None,
    )
    training_rows, data_rows = _settings_rows(training, data, metrics)
    table, note = reproduction_table(card.reproduction, "Run")
    image_size, patch_size = backbone.image_size, backbone.patch_size
    data_note = None
    if not mnist and metrics.get("data_source"):
        data_note = f"Images: {metrics['data_source']}. These are not MNIST digits."
    return card.render(
        "i_jepa.md",
        card_data,
        provenance_lines,
        start_line,
        title="I-JEPA baseline (image control of the JEPA-paradox study, ViT backbone)",
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
        config_rows=own_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=result_rows(metrics),
        data_is_mnist=mnist,
        data_note=data_note,
        device=metrics.get("device"),
        data_source=metrics.get("data_source"),
        diagnostics_plot=metrics.get("diagnostics_plot"),
        mi_text=_number(metrics["mi_proxy"]) if _is_number(metrics.get("mi_proxy")) else None,
        rank_text=_number(metrics["effective_rank"], 2) if _is_number(metrics.get("effective_rank")) else None,
        reproduction_table=table,
        reproduction_note=note,
    )


render_card = card_renderer(_render_i_jepa)
