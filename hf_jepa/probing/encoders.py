"""Frozen encoders for `hf-jepa probe`: a saved hf-jepa folder (BRo-JEPA, EPM-JEPA frames, I-JEPA, T-JEPA) or any
transformers vision / text encoder (`AutoModel` with `AutoImageProcessor` / `AutoTokenizer`; a folder or Hub id), each
turned into the same two views of its inputs: one pooled vector per input (the linear and kNN probes) and its token /
patch features with a mask (the attentive probe), or the reason it has none.

What each encoder gives (the EMA target encoder where a family has one, as the families evaluate):

- I-JEPA: the patch states of the target ViT `(N, patches, hidden)`; pooled: their mean (`IJepaModel.embed`).
- BRo-JEPA: the latent of the target encoder; tokens: the cells of its last convolutional feature map (CNN and
  ResNet-18 encoders, the map the latent is projected from); the MLP encoder flattens the image first and has none.
- EPM-JEPA: each image as a one-frame sequence; the latent of the target frame encoder; tokens: the cells of its last
  conv stage's map.
- T-JEPA, transformers text encoders: the last hidden states of the real (unpadded) tokens; pooled: their mean.
- transformers vision encoders: `last_hidden_state` (a CNN's `(N, C, h, w)` map read as `h * w` tokens); pooled:
  the mean over every token (the CLS token too, where there is one), the same rule for every model compared.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import torch

from ..progress import progress

logger = logging.getLogger(__name__)

# hf-jepa model types this command probes -> (family name, data kind)
FAMILY_ENCODERS = {
    "i_jepa": ("i-jepa", "image"),
    "bro_jepa": ("bro-jepa", "image"),
    "epm_jepa": ("epm-jepa", "image"),
    "t_jepa": ("t-jepa", "text"),
}
REASONER_REFUSAL = (
    "JEPA-Reasoner folders are not probed: the token encoder reads the reasoning task's own small vocabulary (built "
    "from the task, with no tokenizer for free text) and its latents are trained for the reasoner to continue, not "
    "to describe an input; probe a BRo-JEPA, EPM-JEPA, I-JEPA or T-JEPA folder, or a transformers encoder"
)


@dataclass
class Features:
    """Frozen features of a set of inputs: `pooled` `(N, D)`; `tokens` `(N, T, D')` and `mask` `(N, T)` (True at real
    tokens), or None with `no_tokens` saying why."""

    pooled: torch.Tensor
    tokens: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    no_tokens: str | None = None


class FrozenEncoder:
    """A loaded encoder in eval mode on `device`, with what it reads (`kind`: "image" or "text") and how it is named
    (`family`: an hf-jepa family, or "transformers")."""

    def __init__(self, model, preprocessor, family: str, kind: str, reference: str, device: torch.device):
        self.model = model.to(device).eval()
        self.preprocessor = preprocessor
        self.family, self.kind, self.reference, self.device = family, kind, reference, device
        self.model_type = model.config.model_type

    @property
    def description(self) -> str:
        """e.g. "i-jepa (image encoder)", "transformers vit (image encoder)"."""
        name = self.family if self.family != "transformers" else f"transformers {self.model_type}"
        return f"{name} ({self.kind} encoder)"

    @property
    def num_channels(self) -> int:
        """The channels the model's images have (its config's; 3 when it records none)."""
        return int(getattr(self.model.config, "num_channels", 3) or 3)

    @property
    def image_size(self) -> int | None:
        """The side the model's images have (its config's), None for text encoders or when unknown."""
        size = getattr(self.model.config, "image_size", None)
        return int(size) if isinstance(size, int) else None

    def untrained(self, seed: int) -> FrozenEncoder:
        """The same architecture and config freshly initialised after `torch.manual_seed(seed)` (the global random
        state is left as it was); hf-jepa families build it as their recipes do, so with the training seed it is the
        model training started from."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = type(self.model)(copy.deepcopy(self.model.config))
        return FrozenEncoder(fresh, self.preprocessor, self.family, self.kind, self.reference, self.device)

    @torch.no_grad()
    def features(self, inputs, batch_size: int, with_tokens: bool, description: str, max_length: int = 128):
        """`Features` of `inputs` (uint8 images `(N, H, W)` or a list of texts), `batch_size` at a time, under a
        progress bar labelled `description`; tokens only when `with_tokens`."""
        pooled, tokens, masks, no_tokens = [], [], [], None
        for start in progress(range(0, len(inputs), batch_size), description):
            chunk = inputs[start : start + batch_size]
            if self.kind == "image":
                batch_pooled, batch_tokens, reason = self._image_batch(self._pixels(chunk), with_tokens)
                batch_mask = None if batch_tokens is None else torch.ones(batch_tokens.shape[:2], dtype=torch.bool)
            else:
                batch_pooled, batch_tokens, batch_mask = self._text_batch(chunk, max_length)
                reason = None
            pooled.append(batch_pooled.float().cpu())
            no_tokens = reason
            if with_tokens and batch_tokens is not None:
                tokens.append(batch_tokens.float().cpu())
                masks.append(batch_mask.cpu())
        if not with_tokens or not tokens:
            return Features(torch.cat(pooled), no_tokens=no_tokens)
        return Features(torch.cat(pooled), *_pad_tokens(tokens, masks))

    # ------------------------------------------------------------------ images

    def _pixels(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 `(B, H, W)` or `(B, 3, H, W)` -> the model's `pixel_values` through its image processor (resized, scaled, normalised
        as it was trained); grey images are repeated to three channels for a three-channel model."""
        from PIL import Image

        mode = "L" if self.num_channels == 1 else "RGB"
        arrays = [image.numpy() if image.ndim == 2 else image.permute(1, 2, 0).numpy() for image in images]  # HWC
        pil = [Image.fromarray(array).convert(mode) for array in arrays]
        pixel_values = self.preprocessor(images=pil, return_tensors="pt")["pixel_values"]
        return pixel_values.to(self.device, dtype=self.model.dtype)

    def _image_batch(self, pixel_values: torch.Tensor, with_tokens: bool):
        """(pooled, tokens or None, why none) of one batch of pixel values."""
        model, family = self.model, self.family
        if family == "i-jepa":
            hidden = model.encode(pixel_values, use_target_encoder=True)
            return hidden.mean(1), hidden, None
        if family == "bro-jepa":
            encoder = model.target_encoder if model.target_encoder is not None else model.context_encoder
            pooled = model.encode(pixel_values, use_target_encoder=True)
            tokens, reason = _bro_feature_map(encoder.backbone, pixel_values) if with_tokens else (None, None)
            return pooled, tokens, reason
        if family == "epm-jepa":
            pooled = model.encode(pixel_values[:, None], use_target_encoder=True)[:, 0]
            stages = model.target_encoder.stages
            tokens = _cells(stages[:-1](pixel_values)) if with_tokens else None  # the last module flattens the map
            return pooled, tokens, None
        hidden = model(pixel_values=pixel_values).last_hidden_state
        tokens = _cells(hidden) if hidden.ndim == 4 else hidden
        return tokens.mean(1), tokens, None

    # ------------------------------------------------------------------ text

    def _text_batch(self, texts: list[str], max_length: int):
        """(pooled, tokens, mask) of a batch of texts, right-padded; padding is left out of the mean."""
        from ..modeling.t_jepa.modeling_t_jepa import mean_pool

        batch = self.preprocessor(
            list(texts), max_length=max_length, truncation=True, padding=True, return_tensors="pt"
        )
        input_ids, mask = batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)
        if self.family == "t-jepa":
            hidden = self.model.encode(input_ids, mask, use_target_encoder=True)
        else:
            hidden = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        return mean_pool(hidden, mask), hidden, mask.bool()

    def max_positions(self) -> int | None:
        """How many tokens the text encoder's position table holds (None: not recorded)."""
        config = getattr(self.model.config, "backbone_config", None) or self.model.config
        value = getattr(config, "max_position_embeddings", None)
        return int(value) if isinstance(value, int) else None


