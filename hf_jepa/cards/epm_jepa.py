"""The EPM-JEPA model card (`model_cards/epm_jepa.md`, any track, pretraining or experience stage), its result rows
(also the CLI's printed table) and the three-track reproduction section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from huggingface_hub import EvalResult, ModelCard

from ..paper_figures import EPM_JEPA_SIGMA_EMBED_SAFETY_THRESHOLD
from .common import (
    GENERATED_DATA_NOTE,
    CardInputs,
    _config_rows,
    _data_is_mnist,
    _data_rows,
    _digit_sources,
    _eval_results,
    _is_number,
    _number,
    _percent,
    _run_rows,
    _starting_point,
    _training_rows,
    card_renderer,
)

__all__ = ["ADAPTER_FOLDER", "CARD_TAGS", "render_card", "result_rows"]

CARD_TAGS = ["jepa", "epm-jepa", "world-model", "moving-mnist", "lora", "peft"]
# Sub-folder of a saved track-C model holding the experience adapter (peft files), see `save_experience_adapter`.
ADAPTER_FOLDER = "experience_adapter"
_TRACK_LETTERS = {"vanilla": "A", "ei": "B", "epm": "C"}


def _track_name(track: str) -> str:
    from ..modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES

    return TRACK_NAMES.get(track, str(track))


def result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the EPM-JEPA results present in `metrics` (what `EpmJepaRecipe.evaluate` and
    the trainer recorded); a missing or non-numeric metric gives no row. Also used by the CLI's printed table."""
    rows: list[tuple[str, str]] = []
    if metrics.get("track"):
        stage = f" ({metrics['stage']} stage)" if metrics.get("stage") else ""
        rows.append(("Track", f"{_track_name(metrics['track'])}{stage}"))
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
        threshold = EPM_JEPA_SIGMA_EMBED_SAFETY_THRESHOLD
        flag = f" (below the paper's {threshold:g} safety threshold)" if value < threshold else ""
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
    dataset = dict(
        dataset_type="moving-mnist-gravity",
        dataset_name=f"Moving MNIST with gravity (hf-jepa; {digits})",
        dataset_split="test",
    )
    task = dict(
        task_type="latent-world-model", task_name="One-step latent prediction (normalised error D, lower is better)"
    )
    entries = (
        ("d_shift", "normalized_prediction_error", "D_shift (shifted gravity)", "shift"),
        ("d_train", "normalized_prediction_error", "D on the training distribution (g = 0)", "train"),
    )
    return _eval_results(metrics, task, dataset, entries)


def _reproduction_text(reproduction: Any) -> tuple[str | None, str | None]:
    """(markdown table, one-line description) of a `reproduce_epm_jepa` result, or (None, None).

    `reproduction` is the `ReproductionResult` (duck-typed: `.summary`, the dict, and `.table`, its markdown)."""
    if reproduction is None:
        return None, None
    if not (hasattr(reproduction, "summary") and hasattr(reproduction, "table")):
        raise TypeError(
            "reproduction: pass the ReproductionResult of reproduce_epm_jepa (with .summary and .table), "
            f"not {type(reproduction).__name__}"
        )
    summary = reproduction.summary
    if not summary:
        return None, None
    parts = []
    if summary.get("seeds") is not None:
        seeds = summary["seeds"]
        listed = ", ".join(str(s) for s in seeds) if isinstance(seeds, (list, tuple)) else str(seeds)
        parts.append(f"seeds {listed}")
    if summary.get("pretrain_steps") is not None:
        parts.append(f"{summary['pretrain_steps']} pretraining steps (g = 0)")
    if summary.get("experience_steps") is not None:
        parts.append(f"n = {summary['experience_steps']} experience steps")
    if summary.get("preset"):
        parts.append(f"preset `{summary['preset']}`")
    if summary.get("data_source"):
        parts.append(f"digits: {summary['data_source']}")
    note = "; ".join(parts) or None
    if summary.get("quick"):
        note = (note + ". " if note else "") + "**Smoke run (`--quick`): tiny model, a few steps; not a result.**"
    return reproduction.table, note


