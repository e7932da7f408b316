"""`hf-jepa convert i-jepa`: a transformers `IJepaModel` or Meta's I-JEPA training checkpoint as an hf-jepa I-JEPA
folder (context encoder, EMA target encoder and predictor), so pre-training can continue
(`hf-jepa train i-jepa --set init_from=DIR`).

The config represents the source exactly: its ViT sizes, LayerNorm eps, qkv bias and activation in the backbone
config, its position tables saved as they are (`position_embedding_type="stored"`; transformers' IJepaModel learns
them, Meta's are sin-cos but saved), I-JEPA's predictor layout. A transformers model holds the encoder only: it fills
both encoders and the predictor is freshly initialised, which the log, the config (`converted_from`) and the card say.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..modeling.i_jepa import IJepaConfig, IJepaImageProcessor, IJepaModel
from ..modeling.i_jepa.configuration_i_jepa import IMAGENET_MEAN, IMAGENET_STD
from ..modeling.i_jepa.modeling_i_jepa import interpolate_position_table, sincos_2d_position_embeddings
from .checkpoints import SourceCheckpoint, read_source
from .i_jepa_keys import ConversionError, MappedWeights, check_complete, map_meta, map_transformers, strip_prefix

logger = logging.getLogger(__name__)

__all__ = ["LAYOUTS", "META_HEADS", "ConversionResult", "convert_i_jepa", "infer_layout"]

LAYOUTS = ("transformers", "meta")
# Attention heads of Meta's ViT sizes by width (src/models/vision_transformer.py: vit_tiny ... vit_gigantic); the
# checkpoint's tensors do not hold the head count.
META_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16, 1408: 16, 1664: 16}
META_LAYER_NORM_EPS = 1e-6  # Meta's partial(nn.LayerNorm, eps=1e-6), for encoder and predictor
# The predictor a transformers source gets (it has none): Meta's ViT-H recipe (pred_emb_dim 384, pred_depth 12).
FRESH_PREDICTOR = {"predictor_hidden_size": 384, "predictor_num_layers": 12}
CONVERSION_FILE = "conversion.json"


@dataclass
class ConversionResult:
    """What `convert_i_jepa` wrote: the folder, the config, the layout read, the source keys used and ignored (with
    reasons), the model keys freshly initialised, the source's training metadata (Meta's epoch, loss...), and the
    max abs difference of the converted encoder from the source model on a random batch (None when not checked)."""

    output_dir: Path
    config: IJepaConfig
    layout: str
    mapped: dict[str, str] = field(default_factory=dict)  # model key -> source key
    ignored: dict[str, str] = field(default_factory=dict)
    initialised: list[str] = field(default_factory=list)
    training_state: dict[str, Any] = field(default_factory=dict)
    source_max_abs_diff: float | None = None

    def summary(self) -> dict[str, Any]:
        """The JSON-able record written to `conversion.json`."""
        return {
            "layout": self.layout,
            "converted_from": self.config.converted_from,
            "mapped": self.mapped,
            "ignored": self.ignored,
            "initialised": self.initialised,
            "training_state": self.training_state,
            "source_max_abs_diff": self.source_max_abs_diff,
        }


def infer_layout(checkpoint: SourceCheckpoint) -> str:
    """ "transformers" for a folder whose config.json has `model_type="ijepa"`, "meta" for a dict with `encoder`,
    `predictor` and `target_encoder` (or a flat safetensors of `encoder.*` / `predictor.*` / `target_encoder.*`);
    `ValueError` naming SOURCE otherwise."""
    if checkpoint.config is not None:
        model_type = checkpoint.config.get("model_type")
        if model_type == "ijepa":
            return "transformers"
        if model_type == IJepaConfig.model_type:
            raise ValueError(
                f"SOURCE {checkpoint.source!r} is already an hf-jepa I-JEPA folder: train from it with "
                "--set init_from=... (no conversion needed)"
            )
        raise ValueError(
            f"SOURCE {checkpoint.source!r} holds a {model_type!r} model; hf-jepa converts transformers' IJepaModel "
            "(model_type 'ijepa') or Meta's I-JEPA checkpoint"
        )
    state = checkpoint.state
    if isinstance(state, dict) and {"encoder", "predictor", "target_encoder"} <= set(state):
        return "meta"
    if (
        isinstance(state, dict)
        and state
        and all(str(k).split(".")[0] in ("encoder", "predictor", "target_encoder") for k in state)
    ):
        return "meta"
    raise ValueError(
        f"SOURCE {checkpoint.source!r}: cannot tell its layout (no config.json, and not a dict with 'encoder', "
        "'predictor' and 'target_encoder'); pass --layout transformers with a model folder, or --layout meta"
    )


def _nested_meta(state: dict) -> dict:
    """Meta's checkpoint as a dict of state dicts: flat safetensors keys `encoder.module.x` become nested."""
    if {"encoder", "predictor", "target_encoder"} <= set(state) and isinstance(state.get("encoder"), dict):
        return state
    nested: dict[str, dict] = {}
    for key, value in state.items():
        part, _, rest = str(key).partition(".")
        nested.setdefault(part, {})[rest] = value
    return nested


