"""The inference paths `hf-jepa export-onnx` writes, per family: a small `nn.Module` per path that calls the model's own
encoder (or predictor) modules, the inputs to trace and check it with, and the model's public, checked function it
must equal (`reference`), which is what the pipelines call.

Why wrappers call the modules and not `model.embed` / `model.encode` themselves: those public functions first check
their inputs with Python branches on tensor values (`torch.isfinite(x).all()`, token ids inside the vocabulary), which
torch.export (the dynamo ONNX exporter) cannot turn into a graph. The checks belong to eager use; the graph holds the
computation after them, and `reference` (the checked public function) is what the export is compared to, so a wrapper
that chose the wrong encoder or pooling fails the parity check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["OnnxPath", "family_paths"]


@dataclass(frozen=True)
class OnnxPath:
    """One exportable path of a model.

    `module`: the wrapper to export; `inputs(batch, seed)`: a dict of example inputs (names are the ONNX input names,
    in the wrapper's argument order); `reference(**inputs)`: the model's public function, a tuple in the order of
    `output_names`; `dynamic`: for each input, its dynamic axes `{axis: name}`; `tracing()`: a context manager the
    export runs in (not the parity check)."""

    name: str
    description: str
    module: nn.Module
    inputs: Callable[[int, int], dict[str, torch.Tensor]]
    reference: Callable[..., tuple[torch.Tensor, ...]]
    output_names: tuple[str, ...]
    dynamic: dict[str, dict[int, str]]
    tracing: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


# ------------------------------------------------------------------------------------------------------- wrappers


class ImageFeatures(nn.Module):
    """`(B, C, H, W)` -> `(B, N, D)` patch features of an I-JEPA encoder and their mean over the patches (`embed`)."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        patch_features = self.encoder(pixel_values)
        return patch_features, patch_features.mean(dim=1)


class TextFeatures(nn.Module):
    """`(B, L)` token ids and attention mask -> `(B, L, D)` token features of a BERT encoder and their mean over the
    unmasked tokens (`pool`: the model's own `mean_pool`)."""

    def __init__(self, encoder: nn.Module, pool: Callable):
        super().__init__()
        self.encoder, self.pool = encoder, pool

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        token_features = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return token_features, self.pool(token_features, attention_mask)


class Latents(nn.Module):
    """A module's one output as is: `encoder(*inputs)` (BRo-JEPA's encoders and predictor, the reasoner's token
    encoder)."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, first: torch.Tensor, second: torch.Tensor | None = None) -> torch.Tensor:
        # Two named arguments, not *inputs: torch.export matches `dynamic_shapes` to the signature's parameters.
        return self.encoder(first) if second is None else self.encoder(first, second)


class FrameLatents(nn.Module):
    """EPM-JEPA `(B, T, C, H, W)` frames -> `(B, T, latent_dim)` latents through the model's own `_encode` (the body of
    `encode` after its input checks)."""

    def __init__(self, model: nn.Module, use_target_encoder: bool):
        super().__init__()
        self.model, self.use_target_encoder = model, use_target_encoder

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model._encode(pixel_values, self.use_target_encoder)


# --------------------------------------------------------------------------------------------------- example inputs


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(config, batch: int, seed: int, unit: bool = False) -> torch.Tensor:
    shape = (batch, int(config.num_channels), int(config.image_size), int(config.image_size))
    # EPM-JEPA frames are pixels in [0, 1]; the other image models take normalised pixels (about unit variance).
    return torch.rand(shape, generator=_generator(seed)) if unit else torch.randn(shape, generator=_generator(seed))


def _tokens(vocab_size: int, length: int, batch: int, seed: int) -> dict[str, torch.Tensor]:
    """Random ids and a right-padded attention mask: row 0 is full, the others keep 1..length tokens."""
    generator = _generator(seed)
    input_ids = torch.randint(0, vocab_size, (batch, length), generator=generator)
    kept = torch.randint(1, length + 1, (batch,), generator=generator)
    kept[0] = length
    attention_mask = (torch.arange(length)[None, :] < kept[:, None]).long()
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def _text_length(limit: int, batch: int) -> int:
    # A length that changes with the batch, so the check at a second batch size also crosses the sequence axis.
    return max(1, min(int(limit), 6 + batch))


# ------------------------------------------------------------------------------------------------------- families

_IMAGE_AXES = {"pixel_values": {0: "batch"}}
_TEXT_AXES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}


def _i_jepa(model) -> list[OnnxPath]:
    config = model.config

    def inputs(batch, seed):
        return {"pixel_values": _images(config, batch, seed)}

    def path(name, encoder, target):
        def reference(pixel_values):
            return model.encode(pixel_values, use_target_encoder=target), model.embed(pixel_values, target)

        which = "EMA target encoder (jepa-feature-extraction's default)" if target else "context encoder"
        return OnnxPath(
            name,
            f"I-JEPA {which}: patch features and their mean over the patches",
            ImageFeatures(encoder),
            inputs,
            reference,
            ("patch_features", "pooled"),
            _IMAGE_AXES,
        )

    return [path("encoder", model.target_encoder, True), path("context-encoder", model.context_encoder, False)]


def _t_jepa(model) -> list[OnnxPath]:
    from ..modeling.t_jepa.modeling_t_jepa import mean_pool

    backbone = model.config.backbone_config
    vocab, limit = int(backbone.vocab_size), int(backbone.max_position_embeddings)

    def inputs(batch, seed):
        return _tokens(vocab, _text_length(limit, batch), batch, seed)

    def path(name, encoder, target, which):
        def reference(input_ids, attention_mask):
            return (
                model.encode(input_ids, attention_mask, use_target_encoder=target),
                model.embed(input_ids, attention_mask, use_target_encoder=target),
            )

        return OnnxPath(
            name,
            f"T-JEPA {which}: token features and their mean over the unmasked tokens",
            TextFeatures(encoder, mean_pool),
            inputs,
            reference,
            ("token_features", "pooled"),
            _TEXT_AXES,
        )

    if model.target_encoder is None:
        return [path("encoder", model.context_encoder, False, "encoder (this objective has no EMA target)")]
    return [
        path("encoder", model.target_encoder, True, "EMA target encoder (jepa-feature-extraction's default)"),
        path("context-encoder", model.context_encoder, False, "context encoder"),
    ]


def _bro_jepa(model) -> list[OnnxPath]:
    config = model.config

    def inputs(batch, seed):
        return {"pixel_values": _images(config, batch, seed)}

    def predictor_inputs(batch, seed):
        generator = _generator(seed)
        latent = torch.randn((batch, int(config.latent_dim)), generator=generator)
        modulus = int(config.modulus)
        return {"latent": latent, "operations": torch.randint(1 - modulus, modulus, (batch,), generator=generator)}

    paths = [
        OnnxPath(
            "encoder",
            "BRo-JEPA context encoder (image-feature-extraction and modular-arithmetic): image -> latent",
            Latents(model.context_encoder),
            inputs,
            lambda pixel_values: (model.encode(pixel_values),),
            ("latent",),
            _IMAGE_AXES,
        )
    ]
    if model.target_encoder is not None:
        paths.append(
            OnnxPath(
                "target-encoder",
                "BRo-JEPA EMA target encoder (the space the class prototypes live in): image -> latent",
                Latents(model.target_encoder),
                inputs,
                lambda pixel_values: (model.encode(pixel_values, use_target_encoder=True),),
                ("latent",),
                _IMAGE_AXES,
            )
        )
    paths.append(
        OnnxPath(
            "predictor",
            "BRo-JEPA predictor step P(z, k): latent and integer operation -> predicted latent",
            Latents(model.predictor),
            predictor_inputs,
            lambda latent, operations: (model.predict(latent, operations),),
            ("predicted_latent",),
            {"latent": {0: "batch"}, "operations": {0: "batch"}},
        )
    )
    return paths


def _epm_jepa(model) -> list[OnnxPath]:
    config = model.config

    def inputs(batch, seed):
        images = _images(config, batch * (batch + 1), seed, unit=True)  # batch + 1 frames per sequence
        return {"pixel_values": images.unflatten(0, (batch, batch + 1))}

    def path(name, target, which):
        return OnnxPath(
            name,
            f"EPM-JEPA {which}: frames (batch, frames, C, H, W) -> latents (batch, frames, latent_dim)",
            FrameLatents(model, target),
            inputs,
            lambda pixel_values: (model.encode(pixel_values, use_target_encoder=target),),
            ("latents",),
            {"pixel_values": {0: "batch", 1: "frames"}},
        )

    return [
        path("encoder", False, "frame encoder (image-feature-extraction)"),
        path("target-encoder", True, "EMA target"),
    ]


@contextlib.contextmanager
def _eager_attention(module: nn.Module):
    """Trace `module` with the eager attention mask: the SDPA path drops the mask when every key is valid, a branch on
    tensor values that torch.export refuses. The eager mask gives the same attention (the parity check compares with
    the model's own backend). Every config the blocks hold is switched: the EMA target's blocks hold a deep copy."""
    configs = {
        id(m.config): m.config for m in module.modules() if hasattr(getattr(m, "config", None), "_attn_implementation")
    }
    previous = {key: config._attn_implementation for key, config in configs.items()}
    try:
        for config in configs.values():
            config._attn_implementation = "eager"
        yield
    finally:
        for key, config in configs.items():
            config._attn_implementation = previous[key]


def _jepa_reasoner(model) -> list[OnnxPath]:
    config = model.config
    vocab, limit = int(config.vocab_size), int(config.max_position_embeddings)

    def inputs(batch, seed):
        return _tokens(vocab, _text_length(limit, batch), batch, seed)

    def path(name, encoder, target, which):
        return OnnxPath(
            name,
            f"JEPA-Reasoner {which}: tokens -> unit latents (batch, sequence, hidden)",
            Latents(encoder),
            inputs,
            lambda input_ids, attention_mask: (model.encode(input_ids, attention_mask, use_target_encoder=target),),
            ("latents",),
            _TEXT_AXES,
            lambda: _eager_attention(encoder),
        )

    return [
        path("encoder", model.encoder, False, "token encoder (feature-extraction)"),
        path("target-encoder", model.target_encoder, True, "EMA target token encoder"),
    ]


_FAMILIES = {
    "i_jepa": _i_jepa,
    "t_jepa": _t_jepa,
    "bro_jepa": _bro_jepa,
    "epm_jepa": _epm_jepa,
    "jepa_reasoner": _jepa_reasoner,
}
SUPPORTED_MODEL_TYPES = tuple(_FAMILIES)


def family_paths(model) -> list[OnnxPath]:
    """The exportable paths of `model` (an hf-jepa model in eval mode), its default (`"encoder"`) first; raises
    `ValueError` for a model type that has none."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    build = _FAMILIES.get(model_type)
    if build is None or not hasattr(model, "encode"):
        raise ValueError(
            f"model: ONNX export covers the model types {', '.join(SUPPORTED_MODEL_TYPES)} (their base models); got "
            f"{type(model).__name__} with model_type {model_type!r}"
        )
    return build(model)