def _cells(feature_map: torch.Tensor) -> torch.Tensor:
    """`(B, C, h, w)` -> `(B, h * w, C)`: each cell of a feature map as one token."""
    return feature_map.flatten(2).transpose(1, 2)


def _bro_feature_map(backbone, pixel_values: torch.Tensor):
    """(tokens, None) of BRo-JEPA's last convolutional map, or (None, why) for its MLP encoder."""
    if hasattr(backbone, "blocks"):  # ResNet-18: stem + residual stages, before the global pooling
        return _cells(backbone.blocks(backbone.stem(pixel_values))), None
    if hasattr(backbone, "layers") and any(isinstance(m, torch.nn.Conv2d) for m in backbone.layers):
        return _cells(backbone.layers[:-1](pixel_values)), None  # the CNN's conv stages; the last module flattens
    return None, "BRo-JEPA's MLP encoder flattens the image before its first layer: it has no spatial feature map"


def _pad_tokens(tokens: list[torch.Tensor], masks: list[torch.Tensor]):
    """Batches of `(B, T_b, D)` tokens and `(B, T_b)` masks as one `(N, max T_b, D)` / `(N, max T_b)` pair."""
    length = max(t.shape[1] for t in tokens)
    out = torch.zeros(sum(len(t) for t in tokens), length, tokens[0].shape[-1])
    mask = torch.zeros(out.shape[:2], dtype=torch.bool)
    row = 0
    for chunk, chunk_mask in zip(tokens, masks):
        out[row : row + len(chunk), : chunk.shape[1]] = chunk
        mask[row : row + len(chunk), : chunk.shape[1]] = chunk_mask
        row += len(chunk)
    return out, mask