# ------------------------------------------------------------------------------------------------------- configs


def _backbone_from_transformers(config: dict) -> dict:
    image_size, patch_size = config.get("image_size", 224), config.get("patch_size", 16)
    for name, value in (("image_size", image_size), ("patch_size", patch_size)):
        if isinstance(value, (list, tuple)):
            if len(set(value)) != 1:
                raise ValueError(f"SOURCE config.json: {name} {value} is not square; hf-jepa's I-JEPA needs square")
    fields = (
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "layer_norm_eps",
        "num_channels",
        "qkv_bias",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "initializer_range",
    )
    from transformers import IJepaConfig as TransformersIJepaConfig

    defaults = TransformersIJepaConfig()  # transformers' own defaults for fields a config.json leaves out
    backbone = {name: config.get(name, getattr(defaults, name)) for name in fields}
    backbone["image_size"] = int(image_size[0] if isinstance(image_size, (list, tuple)) else image_size)
    backbone["patch_size"] = int(patch_size[0] if isinstance(patch_size, (list, tuple)) else patch_size)
    return backbone


def _count_blocks(state: dict, pattern: str) -> int:
    import re

    found = {int(m.group(1)) for key in state if (m := re.match(pattern, key))}
    if found != set(range(len(found))):
        raise ConversionError(f"blocks numbered {sorted(found)} are not 0..{len(found) - 1}")
    return len(found)


