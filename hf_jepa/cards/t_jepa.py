"""The T-JEPA model card (`model_cards/t_jepa.md`, T-JEPA or one of its text baselines, by `config.objective`), its
result rows, and what the JEPA-paradox study's cards share with the I-JEPA control (`cards/i_jepa.py`): the rows,
the `model-index` entries and the multi-run reproduction table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from huggingface_hub import EvalResult, ModelCard

from ..data.sources import C4_HUB_ID
from .common import (
    GENERATED_DATA_NOTE,
    CardInputs,
    _config_rows,
    _eval_results,
    _format_value,
    _is_number,
    _number,
    _percent,
    _reproduction_summary,
    _run_rows,
    _settings_rows,
    _starting_point,
    card_renderer,
    hub_dataset_ids,
)

__all__ = [
    "CARD_TAGS",
    "OBJECTIVES",
    "own_config_rows",
    "paradox_eval_results",
    "paradox_result_rows",
    "render_card",
    "reproduction_table",
    "result_rows",
]

CARD_TAGS = ["jepa", "t-jepa", "jepa-paradox", "text", "bert", "self-supervised", "feature-extraction"]

# objective -> (display name, model-index name, one-line description)
OBJECTIVES = {
    "jepa": (
        "T-JEPA",
        "t-jepa",
        "latent prediction: the predictor regresses the EMA target encoder's layer-normalised token "
        "representations of the target spans from the context",
    ),
    "mlm": (
        "MLM baseline",
        "t-jepa-mlm-baseline",
        "BERT masked language modelling: the same spans are replaced by `[MASK]` and their tokens predicted with "
        "a softmax over the vocabulary (cross-entropy)",
    ),
    "vicreg": (
        "VICReg baseline",
        "t-jepa-vicreg-baseline",
        "VICReg on two views of each sentence (two independent span maskings): invariance + variance + "
        "covariance terms on the projected, mean-pooled encoder outputs",
    ),
    "barlow_twins": (
        "Barlow Twins baseline",
        "t-jepa-barlow-twins-baseline",
        "Barlow Twins on two views of each sentence: the cross-correlation of the projected, mean-pooled "
        "encoder outputs is pushed towards the identity",
    ),
    "byol": (
        "BYOL baseline",
        "t-jepa-byol-baseline",
        "BYOL on two views of each sentence: an online predictor regresses the EMA target network's projection "
        "of the other view (cosine loss, symmetrised)",
    ),
}
# Step metrics: present with the value None means "looked for, not observed in the run".
_STEP_METRICS = {
    "mi_saturation_step": "MI proxy saturation step",
    "divergence_step": "Train/validation loss divergence step",
    "rank_collapse_step": "Effective-rank collapse step",
}
_PARADOX_KNOWN_KEYS = {
    "objective",
    "val_loss",
    "mi_proxy",
    "effective_rank",
    "cosine_mean",
    "cosine_variance",
    "embedding_std",
    "probe_accuracy",
    "probe_accuracy_untrained",
    "retrieval_recall_at_1",
    "retrieval_recall_at_10",
    "irreducible_variance",
    *_STEP_METRICS,
    "data_source",
    "diagnostics_plot",
    "train_time_s",
    "train_steps",
    "device",
    "num_processes",
    "hardware",
}


# ------------------------------------------------------------------------------------ shared with the I-JEPA card


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


def paradox_result_rows(metrics: Mapping[str, Any], image: bool) -> list[tuple[str, str]]:
    """The rows shared by the T-JEPA and I-JEPA cards (`image` for the I-JEPA wording); only what `metrics` holds."""
    rows: list[tuple[str, str]] = []
    objective = metrics.get("objective")
    if objective:
        name = OBJECTIVES.get(objective, (None,))[0] if not image else None
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
        ("probe_accuracy_untrained", f"Linear-probe accuracy of the untrained encoder ({probe_task})"),
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


def paradox_eval_results(
    metrics: Mapping,
    task: dict,
    probe_dataset: dict,
    retrieval_dataset: dict | None,
) -> list[EvalResult]:
    """`model-index` entries: the linear probe on `probe_dataset`, and next-sentence retrieval when
    `retrieval_dataset` is given (those of the metrics present)."""
    results = _eval_results(
        metrics, task, probe_dataset, [("probe_accuracy", "accuracy", "Linear-probe accuracy", "linear_probe")]
    )
    if retrieval_dataset is not None:
        retrieval = dict(task_type="sentence-similarity", task_name="Next-sentence retrieval")
        entries = [(f"retrieval_recall_at_{k}", f"recall_at_{k}", f"Recall@{k}", "retrieval") for k in (1, 10)]
        results += _eval_results(metrics, retrieval, retrieval_dataset, entries)
    return results


def reproduction_table(reproduction: Any, label: str) -> tuple[str | None, str | None]:
    """(markdown table, settings note) of a multi-run reproduction: a `ReproductionResult` (its `.summary` is read)
    or the summary mapping itself. `summary["runs"]` (or `["objectives"]`) maps a run name (an objective, or a family)
    to its metrics; other scalar keys of the summary become the one-line settings note."""
    reproduction = _reproduction_summary(reproduction)
    if not reproduction:
        return None, None
    runs = reproduction.get("runs") or reproduction.get("objectives") or {}
    columns = [
        (key, name)
        for key, name in (
            ("probe_accuracy", "Probe accuracy"),
            ("retrieval_recall_at_1", "Recall@1"),
            ("mi_proxy", "MI proxy (nats)"),
            ("effective_rank", "Effective rank"),
            ("cosine_mean", "Mean cosine"),
            ("val_loss", "Validation loss"),
            ("divergence_step", "Divergence step"),
        )
        if any(isinstance(m, Mapping) and key in m for m in runs.values())
    ]
    table = None
    if runs and columns:
        lines = [f"| {label} | " + " | ".join(name for _, name in columns) + " |", "|---|" + "---|" * len(columns)]
        for run, run_metrics in runs.items():
            run_metrics = run_metrics if isinstance(run_metrics, Mapping) else {}
            cells = []
            for key, _ in columns:
                value = run_metrics.get(key)
                if key in ("probe_accuracy", "retrieval_recall_at_1") and _is_number(value):
                    cells.append(_percent(value))
                elif key == "divergence_step":
                    cells.append(
                        "not observed"
                        if key in run_metrics and value is None
                        else (f"{int(value):,}" if _is_number(value) else "–")
                    )
                elif _is_number(value):
                    cells.append(_number(value, 2 if key == "effective_rank" else 4))
                else:
                    cells.append("–")
            name = OBJECTIVES.get(run, (run,))[0]
            lines.append(f"| {_format_value(name)} | " + " | ".join(cells) + " |")
        table = "\n".join(lines)
    notes = [
        f"{key}: {_format_value(value)}"
        for key, value in reproduction.items()
        if key not in ("runs", "objectives", "quick")
        and not isinstance(value, (dict, list, tuple))
        and value is not None
    ]
    note = "; ".join(notes) or None
    if reproduction.get("quick"):
        note = (note + ". " if note else "") + "**Smoke run (`--quick`): tiny models, a few steps; not a result.**"
    return table, note


def own_config_rows(config) -> list[tuple[str, str]]:
    """The family's own config fields except the nested backbone config (shown as its own rows)."""
    return [(k, v) for k, v in _config_rows(config) if k != "backbone_config"]