def _reasoning_model_types() -> set[str]:
    """The model types of the JEPA-Reasoner family's folders (reasoner, Talkers, the pair, the baselines)."""
    from ..recipes.jepa_reasoner import FAMILIES

    return {f.model_type for f in FAMILIES} | {key for f in FAMILIES for key in f.also_evaluates}


def _preprocessor(reference: str, kind: str, config):
    """The folder's image processor or tokenizer; a family folder saved without a processor gets the one its config
    describes. Raises `ValueError` naming MODEL when there is none."""
    from transformers import AutoImageProcessor, AutoTokenizer

    loader = AutoImageProcessor if kind == "image" else AutoTokenizer
    try:
        return loader.from_pretrained(reference)
    except (OSError, ValueError) as error:
        from_config = getattr(_family_processor_class(config.model_type), "from_model_config", None)
        if kind == "image" and from_config is not None:
            return from_config(config)
        what = "an image processor (preprocessor_config.json)" if kind == "image" else "a tokenizer"
        raise ValueError(
            f"MODEL {reference!r}: found no {what} to prepare its {kind} inputs ({' '.join(str(error).split())}); "
            f"save one beside the model (.save_pretrained(folder))"
        ) from error


def _family_processor_class(model_type: str):
    from ..modeling.epm_jepa import EpmJepaImageProcessor
    from ..modeling.i_jepa import IJepaImageProcessor

    return {"i_jepa": IJepaImageProcessor, "epm_jepa": EpmJepaImageProcessor}.get(model_type)


def _device(name: str) -> torch.device:
    """`name` as a torch device ("auto": CUDA when available, else the CPU); `ValueError` naming `device` otherwise."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"device={name!r}: not a torch device ({error}); use auto, cpu, cuda or cuda:N") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r}: CUDA is not available here; use auto or cpu")
    return resolved


def load_encoder(reference: str, device: str = "auto") -> FrozenEncoder:
    """The frozen encoder of `reference` (an hf-jepa folder, or a transformers encoder folder / Hub id) on `device`
    ("auto": CUDA when available, else the CPU). Raises `ValueError` naming MODEL for a JEPA-Reasoner folder, a
    model that is neither a vision nor a text encoder, or one without a processor / tokenizer."""
    from transformers import AutoConfig

    from ..cli_errors import load_model

    config = AutoConfig.from_pretrained(reference)
    model_type = config.model_type
    if model_type in _reasoning_model_types():
        raise ValueError(f"MODEL {reference!r} (model_type {model_type!r}): {REASONER_REFUSAL}")
    if model_type in FAMILY_ENCODERS:
        family, kind = FAMILY_ENCODERS[model_type]
    elif hasattr(config, "image_size") and hasattr(config, "num_channels"):
        family, kind = "transformers", "image"
    elif hasattr(config, "vocab_size") and not any(hasattr(config, n) for n in ("text_config", "vision_config")):
        family, kind = "transformers", "text"
    else:
        raise ValueError(
            f"MODEL {reference!r} (model_type {model_type!r}) is neither a vision encoder (a config with image_size "
            "and num_channels) nor a text encoder that AutoModel runs alone; give an hf-jepa folder or such an encoder"
        )
    resolved = _device(device)
    preprocessor = _preprocessor(reference, kind, config)
    model = load_model(reference)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return FrozenEncoder(model, preprocessor, family, kind, reference, resolved)


__all__ = ["FAMILY_ENCODERS", "REASONER_REFUSAL", "Features", "FrozenEncoder", "load_encoder"]