def _backbone_from_meta(encoder: dict, num_heads: int | None) -> dict:
    """The ViT sizes read off Meta's encoder tensors (the head count from `num_heads` or `META_HEADS`)."""
    for key in ("patch_embed.proj.weight", "pos_embed", "blocks.0.mlp.fc1.weight"):
        if key not in encoder:
            raise ConversionError(f"Meta's checkpoint, 'encoder': no {key!r}, so it is no I-JEPA VisionTransformer")
    proj, pos = encoder["patch_embed.proj.weight"], encoder["pos_embed"]
    hidden, channels, patch = proj.shape[0], proj.shape[1], proj.shape[-1]
    grid = math.isqrt(pos.shape[1])
    if grid * grid != pos.shape[1]:
        raise ConversionError(f"Meta's pos_embed has {pos.shape[1]} positions, not a square grid")
    if num_heads is None:
        if hidden not in META_HEADS:
            raise ValueError(
                f"--num-heads: Meta's checkpoint is {hidden} wide, not one of its ViT sizes {sorted(META_HEADS)}: give "
                "the encoder's attention head count"
            )
        num_heads = META_HEADS[hidden]
    return dict(
        hidden_size=int(hidden),
        num_hidden_layers=_count_blocks(encoder, r"blocks\.(\d+)\."),
        num_attention_heads=int(num_heads),
        intermediate_size=int(encoder["blocks.0.mlp.fc1.weight"].shape[0]),
        hidden_act="gelu",  # nn.GELU: exact
        layer_norm_eps=META_LAYER_NORM_EPS,
        image_size=int(grid * patch),
        patch_size=int(patch),
        num_channels=int(channels),
        qkv_bias="blocks.0.attn.qkv.bias" in encoder,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def _predictor_from_meta(predictor: dict, num_heads: int) -> dict:
    for key in ("predictor_embed.weight", "predictor_blocks.0.mlp.fc1.weight"):
        if key not in predictor:
            raise ConversionError(f"Meta's checkpoint, 'predictor': no {key!r}, so it is no I-JEPA predictor")
    width = int(predictor["predictor_embed.weight"].shape[0])
    return dict(
        predictor_hidden_size=width,
        predictor_num_layers=_count_blocks(predictor, r"predictor_blocks\.(\d+)\."),
        predictor_num_heads=int(num_heads),  # Meta's init_model passes the encoder's num_heads
        predictor_mlp_ratio=predictor["predictor_blocks.0.mlp.fc1.weight"].shape[0] / width,
        predictor_layer_norm_eps=META_LAYER_NORM_EPS,
    )


def _pixel_statistics(checkpoint: SourceCheckpoint, channels: int) -> dict:
    """The source's normalisation: its preprocessor_config.json's, else ImageNet's (I-JEPA's) for RGB; None (the
    config's default for its channels) otherwise."""
    processor = checkpoint.preprocessor or {}
    mean, std = processor.get("image_mean"), processor.get("image_std")
    if mean is not None and std is not None and len(mean) == channels:
        return {"pixel_mean": list(mean), "pixel_std": list(std)}
    return {"pixel_mean": IMAGENET_MEAN, "pixel_std": IMAGENET_STD} if channels == 3 else {}


# ------------------------------------------------------------------------------------------------------ conversion


def _resize_tables(mapped: MappedWeights, old_grid: int, new_grid: int) -> None:
    """Every mapped position table resampled (bicubic) from `old_grid` to `new_grid` patches per side."""
    for key in [k for k in mapped.tensors if k.endswith("position_embeddings")]:
        mapped.tensors[key] = interpolate_position_table(mapped.tensors[key], old_grid, new_grid, new_grid)


def _sincos_distance(mapped: MappedWeights, grid: int) -> dict[str, float]:
    """Max abs difference of each source position table from the 2-D sin-cos table (recorded: ~0 for Meta's)."""
    return {
        key: float((tensor.float() - sincos_2d_position_embeddings(tensor.shape[-1], grid)).abs().max())
        for key, tensor in mapped.tensors.items()
        if key.endswith("position_embeddings")
    }


def _source_parity(checkpoint: SourceCheckpoint, model: IJepaModel) -> float | None:
    """Max abs difference of the converted context encoder from transformers' own IJepaModel loaded from the source
    folder, on one seeded random image at the converted size (transformers interpolates its own table when that
    differs from the source's), or None for a source that is not a local folder."""
    from transformers import IJepaModel as TransformersIJepaModel

    if not checkpoint.path.is_dir():
        return None
    reference = TransformersIJepaModel.from_pretrained(str(checkpoint.path), dtype=torch.float32).eval()
    config = model.config
    side = config.image_size
    pixels = torch.randn(1, config.num_channels, side, side, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = reference(pixels, interpolate_pos_encoding=side != reference.config.image_size).last_hidden_state
        got = model.encode(pixels, interpolate_pos_encoding=side != config.image_size)
    return float((expected - got).abs().max())


def convert_i_jepa(
    source: str,
    output_dir: str | Path,
    layout: str | None = None,
    image_size: int | None = None,
    num_heads: int | None = None,
    predictor: dict | None = None,
    seed: int = 0,
    check: bool = True,
) -> ConversionResult:
    """Convert `source` (a transformers IJepaModel folder / Hub id, or Meta's checkpoint file) into an hf-jepa I-JEPA
    folder at `output_dir` (saved with `save_pretrained`; loads strictly).

    layout: "transformers" | "meta" | None (inferred, `infer_layout`). image_size: another image size (a multiple of
    the patch size): the position tables are resampled bicubically to its grid. num_heads: Meta's encoder head count
    when its width is not one of Meta's ViT sizes. predictor: IJepaConfig predictor fields of the fresh predictor of a
    transformers source (default `FRESH_PREDICTOR`, heads = the encoder's); refused for Meta's, whose predictor is
    converted. seed: the seed of that fresh initialisation. check: compare the converted encoder with transformers'
    own model on a random image (transformers layout). Returns the `ConversionResult`; `ConversionError` naming the
    keys when the mapping is not complete, `ValueError` naming the argument for bad input."""
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"--layout must be one of {LAYOUTS}, got {layout!r}")
    checkpoint = read_source(source)
    layout = layout or infer_layout(checkpoint)
    training_state: dict[str, Any] = {}
    if layout == "transformers":
        if checkpoint.config is None or not isinstance(checkpoint.state, dict):
            raise ValueError(
                f"SOURCE {source!r}: the transformers layout needs a model folder or Hub id with config.json"
            )
        backbone = _backbone_from_transformers(checkpoint.config)
        mapped = map_transformers(checkpoint.state)
        predictor_fields = {
            **FRESH_PREDICTOR,
            "predictor_num_heads": backbone["num_attention_heads"],
            "predictor_layer_norm_eps": META_LAYER_NORM_EPS,
            **(predictor or {}),
        }
        predictor_status = "initialised"
    else:
        if predictor:
            raise ValueError(f"--predictor-*: Meta's checkpoint has its own predictor (converted); got {predictor}")
        state = checkpoint.state
        if not isinstance(state, dict):
            raise ValueError(f"SOURCE {source!r}: Meta's layout is a dict of state dicts, got {type(state).__name__}")
        nested = _nested_meta(state)
        encoder, _ = strip_prefix(nested.get("encoder") or {}, "module.")
        predictor_state, _ = strip_prefix(nested.get("predictor") or {}, "module.")
        mapped, training_state = map_meta(nested)
        backbone = _backbone_from_meta(encoder, num_heads)
        predictor_fields = _predictor_from_meta(predictor_state, backbone["num_attention_heads"])
        predictor_status = "converted"
    old_grid = backbone["image_size"] // backbone["patch_size"]
    sincos_diff = _sincos_distance(mapped, old_grid)
    if image_size is not None:
        if not isinstance(image_size, int) or image_size <= 0 or image_size % backbone["patch_size"]:
            raise ValueError(
                f"--image-size must be a positive multiple of the patch size {backbone['patch_size']}, got {image_size!r}"
            )
        _resize_tables(mapped, old_grid, image_size // backbone["patch_size"])
        backbone["image_size"] = image_size
    converted_from = {
        "source": str(source),
        "layout": layout,
        "predictor": predictor_status,
        "source_image_size": old_grid * backbone["patch_size"],
    }
    config = IJepaConfig(
        backbone_config=backbone,
        position_embedding_type="stored",
        converted_from=converted_from,
        **predictor_fields,
        **_pixel_statistics(checkpoint, backbone["num_channels"]),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = IJepaModel(config)
    expected = {key: tensor.shape for key, tensor in model.state_dict().items()}
    fresh = [key for key in expected if key.startswith("predictor.")] if predictor_status == "initialised" else []
    initialised = check_complete(mapped, expected, fresh)
    missing, unexpected = model.load_state_dict(mapped.tensors, strict=False)
    if sorted(missing) != initialised or unexpected:  # check_complete guarantees this; a bug otherwise
        raise RuntimeError(f"load_state_dict disagrees with the mapping: missing {missing}, unexpected {unexpected}")
    model.freeze_targets()
    if predictor_status == "initialised":
        logger.warning(
            "%s holds the encoder only: it was loaded into BOTH the context and the target encoder; the predictor "
            "(%d layers, %d wide) is NEWLY INITIALISED (seed %d), so continue pre-training before relying on it",
            source,
            config.predictor_num_layers,
            config.predictor_hidden_size,
            seed,
        )
    result = ConversionResult(
        output_dir=Path(output_dir),
        config=config,
        layout=layout,
        mapped=dict(sorted(mapped.sources.items())),
        ignored=dict(sorted(mapped.ignored.items())),
        initialised=initialised,
        training_state=training_state,
    )
    result.training_state["position_table_max_abs_diff_from_sincos"] = sincos_diff
    if check and layout == "transformers":
        result.source_max_abs_diff = _source_parity(checkpoint, model)
        logger.info("Converted encoder vs transformers' IJepaModel: max abs diff %.3g", result.source_max_abs_diff)
    _save(model, result, checkpoint)
    return result


def _save(model: IJepaModel, result: ConversionResult, checkpoint: SourceCheckpoint) -> None:
    """The folder: weights and config (`save_pretrained`), the image processor, the pipeline code, conversion.json
    and the card."""
    from ..trainers.custom_pipelines import declare_image_processor_in_config, write_custom_pipelines
    from .i_jepa_card import render_conversion_card

    folder = result.output_dir
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    IJepaImageProcessor.from_model_config(model.config).save_pretrained(folder)
    write_custom_pipelines(folder)
    declare_image_processor_in_config(folder, model.config)
    (folder / CONVERSION_FILE).write_text(json.dumps(result.summary(), indent=2, default=str) + "\n")
    render_conversion_card(result, hub_id=checkpoint.source if checkpoint.is_hub else None).save(
        str(folder / "README.md")
    )
    logger.info(
        "Converted %s (%s layout) into %s: %d tensors mapped, %d source entries ignored, %d model keys initialised",
        checkpoint.source,
        result.layout,
        folder,
        len(result.mapped),
        len(result.ignored),
        len(result.initialised),
    )