# ---------------------------------------------------------------------------------------------------- T-JEPA card


def result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, formatted value) rows of the T-JEPA (or text baseline) results present in `metrics`; a missing or
    non-numeric metric gives no row, a step metric present as None reads "not observed", other scalar keys get a
    generic row. Also usable for the CLI's printed table."""
    return paradox_result_rows(metrics, image=False)


def _text_data_is_c4(metrics: Mapping, data: Mapping) -> bool:
    source = metrics.get("data_source") or data.get("data") or data.get("corpus")
    return bool(source) and "c4" in str(source).lower()


def _text_sources(metrics: Mapping, data: Mapping, c4: bool) -> tuple[list[str], list[str]]:
    """(`datasets` metadata, card lines) of the text a T-JEPA run used: C4 or another Hub dataset by its id; the
    embedded CPython documentation sentences and the generated ambiguity corpus (no Hub id) in the text only."""
    source = metrics.get("data_source") or data.get("data")
    ids = hub_dataset_ids(source)
    if c4 and C4_HUB_ID not in ids:
        ids.insert(0, C4_HUB_ID)
    if data.get("corpus") == "ambiguity" or "ambiguity" in str(source or "").lower():
        return ids, [f"Text: the synthetic ambiguity corpus (`hf_jepa.data.text.ambiguity`), {GENERATED_DATA_NOTE}."]
    if ids:
        links = ", ".join(f"[`{i}`](https://huggingface.co/datasets/{i})" for i in ids)
        return ids, [f"Text: {links}" + (f" ({_format_value(source)})." if source else ".")]
    if source is None or "embedded" in str(source).lower() or "pydoc" in str(source).lower():
        return ids, [
            "Text: sentences of CPython's own documentation (`pydoc_data.topics`, shipped with every Python), split "
            "and labelled with coarse topics by hf-jepa (`hf_jepa.data.text`). Not a Hub dataset, so the card's "
            "`datasets` metadata leaves it out."
        ]
    return ids, [f"Text: {_format_value(source)} (local files, not on the Hub)."]


