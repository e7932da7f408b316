"""The model card of a converted I-JEPA folder: where the weights came from, which parts were converted and which
were freshly initialised, how to continue pre-training."""

from __future__ import annotations

from typing import Any

from huggingface_hub import ModelCard, ModelCardData

__all__ = ["render_conversion_card"]

CARD_TAGS = ["jepa", "i-jepa", "vision", "vit", "self-supervised", "image-feature-extraction", "hf-jepa", "converted"]


def render_conversion_card(result: Any, hub_id: str | None = None) -> ModelCard:
    """The card of the folder `result` (an `hf_jepa.conversion.i_jepa.ConversionResult`) describes; `base_model` metadata when the source was the Hub repo `hub_id`."""
    config, origin = result.config, result.config.converted_from
    backbone = config.backbone_config
    base = {"base_model": hub_id, "base_model_relation": "finetune"} if hub_id else {}
    data = ModelCardData(
        library_name="hf-jepa", license=None, tags=CARD_TAGS, pipeline_tag="image-feature-extraction", **base
    )
    if origin["predictor"] == "initialised":
        predictor = (
            "**The predictor is NEWLY INITIALISED** (the source holds the encoder only): the encoder weights were "
            "loaded into both the context encoder and the EMA target encoder. Continue pre-training before using the "
            "predictor."
        )
    else:
        predictor = "The context encoder, the target encoder and the predictor are all converted from the source."
    ignored = "\n".join(f"- `{key}`: {reason}" for key, reason in result.ignored.items()) or "- none"
    body = f"""# I-JEPA converted from {origin["source"]}

Converted by `hf-jepa convert i-jepa` from the **{result.layout}** layout. {predictor}

| Field | Value |
|---|---|
| Encoder | ViT, {backbone.num_hidden_layers} layers, width {backbone.hidden_size}, {backbone.num_attention_heads} heads |
| Image | {backbone.image_size} px (source {origin["source_image_size"]} px), patch {backbone.patch_size}, \
{backbone.num_channels} channel(s) |
| Predictor | {config.predictor_num_layers} layers, width {config.predictor_hidden_size} ({origin["predictor"]}) |
| Tensors mapped | {len(result.mapped)} |
| Model keys initialised | {len(result.initialised)} |
| Converted encoder vs source model (max abs diff) | {result.source_max_abs_diff if result.source_max_abs_diff is not None else "not checked"} |

Source entries not converted:

{ignored}

The full key mapping is in `conversion.json`. Continue pre-training:

```bash
hf-jepa train i-jepa --set init_from=THIS_FOLDER data=YOUR_IMAGES preset=full --output-dir OUT
```
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")