def _render_epm_jepa(card: CardInputs) -> ModelCard:
    """The model card of an EPM-JEPA checkpoint (any track, pretraining or experience stage).

    config: the `EpmJepaConfig` of the model. metrics: what `EpmJepaRecipe.evaluate` and the trainer recorded (the
    `model-index` holds D_shift and D on g = 0). data_args: `EpmJepaDataArguments`. reproduction: optional
    `ReproductionResult` returned by `reproduce_epm_jepa`: its `.table` is shown with a settings line read from its
    `.summary`. base_model: the base an experience run (`stage="adapt"`) started from (`init_from`).
    """
    config, metrics, training, data = card.config, card.metrics, card.training, card.data
    mnist = _data_is_mnist(metrics, data)
    dataset_ids, provenance_lines = _digit_sources(metrics, data, mnist)
    provenance_lines.append(
        "Sequences: Moving MNIST with gravity, rendered from those digits on the fly (`hf_jepa.data.moving_mnist`); "
        + GENERATED_DATA_NOTE
        + "."
    )
    # The experience phase trains the base's weights further (track C's LoRA adapter is also saved on its own).
    base_id, relation, start_line = _starting_point(
        card.base_model, "finetune", "Started from the pretrained EPM-JEPA base"
    )
    track = config.track
    stage = metrics.get("stage") or data.get("stage")
    model_name = f"epm-jepa-{track}" + ("-base" if stage == "pretrain" else "")

    card_data = card.card_data(
        CARD_TAGS,
        pipeline_tag="image-feature-extraction",
        base_model=base_id,
        base_model_relation=relation,
        datasets=dataset_ids or None,
        model_name=model_name,
        eval_results=_epm_jepa_eval_results(metrics, mnist, metrics.get("data_source")) or None,
    )

    training_rows = _training_rows(training, metrics)
    data_rows = _data_rows(data, digits=True)

    if stage == "adapt":
        steps = metrics.get("train_steps", training.get("max_steps"))
        n_text = f"n = {steps} " if steps is not None else ""
        stage_text = (
            f"after the experience phase ({n_text}optimiser steps on shifted sequences, started from a "
            "vanilla base pretrained on g = 0)"
        )
    elif stage == "pretrain":
        stage_text = "pretrained on the training distribution (g = 0, no gravity), before any experience"
    else:
        stage_text = None

    shift_range = None
    if data.get("shift_gravity_min") is not None and data.get("shift_gravity_max") is not None:
        shift_range = f"({data['shift_gravity_min']:g}, {data['shift_gravity_max']:g}]"
    data_note = None
    if not mnist and metrics.get("data_source"):
        data_note = (
            f"Digits: {metrics['data_source']}. These are not MNIST digits, so the numbers are not "
            "comparable with the paper's."
        )
    reproduction_table, reproduction_note = _reproduction_text(card.reproduction)

    return card.render(
        "epm_jepa.md",
        card_data,
        provenance_lines,
        start_line,
        title=f"EPM-JEPA world model (track {_track_name(track)})",
        track=track,
        track_letter=_TRACK_LETTERS.get(track, "?"),
        track_name=_track_name(track),
        stage=stage,
        stage_text=stage_text,
        uses_memory=track in ("ei", "epm"),
        has_adapter=track == "epm",
        adapter_folder=ADAPTER_FOLDER,
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
        result_rows=result_rows(metrics),
        data_source=metrics.get("data_source"),
        device=metrics.get("device"),
        eval_predictions=metrics.get("eval_predictions") if _is_number(metrics.get("eval_predictions")) else None,
        shift_range=shift_range,
        data_note=data_note,
        data_is_mnist=mnist,
        diagnostics_plot=metrics.get("diagnostics_plot"),
        d_shift_text=_number(metrics["d_shift"]) if _is_number(metrics.get("d_shift")) else None,
        copy_last_text=(
            _number(metrics["d_shift_copy_last"]) if _is_number(metrics.get("d_shift_copy_last")) else None
        ),
        reproduction_table=reproduction_table,
        reproduction_note=reproduction_note,
    )


render_card = card_renderer(_render_epm_jepa)
