"""The JEPA-Reasoner-family model card (`model_cards/jepa_reasoner.md`): the reasoner, a Talker, the
reasoner+Talker pair, or one of the coupled baselines, chosen by `config.model_type`; and its result rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from huggingface_hub import ModelCard, ModelCardData

from .common import (
    LIBRARY_NAME,
    LICENSE,
    MODEL_ID_PLACEHOLDER,
    _as_dict,
    _config_rows,
    _format_value,
    _is_number,
    _number,
    _percent,
    _render,
    _settings_rows,
)

__all__ = ["CARD_TAGS", "render_card", "result_rows"]

CARD_TAGS = ["jepa", "jepa-reasoner", "latent-reasoning", "hypersphere", "synthetic-data"]

# model_type -> (role, model-index name, one-line description)
_ROLES = {
    "jepa_reasoner": (
        "JEPA-Reasoner (latent reasoner)",
        "jepa-reasoner",
        "The reasoner alone: it turns a prompt into a latent chain; pair it with a Talker to get text.",
    ),
    "jepa_mono_talker": (
        "Mono-Talker",
        "jepa-mono-talker",
        "A Mono-Talker (decoder only) trained on a frozen reasoner's latent chains.",
    ),
    "jepa_dual_talker": (
        "Dual-Talker",
        "jepa-dual-talker",
        "A Dual-Talker (context encoder + decoder) trained on a frozen reasoner's latent chains.",
    ),
    "jepa_reasoner_with_talker": (
        "JEPA-Reasoner + Talker",
        "jepa-reasoner-with-talker",
        "A reasoner and its Talker in one checkpoint: text in, latent chain, text out.",
    ),
    "jepa_coupled_lm": (
        "coupled transformer (baseline)",
        "jepa-coupled-lm",
        "The paper's coupled baseline: a standard next-token transformer of the reasoner's size.",
    ),
    "jepa_coconut": (
        "COCONUT-style latent LM (baseline)",
        "jepa-coconut",
        "The coupled latent baseline: continuous thoughts (the last hidden state fed back as the next "
        "input embedding) between prompt and answer, then tokens, in one model.",
    ),
}

_METRICS = {
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


def result_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The card/CLI rows of a JEPA-Reasoner-family run's metrics (only the keys present)."""
    rows = [(label, fmt(metrics[key])) for key, (label, fmt) in _METRICS.items() if _is_number(metrics.get(key))]
    if metrics.get("example_answer"):
        rows.append(("first eval answer", f"`{_format_value(metrics['example_answer'])}`"))
    return rows


def _architecture_rows(config) -> list[tuple[str, str]]:
    subs = (
        [("reasoner", config.reasoner_config), ("talker", config.talker_config)]
        if getattr(config, "model_type", "") == "jepa_reasoner_with_talker"
        else [("", config)]
    )
    rows = []
    for prefix, sub in subs:
        for key in (
            "vocab_size",
            "hidden_size",
            "num_encoder_layers",
            "num_hidden_layers",
            "num_context_layers",
            "num_attention_heads",
            "intermediate_size",
            "latent_size",
            "num_reasoning_steps",
            "num_latent_thoughts",
            "cosine_loss_scale",
            "max_position_embeddings",
        ):
            if hasattr(sub, key):
                rows.append((f"{prefix} {key}".strip(), _format_value(getattr(sub, key))))
    return rows


def render_card(
    config,
    metrics: Mapping[str, Any] | None,
    training_args: Any = None,
    data_args: Any = None,
    reproduction: Any = None,
    *,
    repo_id: str | None = None,
    example_prompt: str | None = None,
) -> ModelCard:
    """The model card of any JEPA-Reasoner-family checkpoint: the reasoner, a Talker, the reasoner+Talker pair, or
    one of the coupled baselines (chosen by `config.model_type`). Only the metrics present are shown.

    Args:
        config / metrics / training_args / data_args / repo_id: as for the other families' `render_card`.
        reproduction: accepted for the common signature; this card has no reproduction section.
        example_prompt: the prompt of the usage snippet (e.g. the first eval example's); a fixed example if None.
    """
    metrics = dict(metrics or {})
    training, data = _as_dict(training_args), _as_dict(data_args)
    model_type = config.model_type
    role, model_name, role_text = _ROLES.get(model_type, (model_type, model_type, ""))
    remote_code = bool(getattr(config, "auto_map", None))
    training_rows, data_rows = _settings_rows(training, data, metrics)
    card_data = ModelCardData(
        library_name="transformers" if remote_code else LIBRARY_NAME,
        license=LICENSE,
        tags=[*CARD_TAGS, LIBRARY_NAME],
        model_name=model_name,
    )
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
        result_rows=result_rows(metrics),
        data_source=metrics.get("data_source"),
        device=metrics.get("device"),
        mixed_latents_plot=metrics.get("mixed_latents_plot"),
        config_rows=[(k, v) for k, v in _config_rows(config) if not k.endswith("_config")],
        training_rows=training_rows,
        data_rows=data_rows,
    )