def _render_t_jepa(card: CardInputs) -> ModelCard:
    """The model card of a T-JEPA checkpoint, or of one of its text baselines (`config.objective`).

    config: the `TJepaConfig` of the model. metrics: what the T-JEPA recipe and the trainer recorded: `objective`,
    `val_loss`, `mi_proxy`, `effective_rank`, `cosine_mean`, `cosine_variance`, `embedding_std`, `probe_accuracy`,
    `retrieval_recall_at_1`, `retrieval_recall_at_10`, `irreducible_variance`, `mi_saturation_step`,
    `divergence_step`, `rank_collapse_step` (None: not observed), `data_source`, `diagnostics_plot` (a PNG file name
    next to the card), `train_time_s`, `train_steps`, `device`, `num_processes`; other scalar keys get generic rows.
    reproduction: optional multi-objective reproduction, a `ReproductionResult` or its summary
    `{"runs": {objective: metrics, ...}, <settings>...}` (see :func:`reproduction_table`). base_model: the pretrained
    BERT (data setting `backbone`: a Hub id or a folder) the encoder started from (relation `finetune`).
    """
    config, metrics, training, data = card.config, card.metrics, card.training, card.data
    objective = config.objective
    display, model_name, objective_text = OBJECTIVES.get(objective, (objective, f"t-jepa-{objective}", ""))
    backbone = config.backbone_config
    is_bert_large = (
        backbone.hidden_size,
        backbone.num_hidden_layers,
        backbone.num_attention_heads,
        backbone.intermediate_size,
    ) == (1024, 24, 16, 4096)
    c4 = _text_data_is_c4(metrics, data)
    corpus = metrics.get("data_source") or None
    dataset_ids, provenance_lines = _text_sources(metrics, data, c4)
    base_id, relation, start_line = _starting_point(card.base_model, "finetune", "Started from the pretrained BERT")
    probe_dataset = dict(
        dataset_type="hf-jepa-pydoc-topics",
        dataset_name="CPython documentation sentences, coarse topic classes (hf-jepa)",
        dataset_split="test",
    )
    retrieval_dataset = dict(
        dataset_type="hf-jepa-pydoc-next-sentence",
        dataset_name="CPython documentation sentences, next-sentence retrieval (hf-jepa)",
        dataset_split="test",
    )
    if metrics.get("data_source") and not c4 and "embedded" not in str(metrics["data_source"]).lower():
        probe_dataset["dataset_name"] = retrieval_dataset["dataset_name"] = str(metrics["data_source"])
    eval_results = paradox_eval_results(
        metrics,
        dict(task_type="text-classification", task_name="Linear probe on frozen sentence embeddings"),
        probe_dataset,
        retrieval_dataset,
    )
    card_data = card.card_data(
        [*CARD_TAGS, *([objective.replace("_", "-")] if objective != "jepa" else [])],
        pipeline_tag="feature-extraction",
        base_model=base_id,
        base_model_relation=relation,
        datasets=dataset_ids or None,
        model_name=model_name,
        eval_results=eval_results or None,
    )
    training_rows, data_rows = _settings_rows(training, data, metrics)
    table, note = reproduction_table(card.reproduction, "Objective")
    number = lambda key, digits=4: _number(metrics[key], digits) if _is_number(metrics.get(key)) else None  # noqa: E731
    divergence = metrics.get("divergence_step")
    return card.render(
        "t_jepa.md",
        card_data,
        provenance_lines,
        start_line,
        title=f"{display} (text JEPA study, BERT backbone)"
        if objective != "jepa"
        else "T-JEPA: I-JEPA's latent prediction on text (BERT backbone)",
        objective=objective,
        objective_name=display,
        objective_text=objective_text,
        is_jepa=objective == "jepa",
        uses_target_encoder=config.uses_target_encoder,
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
        config_rows=own_config_rows(config),
        training_rows=training_rows,
        data_rows=data_rows,
        result_rows=result_rows(metrics),
        corpus=corpus,
        data_is_c4=c4,
        device=metrics.get("device"),
        diagnostics_plot=metrics.get("diagnostics_plot"),
        mi_text=number("mi_proxy"),
        rank_text=number("effective_rank", 2),
        probe_text=_percent(metrics["probe_accuracy"]) if _is_number(metrics.get("probe_accuracy")) else None,
        divergence_text=(
            f"{int(divergence):,}"
            if _is_number(divergence)
            else ("not observed" if "divergence_step" in metrics and divergence is None else None)
        ),
        reproduction_table=table,
        reproduction_note=note,
    )


render_card = card_renderer(_render_t_jepa)
