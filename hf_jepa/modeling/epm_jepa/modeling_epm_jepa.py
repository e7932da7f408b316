"""EPM-JEPA: an experience-modulated latent world model (operator-side modulation through input-conditioned LoRA).

A CNN encodes every frame of a sequence to a latent; an MLP predictor maps the last `context_length` latents to the
next one, trained against an EMA target encoder (squared error + VICReg variance/covariance terms). Tracks B and C add
a memory: a surprisal gate writes surprising latent transitions into a FIFO buffer, a transformer encodes the buffer
and an attention aggregator queried by the current latent reduces it to `e_agg`, which either joins the predictor's
hidden state (track B, operand side) or sets the per-sample diagonal `d` of `dW = U diag(d) V^T` added to the frozen
predictor weights (track C, operator side; `U`, `V` live in peft LoRA layers).

What is saved and what is rebuilt: every weight (encoders, predictor, LoRA `U`/`V`, memory encoder, aggregator,
hypernetwork) and the surprisal gate's running statistics are saved. The experience buffer is run-time state: it
starts empty after loading and is filled by training, by `forward` in training mode, or by `warm_experience`.

This file imports only torch, transformers and peft so that `trust_remote_code` export works.
"""

import copy
import json
import logging
import math
import os
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model, set_peft_model_state_dict
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPooling, ImageClassifierOutput
from transformers.utils import ModelOutput

from .configuration_epm_jepa import EpmJepaConfig
from .modeling_epm_jepa_memory import (
    ADAPTER_NAME,
    EpmJepaExperienceBuffer,
    EpmJepaExperienceEncoder,
    EpmJepaHypernetwork,
    EpmJepaSurprisalGate,
    lora_layers,
    modulated_lora,
)

ADAPTER_CONFIG_NAME = "adapter_config.json"
ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
# Keys in peft's adapter files carry the prefix `PeftModel` adds, so the files look like any peft adapter's.
_PEFT_PREFIX = "base_model.model."
_MODULATOR_PREFIXES = ("experience_encoder.", "hypernetwork.")
# Config fields a track-C model may set on top of the base it starts from (recorded with the experience adapter).
EXPERIENCE_ADAPTER_FIELDS = (
    "track",
    "buffer_capacity",
    "buffer_entry",
    "write_per_event",
    "surprisal_threshold_std",
    "gate_warmup_updates",
    "memory_dim",
    "memory_num_layers",
    "memory_num_heads",
    "lora_rank",
    "lora_alpha",
    "lora_target_modules",
    "hypernetwork_hidden_size",
    "modulation_init",
)


@dataclass
class EpmJepaOutput(ModelOutput):
    """
    Output of [`EpmJepaModel`].

    Args:
        loss: weighted training loss.
        predicted_latents: `(batch, steps, latent_dim)` predictions of frames `context_length .. T-1`, each from the
            `context_length` latents before it.
        target_latents: `(batch, steps, latent_dim)` EMA target encoder latents of those frames.
        context_latents: `(batch, T, latent_dim)` context encoder latents of every frame.
        surprisal: `(batch, steps)` squared prediction error per step, averaged over latent dimensions.
        experience: `(batch, steps, memory_dim)` the aggregated experience `e_agg` (tracks B and C).
        prediction_loss, variance_loss, covariance_loss: the loss's parts, unweighted (`prediction_loss` is the
            `config.rollout_loss_steps`-step rollout loss, `rollout_loss`, when that is > 1).
        boundary_event: 1.0 when this batch fired the surprisal gate (training mode only), else 0.0.
        buffer_occupancy: fraction of the experience buffer in use.
        buffer_turnover: transitions written so far divided by the capacity (> 1 once the FIFO cycles).
        modulation_norm: mean Frobenius norm of the per-sample weight delta `scaling * U diag(d) V^T` over targeted
            layers (track C), or of the injected residual (track B).
        sigma_embed: mean over latent dimensions of the batch standard deviation of the predicted latents (the
            predictor's output manifold; the paper's safety threshold is 0.5).
        sigma_context: the same for the context latents.
    """

    loss: torch.FloatTensor | None = None
    predicted_latents: torch.FloatTensor | None = None
    target_latents: torch.FloatTensor | None = None
    context_latents: torch.FloatTensor | None = None
    surprisal: torch.FloatTensor | None = None
    experience: torch.FloatTensor | None = None
    prediction_loss: torch.FloatTensor | None = None
    variance_loss: torch.FloatTensor | None = None
    covariance_loss: torch.FloatTensor | None = None
    boundary_event: torch.FloatTensor | None = None
    buffer_occupancy: torch.FloatTensor | None = None
    buffer_turnover: torch.FloatTensor | None = None
    modulation_norm: torch.FloatTensor | None = None
    sigma_embed: torch.FloatTensor | None = None
    sigma_context: torch.FloatTensor | None = None


# -------------------------------------------------------------------------------------------------------- encoder


class EpmJepaFrameEncoder(nn.Module):
    """Stride-2 4x4 conv stages with GroupNorm + GELU, a linear projection of the flattened map (which keeps where the
    digits are), and a LayerNorm without affine on the latent. Batch-independent (no BatchNorm), so a single
    sequence encodes the same in training and in a pipeline."""

    def __init__(self, config: EpmJepaConfig):
        super().__init__()
        layers, width, side = [], config.num_channels, config.image_size
        for channels in config.encoder_channels:
            layers += [
                nn.Conv2d(width, channels, 4, stride=2, padding=1),
                nn.GroupNorm(math.gcd(channels, 8), channels),
                nn.GELU(),
            ]
            width, side = channels, side // 2
        self.stages = nn.Sequential(*layers, nn.Flatten())
        self.projection = nn.Linear(width * side * side, config.latent_dim)
        self.latent_norm = nn.LayerNorm(config.latent_dim, elementwise_affine=False)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.latent_norm(self.projection(self.stages(frames)))


# ------------------------------------------------------------------------------------------------------ predictor


class EpmJepaPredictor(nn.Module):
    """The predictor base: `z_hat_{t+1} = z_t + MLP([z_{t-k+1}, ..., z_t])`, predicting the change from the last latent.

    `layers` are plain `nn.Linear` so peft's LoRA can target them; `hidden_injection` (track B) is added to the first
    hidden state after its activation."""

    def __init__(self, config: EpmJepaConfig):
        super().__init__()
        sizes = [config.context_length * config.latent_dim]
        sizes += [config.predictor_hidden_size] * (config.predictor_num_layers - 1) + [config.latent_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, context: torch.Tensor, hidden_injection: torch.Tensor | None = None) -> torch.Tensor:
        """`context`: `(N, context_length, latent_dim)` -> `(N, latent_dim)`."""
        hidden = context.flatten(1)
        for index, layer in enumerate(self.layers):
            hidden = layer(hidden)
            if index < len(self.layers) - 1:
                hidden = F.gelu(hidden)
                if index == 0 and hidden_injection is not None:
                    hidden = hidden + hidden_injection.to(hidden.dtype)
        return context[:, -1] + hidden


# ----------------------------------------------------------------------------------------------------- loss terms


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa._GatherWithGrad
class _GatherWithGrad(torch.autograd.Function):
    """All ranks' rows concatenated; the backward pass sums every rank's gradient for this rank's rows."""

    @staticmethod
    def forward(ctx, tensor):
        world_size = torch.distributed.get_world_size()
        output = tensor.new_empty((world_size * tensor.shape[0], *tensor.shape[1:]))
        torch.distributed.all_gather_into_tensor(output, tensor.contiguous())
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output.contiguous()
        torch.distributed.all_reduce(grad)
        rows = grad.shape[0] // torch.distributed.get_world_size()
        rank = torch.distributed.get_rank()
        return grad[rank * rows : (rank + 1) * rows]


def _distributed() -> bool:
    return (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    )


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa._gather_with_grad
def _gather_with_grad(latent: torch.Tensor) -> torch.Tensor:
    """All ranks' latents (differentiable), so VICReg statistics see the global batch in multi-process runs."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return latent
    if torch.distributed.get_world_size() == 1:
        return latent
    return _GatherWithGrad.apply(latent)


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.vicreg_variance_loss
def vicreg_variance_loss(latent: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """VICReg hinge on the per-dimension standard deviation: `mean(relu(1 - sqrt(var + eps)))`."""
    std = torch.sqrt(latent.var(dim=0) + eps)
    return F.relu(1.0 - std).mean()


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.vicreg_covariance_loss
def vicreg_covariance_loss(latent: torch.Tensor) -> torch.Tensor:
    """Sum of squared off-diagonal covariance entries (unbiased) divided by the dimension."""
    batch, dim = latent.shape
    centered = latent - latent.mean(dim=0)
    covariance = centered.T @ centered / (batch - 1)
    off_diagonal = covariance - torch.diag(torch.diagonal(covariance))
    return off_diagonal.pow(2).sum() / dim


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa._finite_pixels
def _finite_pixels(pixel_values: torch.Tensor, name: str, dtype: torch.dtype) -> torch.Tensor:
    """`pixel_values` (any floating dtype) cast to the model's parameter dtype `dtype`, as transformers' vision models
    cast their input; raises `ValueError` naming `name` when a value is NaN or infinite after the cast (the model
    would silently return NaN). One reduction over the input; the count is only computed on the error path."""
    cast = pixel_values.to(dtype)
    if not bool(torch.isfinite(cast).all()):
        count = int((~torch.isfinite(cast)).sum())
        where = "" if cast.dtype == pixel_values.dtype else f" after the cast from {pixel_values.dtype} to {dtype}"
        raise ValueError(
            f"{name} holds {count} non-finite value(s) (NaN or inf){where}: every pixel must be a finite number; "
            "clean or drop those inputs"
        )
    return cast


def embedding_spread(latents: torch.Tensor) -> torch.Tensor:
    """Mean over dimensions of the per-dimension standard deviation over all rows of `(..., dim)` latents (NaN for a
    single row, which has no spread to measure)."""
    rows = latents.detach().float().flatten(0, -2)
    return rows.std(dim=0).mean() if rows.shape[0] > 1 else rows.new_full((), float("nan"))


# -------------------------------------------------------------------------------------------------------------- model


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.source_config_dict
def source_config_dict(cls, source, kwargs) -> dict | None:
    """The config dict `cls.from_pretrained(source, **kwargs)` would read (None without a source, or with `config=`
    given). Raises `ValueError` naming both model types when `source` holds another model type, before transformers
    fails on that model's config values."""
    if source is None or kwargs.get("config") is not None:
        return None
    hub_kwargs = ("cache_dir", "force_download", "proxies", "token", "local_files_only", "revision", "subfolder")
    config_dict, _ = cls.config_class.get_config_dict(source, **{k: kwargs[k] for k in hub_kwargs if k in kwargs})
    found, expected = config_dict.get("model_type"), cls.config_class.model_type
    if found is not None and found != expected:
        raise ValueError(
            f"{str(source)!r} holds a model of type {found!r}, but {cls.__name__} loads {expected!r} models: "
            f"load it with the class of its type (AutoModel.from_pretrained picks it). "
            f"{cls._strict_loading_hint}".strip()
        )
    return config_dict


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.copy_into_aligned_memory
@torch.no_grad()
def copy_into_aligned_memory(model: nn.Module) -> None:
    """Give each CPU parameter and buffer of `model` that lies outside PyTorch's aligned allocations a copy of its own.
    from_pretrained keeps the tensors safetensors serves from the memory-mapped file, at the file's 8-byte alignment,
    and CPU vector kernels can split their sums by alignment (seen on AMD EPYC): without the copy a loaded model's
    outputs could differ from the saved model's in the last bits. Each tensor object stays the same (`.data` is
    replaced), so tied weights stay tied."""
    alignment = 64  # bytes: what PyTorch's CPU allocator guarantees (c10's gAlignment)
    for module in model.modules():
        for tensor in (*module._parameters.values(), *module._buffers.values()):
            if tensor is not None and tensor.device.type == "cpu" and tensor.data_ptr() % alignment:
                tensor.data = tensor.data.clone()


class EpmJepaPreTrainedModel(PreTrainedModel):
    config: EpmJepaConfig
    config_class = EpmJepaConfig
    base_model_prefix = "epm_jepa"
    main_input_name = "pixel_values"
    input_modalities = "video"

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            kind = getattr(module, "_hf_jepa_init", None)
            if kind == "lora_A":  # peft's default LoRA init: Kaiming-uniform A, zero B
                init.kaiming_uniform_(module.weight, a=math.sqrt(5))
            elif kind in ("zeros", "unit_bias"):
                init.zeros_(module.weight)
            else:
                init.trunc_normal_(module.weight, std=std)
            if module.bias is not None:
                init.ones_(module.bias) if kind == "unit_bias" else init.zeros_(module.bias)
        elif isinstance(module, nn.Conv2d):
            init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, (nn.LayerNorm, nn.GroupNorm)):
            if module.weight is not None:
                init.ones_(module.weight)
                init.zeros_(module.bias)
        elif isinstance(module, nn.MultiheadAttention):
            init.trunc_normal_(module.in_proj_weight, std=std)
            init.zeros_(module.in_proj_bias)
        elif isinstance(module, EpmJepaExperienceEncoder):
            init.trunc_normal_(module.null_entry, std=std)
        elif isinstance(module, EpmJepaSurprisalGate):
            init.zeros_(module.running_mean)
            init.ones_(module.running_var)
            init.zeros_(module.num_updates)
        elif isinstance(module, EpmJepaExperienceBuffer):
            init.zeros_(module.entries)
            init.zeros_(module.num_writes)


class EpmJepaModel(EpmJepaPreTrainedModel):
    """
    EPM-JEPA world model: context encoder, EMA target encoder (frozen), predictor base, surprisal gate and, by track,
    the experience memory with residual injection (`"ei"`) or hypernetwork-driven LoRA (`"epm"`). `from_pretrained`
    loads strictly; the experience buffer starts empty after loading.
    """

    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = "To start one track from another's weights use EpmJepaModel.from_base(path, track=...). "

    def __init__(self, config: EpmJepaConfig):
        super().__init__(config)
        config.validate()
        self.context_encoder = EpmJepaFrameEncoder(config)
        self.target_encoder = copy.deepcopy(self.context_encoder)
        self.predictor = EpmJepaPredictor(config)
        # Every track keeps surprisal statistics, so a vanilla base hands a calibrated gate to the memory tracks.
        self.surprisal_gate = EpmJepaSurprisalGate(config)
        self.experience_buffer = EpmJepaExperienceBuffer(config) if config.uses_memory else None
        self.experience_encoder = EpmJepaExperienceEncoder(config) if config.uses_memory else None
        self.experience_injection = None
        self.hypernetwork = None
        if config.track == "ei":
            self.experience_injection = nn.Linear(config.memory_dim, config.predictor_hidden_size)
            self.experience_injection._hf_jepa_init = "zeros"  # track B starts as the base predictor
        elif config.track == "epm":
            self._inject_lora()
            self.hypernetwork = EpmJepaHypernetwork(config, len(self._lora_layers))
        self.post_init()
        if self.predictor.layers[0].weight.device.type != "meta":
            self.copy_online_to_targets()
        self.freeze_targets()

    # ------------------------------------------------------------------ peft LoRA (track C)

    def experience_lora_config(self) -> LoraConfig:
        """The peft `LoraConfig` of the experience adapter (`U`, `V` of `dW = U diag(d) V^T`)."""
        config = self.config
        return LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            target_modules=config.lora_target_modules,
            lora_dropout=0.0,
            bias="none",
        )

    def _inject_lora(self):
        trainable = {name: p.requires_grad for name, p in self.named_parameters()}
        inject_adapter_in_model(self.experience_lora_config(), self, adapter_name=ADAPTER_NAME)
        # peft freezes everything but the adapter; which parts train is the trainer's decision.
        for name, parameter in self.named_parameters():
            parameter.requires_grad_(trainable.get(name, True))
        layers = lora_layers(self)
        stray = [name for name, _ in layers if not name.startswith("predictor.")]
        if not layers or stray:
            raise ValueError(
                f"EpmJepaConfig.lora_target_modules={self.config.lora_target_modules!r} must select predictor linear "
                f"layers (e.g. r'predictor\\.layers\\.\\d+'); selected: {[name for name, _ in layers] or 'none'}"
            )
        for _, layer in layers:
            layer.lora_A[ADAPTER_NAME]._hf_jepa_init = "lora_A"
            # With d = 0 at the start ("zero") U must not be zero too, or no gradient could reach d or U.
            layer.lora_B[ADAPTER_NAME]._hf_jepa_init = "zeros" if self.config.modulation_init == "unit" else "lora_A"
        self._lora_layers = [layer for _, layer in layers]

    # ------------------------------------------------------------------ EMA target housekeeping

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) module pairs the trainer updates by EMA."""
        return [(self.context_encoder, self.target_encoder)]

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.copy_online_to_targets
    @torch.no_grad()
    def copy_online_to_targets(self):
        """Make every EMA target an exact copy of its online module (parameters and buffers)."""
        for online, target in self.ema_pairs():
            target.load_state_dict(online.state_dict())

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.freeze_targets
    def freeze_targets(self):
        """Keep every EMA target out of the optimiser and in eval mode: only the EMA update (`ema_pairs`) moves it."""
        for _, target in self.ema_pairs():
            target.requires_grad_(False)
            target.eval()

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.train
    def train(self, mode: bool = True):
        super().train(mode)
        for _, target in self.ema_pairs():
            target.eval()
        return self

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.from_pretrained
    @classmethod
    def from_pretrained(cls, *args, strict: bool = True, **kwargs):
        """`PreTrainedModel.from_pretrained`, strict by default: weights missing from the checkpoint, left unused or of
        another shape (reported with `ignore_mismatched_sizes=True`; without it transformers raises already) raise
        `ValueError` instead of a warning; `strict=False` only warns. The EMA targets are re-frozen after loading
        (loading marks every floating parameter trainable again). A folder or repo holding another model type raises
        `ValueError` naming both types (instead of failing on the other model's config values)."""
        output_loading_info = kwargs.pop("output_loading_info", False)
        source_config_dict(cls, args[0] if args else kwargs.get("pretrained_model_name_or_path"), kwargs)
        model, loading_info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        copy_into_aligned_memory(model)
        model.freeze_targets()
        problems = {
            k: sorted(str(x) for x in (loading_info.get(k) or ()))
            for k in ("missing_keys", "unexpected_keys", "mismatched_keys")
        }
        if strict and any(problems.values()):
            raise ValueError(
                f"{cls.__name__}.from_pretrained: the checkpoint does not match the config (missing keys: "
                f"{problems['missing_keys'][:8]}, unexpected keys: {problems['unexpected_keys'][:8]}, mismatched "
                f"keys: {problems['mismatched_keys'][:8]}). {cls._strict_loading_hint}"
                "Pass strict=False to load anyway."
            )
        return (model, loading_info) if output_loading_info else model

    @staticmethod
    def _shared_name(name: str) -> str | None:
        """Name of a weight shared by all tracks, as a vanilla model calls it; None for track-specific weights."""
        if name.split(".")[0] not in ("context_encoder", "target_encoder", "predictor", "surprisal_gate"):
            return None
        if ".lora_A." in name or ".lora_B." in name:
            return None
        return name.replace(".base_layer.", ".")

    @classmethod
    def from_base(cls, base, **config_overrides) -> "EpmJepaModel":
        """A model of another track (`track="ei"`, ...) that starts from `base`'s shared weights: both encoders, the
        predictor base and the surprisal gate's statistics. Track-specific parts keep their initialisation, under
        which B and C compute exactly what the base computes (zero injection, zero LoRA delta).

        `base`: an `EpmJepaModel` or a path/Hub id to load one from. `config_overrides` may only change the track and
        the memory/LoRA fields; the shared architecture must match (checked: ValueError naming the weight)."""
        if not isinstance(base, EpmJepaModel):
            base = cls.from_pretrained(base)
        config = EpmJepaConfig(**{**base.config.to_dict(), **config_overrides})
        model = cls(config)
        shared = {cls._shared_name(k): v for k, v in base.state_dict().items() if cls._shared_name(k)}
        own = {cls._shared_name(k): k for k in model.state_dict() if cls._shared_name(k)}
        if shared.keys() != own.keys():
            raise ValueError(f"base and new model share different weights: {sorted(shared.keys() ^ own.keys())}")
        state = model.state_dict()
        for name, tensor in shared.items():
            if state[own[name]].shape != tensor.shape:
                raise ValueError(
                    f"from_base: {name} has shape {tuple(tensor.shape)} in the base, {tuple(state[own[name]].shape)} "
                    "in the new config: config_overrides may not change the shared architecture"
                )
        model.load_state_dict({own[name]: tensor for name, tensor in shared.items()}, strict=False)
        model.freeze_targets()
        # The base an experience adapter saved from this model applies to (peft's base_model_name_or_path).
        model._experience_base_name_or_path = base.name_or_path or None
        return model

    # ------------------------------------------------------------------ experience adapter (peft files)

    def _require_track(self, track: str, what: str):
        if self.config.track != track:
            raise ValueError(f"{what} needs a model with track={track!r}, this one has track={self.config.track!r}")

    def save_experience_adapter(self, save_directory: str, base_model_name_or_path: str | None = None) -> None:
        """Write the experience adapter as a peft adapter: `adapter_config.json` (the `LoraConfig`) and
        `adapter_model.safetensors` holding LoRA `U`/`V` (peft's key names) together with the memory encoder,
        aggregator and hypernetwork that produce `d`; `experience_adapter.json` records the track-C config fields.

        `base_model_name_or_path` (peft's field, the model the adapter applies to): by default the base this model
        was started from (`from_base`), else the folder/repo this model was loaded from. Load the adapter with
        `EpmJepaModel.from_experience_adapter(save_directory)`, or through peft's API on a track-C model built from
        the base: `PeftModel.from_pretrained(EpmJepaModel.from_base(base, track="epm"), save_directory,
        adapter_name="experience")`. A plain `PeftModel.from_pretrained(base, ...)` on a base without the memory
        raises (see `_load_from_state_dict`): peft would keep `U`/`V` as a static LoRA and drop the rest."""
        from safetensors.torch import save_file

        self._require_track("epm", "save_experience_adapter")
        os.makedirs(save_directory, exist_ok=True)
        lora_config = self.experience_lora_config()
        base = base_model_name_or_path or getattr(self, "_experience_base_name_or_path", None) or self.name_or_path
        lora_config.base_model_name_or_path = str(base) if base else None
        lora_config.save_pretrained(save_directory)
        state = {_PEFT_PREFIX + k: v for k, v in get_peft_model_state_dict(self, adapter_name=ADAPTER_NAME).items()}
        for name, tensor in self.state_dict().items():
            if name.startswith(_MODULATOR_PREFIXES):
                state[_PEFT_PREFIX + name] = tensor
        state = {k: v.detach().contiguous().clone() for k, v in state.items()}
        save_file(state, os.path.join(save_directory, ADAPTER_WEIGHTS_NAME), metadata={"format": "pt"})
        with open(os.path.join(save_directory, "experience_adapter.json"), "w") as handle:
            json.dump(
                {
                    "model_type": self.config.model_type,
                    "track": "epm",
                    "buffer_entry": self.config.buffer_entry,
                    "num_lora_layers": len(self._lora_layers),
                    # The config fields a track-C model adds on top of its base (from_experience_adapter uses them).
                    "config": {name: getattr(self.config, name) for name in EXPERIENCE_ADAPTER_FIELDS},
                },
                handle,
                indent=2,
            )

    def load_experience_adapter(self, adapter_directory: str) -> None:
        """Load an adapter written by `save_experience_adapter` into this model (track `"epm"`), strictly: every LoRA
        and modulator weight must be present with this model's shape, else `ValueError` says which does not match."""
        from safetensors.torch import load_file

        self._require_track("epm", "load_experience_adapter")
        weights_path = os.path.join(adapter_directory, ADAPTER_WEIGHTS_NAME)
        if not os.path.isfile(os.path.join(adapter_directory, ADAPTER_CONFIG_NAME)) or not os.path.isfile(weights_path):
            raise FileNotFoundError(
                f"{adapter_directory!r} holds no peft adapter ({ADAPTER_CONFIG_NAME} + {ADAPTER_WEIGHTS_NAME})"
            )
        saved = LoraConfig.from_pretrained(adapter_directory)
        mine = self.experience_lora_config()
        for field in ("r", "lora_alpha", "target_modules"):
            theirs, ours = getattr(saved, field), getattr(mine, field)
            if (sorted(theirs) if isinstance(theirs, (set, list)) else theirs) != (
                sorted(ours) if isinstance(ours, (set, list)) else ours
            ):
                raise ValueError(
                    f"adapter does not match its base: LoraConfig.{field} is {theirs!r} in the adapter, {ours!r} here"
                )
        state = {k.removeprefix(_PEFT_PREFIX): v for k, v in load_file(weights_path).items()}
        lora_expected = get_peft_model_state_dict(self, adapter_name=ADAPTER_NAME)
        modulator_expected = {k: v for k, v in self.state_dict().items() if k.startswith(_MODULATOR_PREFIXES)}
        expected = {**lora_expected, **modulator_expected}
        missing, unexpected = sorted(expected.keys() - state.keys()), sorted(state.keys() - expected.keys())
        if missing or unexpected:
            raise ValueError(f"adapter does not match its base: missing {missing}, unexpected {unexpected}")
        for name, tensor in expected.items():
            if state[name].shape != tensor.shape:
                raise ValueError(
                    f"adapter does not match its base: {name} has shape {tuple(state[name].shape)} in the adapter, "
                    f"{tuple(tensor.shape)} in the model"
                )
        result = set_peft_model_state_dict(self, {k: state[k] for k in lora_expected}, adapter_name=ADAPTER_NAME)
        stray = [k for k in result.unexpected_keys if ADAPTER_NAME in k or "lora_" in k]
        if stray:
            raise ValueError(f"adapter does not match its base: peft left {stray} unused")
        self.load_state_dict({k: state[k] for k in modulator_expected}, strict=False)

    @classmethod
    def from_experience_adapter(cls, adapter_directory: str, base=None) -> "EpmJepaModel":
        """A track-C model from an experience adapter folder (`save_experience_adapter`): the base (`base`, an
        `EpmJepaModel` or a path/Hub id; default: the adapter's `base_model_name_or_path`) extended with the memory
        and hypernetwork (`from_base` with the config fields recorded in `experience_adapter.json`), then the adapter
        loaded strictly. Outputs equal the saved model's when its encoders were not trained after `from_base`."""
        from peft import PeftConfig

        adapter_directory = str(adapter_directory)
        record_path = os.path.join(adapter_directory, "experience_adapter.json")
        if not os.path.isfile(record_path):
            raise FileNotFoundError(
                f"{adapter_directory!r} holds no experience_adapter.json: not an adapter written by "
                "EpmJepaModel.save_experience_adapter"
            )
        with open(record_path) as handle:
            record = json.load(handle)
        if base is None:
            base = PeftConfig.from_pretrained(adapter_directory).base_model_name_or_path
            if not base:
                raise ValueError(
                    f"the adapter in {adapter_directory!r} names no base_model_name_or_path: pass base= (the "
                    "vanilla EpmJepaModel, or its path/Hub id, that the track-C model started from)"
                )
        overrides = record.get("config") or {"track": "epm"}
        model = cls.from_base(base, **overrides)
        model.load_experience_adapter(adapter_directory)
        return model

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors):
        """Refuse an experience adapter loaded where its input-conditioned parts cannot go. peft's
        `PeftModel.from_pretrained` loads non-LoRA adapter tensors with `strict=False`: on a model without the memory
        and hypernetwork (track vanilla/ei) they would be dropped silently, and under another adapter name than
        `"experience"` on a track-C model `U`/`V` would become a second, static LoRA. Error messages added here
        make torch's `load_state_dict` raise even when it is not strict."""
        modulator = sorted(k[len(prefix) :] for k in state_dict if k[len(prefix) :].startswith(_MODULATOR_PREFIXES))
        if modulator:
            homeless = [k for k in modulator if getattr(self, k.split(".")[0]) is None]
            other_adapters = {
                match.group(1)
                for k in state_dict
                if (match := re.search(r"\.lora_[AB]\.([^.]+)\.weight$", k)) and match.group(1) != ADAPTER_NAME
            }
            route = (
                "Load it with EpmJepaModel.from_experience_adapter(path) or, through peft, "
                f"PeftModel.from_pretrained(EpmJepaModel.from_base(base, track='epm'), path, adapter_name={ADAPTER_NAME!r})"
            )
            if homeless:
                errors.append(
                    f"an EPM-JEPA experience adapter holds {len(homeless)} memory/hypernetwork tensors this "
                    f"track={self.config.track!r} model has no module for (missing: {homeless}); loaded here its "
                    f"LoRA U/V would act as a static LoRA, not the input-conditioned one. {route}."
                )
            elif self.config.track == "epm" and other_adapters:
                errors.append(
                    f"an EPM-JEPA experience adapter was loaded as adapter {sorted(other_adapters)}: its LoRA U/V would "
                    f"be a second, static LoRA beside the modulated {ADAPTER_NAME!r} one. {route}."
                )
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors)

    # ------------------------------------------------------------------ input checks

    def _check_frames(self, pixel_values, min_frames: int, purpose: str) -> torch.Tensor:
        """Checked frames: a floating tensor `(batch >= 1, frames >= min_frames, C, H, W)` of finite values, cast to
        the model's dtype (float64 / float16 / bfloat16 input is accepted). Raises before any state changes."""
        config = self.config
        expected = (config.num_channels, config.image_size, config.image_size)
        shape_text = f"(batch, frames, {', '.join(map(str, expected))})"
        if not isinstance(pixel_values, torch.Tensor) or not pixel_values.is_floating_point():
            raise TypeError(f"pixel_values must be a floating-point tensor {shape_text} with values in [0, 1]")
        if pixel_values.ndim != 5 or tuple(pixel_values.shape[2:]) != expected:
            raise ValueError(f"pixel_values must have shape {shape_text}, got {tuple(pixel_values.shape)}")
        if pixel_values.shape[1] < min_frames:
            raise ValueError(
                f"pixel_values holds {pixel_values.shape[1]} frames per sequence; {purpose} needs at least {min_frames} "
                f"(context_length={config.context_length})"
            )
        if pixel_values.shape[0] == 0:
            raise ValueError(f"pixel_values is empty (batch size 0): {purpose} needs at least one sequence")
        return _finite_pixels(pixel_values, "pixel_values", self.context_encoder.projection.weight.dtype)

    # ------------------------------------------------------------------ building blocks

    def encode(self, pixel_values: torch.Tensor, use_target_encoder: bool = False) -> torch.Tensor:
        """`(B, T, C, H, W)` frames -> `(B, T, latent_dim)` latents (context or EMA target encoder)."""
        return self._encode(self._check_frames(pixel_values, 1, "encoding"), use_target_encoder)

    def _encode(self, pixel_values: torch.Tensor, use_target_encoder: bool = False) -> torch.Tensor:
        """`encode` on frames already checked by `_check_frames`."""
        batch, frames = pixel_values.shape[:2]
        encoder = self.target_encoder if use_target_encoder else self.context_encoder
        with torch.set_grad_enabled(torch.is_grad_enabled() and not use_target_encoder):
            return encoder(pixel_values.flatten(0, 1)).unflatten(0, (batch, frames))

    def context_windows(self, latents: torch.Tensor, include_last: bool = False) -> torch.Tensor:
        """`(B, T, D)` -> `(B, W, context_length, D)`: the windows ending at frames `k-1 .. T-2` (`.. T-1` with
        `include_last`), each predicting the frame after it."""
        k = self.config.context_length
        end = latents.shape[1] if include_last else latents.shape[1] - 1
        return latents[:, :end].unfold(1, k, 1).movedim(-1, -2)

    def aggregate_experience(self, current_latent: torch.Tensor) -> torch.Tensor | None:
        """`e_agg` for `(N, latent_dim)` current latents from the buffer's valid entries (None for track A)."""
        if self.experience_encoder is None:
            return None
        # A copy: autograd keeps the entries for the backward pass, and a boundary event rewrites the buffer in
        # place before it runs.
        return self.experience_encoder(current_latent, self.experience_buffer.valid_entries().clone())

    def lora_modulation(self, experience: torch.Tensor) -> torch.Tensor:
        """Track C: `(N, memory_dim)` `e_agg` -> `(N, num_lora_layers, lora_rank)` diagonals `d`."""
        self._require_track("epm", "lora_modulation")
        return self.hypernetwork(experience)

    def predict_next(
        self,
        context: torch.Tensor,
        modulation: torch.Tensor | None = None,
        hidden_injection: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The predictor on `(N, context_length, latent_dim)` windows. Track C: `modulation` `(N, layers, rank)` sets
        `d` per row (None = plain LoRA; zeros = the base predictor exactly)."""
        if self.config.track == "epm":
            with modulated_lora(self._lora_layers, modulation):
                return self.predictor(context, hidden_injection)
        return self.predictor(context, hidden_injection)

    def rollout(self, context: torch.Tensor, steps: int) -> torch.Tensor:
        """Autoregressive latent rollout: `(N, context_length, latent_dim)` windows -> `(N, steps, latent_dim)`, the
        predictions of the `steps` latents after each window. Each prediction is fed back as the newest context entry
        (the oldest drops out). The experience buffer is read, never written: the memory stays fixed over the rollout
        and `e_agg` is queried by the newest latent, as in one-step prediction, so step 1 is exactly `forward`'s
        one-step prediction. Differentiable (the rollout loss trains through it); evaluate under `torch.no_grad()`."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
        expected = (self.config.context_length, self.config.latent_dim)
        if context.ndim != 3 or tuple(context.shape[1:]) != expected:
            raise ValueError(f"context must have shape (N, {expected[0]}, {expected[1]}), got {tuple(context.shape)}")
        window, predictions = context, []
        for _ in range(steps):
            predicted = self._predict_windows(window[:, None])[0][:, 0]
            predictions.append(predicted)
            # Autocast may return a lower-precision prediction; the window keeps the context's dtype.
            window = torch.cat([window[:, 1:], predicted[:, None].to(window.dtype)], dim=1)
        return torch.stack(predictions, dim=1)

    def rollout_loss(self, context_latents: torch.Tensor, target_latents: torch.Tensor, steps: int) -> torch.Tensor:
        """The `steps`-step latent prediction loss: from every context window of `context_latents` `(B, T, D)` that has
        `steps` frames after it, `rollout` `steps` steps; the mean squared error against `target_latents` `(B, T -
        context_length, D)` (the EMA targets of frames `context_length .. T-1`) over all rollouts and steps, i.e. the
        mean over steps 1..steps of each step's error. `steps=1` is the one-step loss of every window exactly."""
        k = self.config.context_length
        starts = context_latents.shape[1] - k - steps + 1
        if starts < 1:
            raise ValueError(
                f"a {steps}-step rollout loss needs sequences of at least context_length + steps = {k + steps} frames, "
                f"got {context_latents.shape[1]}"
            )
        windows = self.context_windows(context_latents)[:, :starts]
        rolled = self.rollout(windows.flatten(0, 1), steps).unflatten(0, tuple(windows.shape[:2]))
        targets = target_latents.unfold(1, steps, 1).movedim(-1, -2)  # (B, starts, steps, D)
        return F.mse_loss(rolled.float(), targets.float())

    def lora_delta_norm(self, modulation: torch.Tensor) -> torch.Tensor:
        """Mean over rows and layers of `||scaling * B diag(d) A||_F`, from `d^T (B^T B * A A^T) d` (no dense dW)."""
        norms = []
        for index, layer in enumerate(self._lora_layers):
            a, b = layer.lora_A[ADAPTER_NAME].weight.float(), layer.lora_B[ADAPTER_NAME].weight.float()
            gram = (b.T @ b) * (a @ a.T)
            d = modulation[:, index].float()
            squared = torch.einsum("nr,rs,ns->n", d, gram, d).clamp_min(0)
            norms.append(layer.scaling[ADAPTER_NAME] * squared.sqrt())
        return torch.stack(norms).mean()

    def _predict_windows(self, windows: torch.Tensor):
        """`(B, W, k, D)` -> predictions `(B, W, D)`, `e_agg` `(B, W, m)` or None, and the modulation norm."""
        flat = windows.flatten(0, 1)
        experience = self.aggregate_experience(flat[:, -1])
        modulation = injection = norm = None
        if self.config.track == "epm":
            modulation = self.lora_modulation(experience)
            norm = self.lora_delta_norm(modulation.detach())
        elif self.config.track == "ei":
            injection = self.experience_injection(experience)
            norm = injection.detach().float().norm(dim=-1).mean()
        predicted = self.predict_next(flat, modulation, injection)
        unflatten = (windows.shape[0], windows.shape[1])
        experience = experience.unflatten(0, unflatten) if experience is not None else None
        return predicted.unflatten(0, unflatten), experience, norm

    # ------------------------------------------------------------------ experience writing

    def _buffer_entries(self, current_target, next_target, predicted) -> torch.Tensor:
        parts = [current_target, next_target]
        if self.config.buffer_entry == "pair_residual":
            parts.append(next_target - predicted)
        return torch.cat([p.detach().float() for p in parts], dim=-1)

    @torch.no_grad()
    def _observe(self, surprisal, current_target, next_target, predicted) -> bool:
        """Gate on the batch-mean surprisal (averaged over ranks); on an event write each sequence's most surprising
        transition, the `write_per_event` most surprising sequences of the global batch, so every rank's buffer
        receives the same entries in the same order."""
        batch_surprisal = surprisal.mean().float()
        if _distributed():
            torch.distributed.all_reduce(batch_surprisal)
            batch_surprisal /= torch.distributed.get_world_size()
        fired = self.surprisal_gate.observe(batch_surprisal)
        if not fired or self.experience_buffer is None:
            return fired
        rows = torch.arange(surprisal.shape[0], device=surprisal.device)
        step = surprisal.argmax(dim=1)
        scores = surprisal[rows, step].float()
        entries = self._buffer_entries(current_target[rows, step], next_target[rows, step], predicted[rows, step])
        if _distributed():
            entries, scores = _gather_with_grad(entries), _gather_with_grad(scores)
        top = scores.topk(min(self.config.write_per_event, scores.numel())).indices
        self.experience_buffer.write(entries[top])
        return fired

    @torch.no_grad()
    def warm_experience(self, pixel_values: torch.Tensor, gated: bool = False) -> int:
        """Fill the buffer from sequences before predicting: every transition of `pixel_values` `(B, T, C, H, W)`
        (`gated=False`) or those whose surprisal exceeds the gate's threshold (`gated=True`; the gate's statistics
        stay unchanged). Returns the number of entries written (the newest `buffer_capacity` are kept).

        Frames holding a NaN or inf raise `ValueError` before anything is written (the buffer is unchanged); float64
        / float16 frames are cast to the model's dtype."""
        if self.experience_buffer is None:
            raise ValueError(f"track {self.config.track!r} has no experience buffer (use track 'ei' or 'epm')")
        pixel_values = self._check_frames(pixel_values, self.config.context_length + 1, "warming the experience buffer")
        was_training = self.training
        self.eval()
        try:
            targets = self._encode(pixel_values, use_target_encoder=True)
            windows = self.context_windows(self._encode(pixel_values))
            predicted, _, _ = self._predict_windows(windows)
            k = self.config.context_length
            current, following = targets[:, k - 1 : -1], targets[:, k:]
            entries = self._buffer_entries(current, following, predicted).flatten(0, 1)
            if gated:
                surprisal = (predicted.float() - following.float()).pow(2).mean(-1).flatten()
                entries = entries[surprisal > self.surprisal_gate.threshold()]
            return self.experience_buffer.write(entries)
        finally:
            self.train(was_training)

    def reset_experience(self) -> None:
        """Empty the experience buffer (the gate's statistics are kept)."""
        if self.experience_buffer is not None:
            self.experience_buffer.reset()

    @torch.no_grad()
    def predict_next_latent(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """`(B, T, C, H, W)` with `T >= context_length` -> `(B, latent_dim)` predicted latent of frame `T`, reading
        (not writing) the experience buffer."""
        pixel_values = self._check_frames(pixel_values, self.config.context_length, "predicting the next latent")
        latents = self._encode(pixel_values[:, -self.config.context_length :])
        predicted, _, _ = self._predict_windows(self.context_windows(latents, include_last=True)[:, -1:])
        return predicted[:, 0]

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        pixel_values: torch.Tensor,
        update_experience: bool | None = None,
        return_dict: bool | None = None,
        experience_pixel_values: torch.Tensor | None = None,
        **kwargs,
    ) -> EpmJepaOutput | BaseModelOutputWithPooling | tuple:
        r"""
        Single frames `(batch, num_channels, image_size, image_size)` make the model a frame encoder, as
        `pipeline("image-feature-extraction")` calls it: a `BaseModelOutputWithPooling` whose `pooler_output` is each
        frame's context latent `(batch, latent_dim)` and whose `last_hidden_state` is the same latent as a one-token
        sequence `(batch, 1, latent_dim)`; no prediction, no loss, the gate and the buffer untouched.

        pixel_values (`torch.FloatTensor` of shape `(batch, frames, num_channels, image_size, image_size)`):
            Frame sequences with values in [0, 1]; at least `context_length + 1` frames (`context_length +
            rollout_loss_steps` with a rollout loss). Every frame after the first `context_length` is predicted
            from the ones before it and scored against the EMA target encoder. Any
            floating dtype is accepted and cast to the model's dtype; NaN or inf values, integer frames and an empty
            batch raise (`ValueError` / `TypeError`) before the gate or the buffer changes.
        update_experience (`bool`, *optional*):
            Feed this batch to the surprisal gate (and, on an event, to the buffer). Defaults to `self.training`, or
            to False when `experience_pixel_values` is given.
        experience_pixel_values (`torch.FloatTensor` of shape `(support, frames, num_channels, image_size, image_size)`, *optional*):
            The episodic protocol (tracks B and C): empty the buffer, fill it with every transition of these
            sequences (`warm_experience`, no gradient), then predict `pixel_values` with that experience. The buffer
            then holds the current episode only, so the memory can tell the predictor the episode's dynamics.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        config = self.config
        if isinstance(pixel_values, torch.Tensor) and pixel_values.ndim == 4:  # frame encoder (feature extraction)
            latent = self.encode(pixel_values[:, None])[:, 0]
            output = BaseModelOutputWithPooling(last_hidden_state=latent[:, None], pooler_output=latent)
            return output if return_dict else output.to_tuple()
        steps = config.rollout_loss_steps
        purpose = (
            "scoring a prediction" if steps == 1 else f"the {steps}-step rollout loss (rollout_loss_steps={steps})"
        )
        pixel_values = self._check_frames(pixel_values, config.context_length + steps, purpose)
        if experience_pixel_values is not None:
            if self.experience_buffer is None:
                raise ValueError(
                    f"experience_pixel_values needs an experience buffer; track {config.track!r} has none (use 'ei' or 'epm')"
                )
            # Checked before the reset, so bad experience frames leave the buffer as it was.
            experience_pixel_values = self._check_frames(
                experience_pixel_values, config.context_length + 1, "filling the buffer from experience_pixel_values"
            )
            self.experience_buffer.reset()
            self.warm_experience(experience_pixel_values)
            update_experience = False if update_experience is None else update_experience
        update_experience = self.training if update_experience is None else update_experience
        k = config.context_length

        context_latents = self._encode(pixel_values)
        target_all = self._encode(pixel_values, use_target_encoder=True)
        target_latents = target_all[:, k:]
        predicted, experience, modulation_norm = self._predict_windows(self.context_windows(context_latents))
        surprisal = (predicted.detach().float() - target_latents.float()).pow(2).mean(-1)

        if steps == 1:
            parts = {"prediction_loss": F.mse_loss(predicted.float(), target_latents.float())}
        else:  # the one-step predictions above still feed the gate and the outputs
            parts = {"prediction_loss": self.rollout_loss(context_latents, target_latents, steps)}
        # Global-batch statistics while training; evaluation may run on one rank alone, so it must not gather.
        flat = context_latents.flatten(0, 1).float()
        gathered = _gather_with_grad(flat) if self.training else flat
        parts["variance_loss"] = vicreg_variance_loss(gathered)
        parts["covariance_loss"] = vicreg_covariance_loss(gathered)
        loss = (
            config.invariance_weight * parts["prediction_loss"]
            + config.variance_weight * parts["variance_loss"]
            + config.covariance_weight * parts["covariance_loss"]
        )

        fired = False
        if update_experience:
            fired = self._observe(surprisal, target_all[:, k - 1 : -1], target_latents, predicted)
        diagnostics = {
            "boundary_event": torch.tensor(float(fired)),
            "sigma_embed": embedding_spread(predicted),
            "sigma_context": embedding_spread(context_latents),
        }
        if self.experience_buffer is not None:
            buffer = self.experience_buffer
            diagnostics["buffer_occupancy"] = torch.tensor(buffer.occupancy / buffer.capacity)
            diagnostics["buffer_turnover"] = torch.tensor(int(buffer.num_writes) / buffer.capacity)
        if modulation_norm is not None:
            diagnostics["modulation_norm"] = modulation_norm

        output = EpmJepaOutput(
            loss=loss,
            predicted_latents=predicted,
            target_latents=target_latents,
            context_latents=context_latents,
            surprisal=surprisal,
            experience=experience,
            **parts,
            **diagnostics,
        )
        return output if return_dict else output.to_tuple()


# ------------------------------------------------------------------------------------------ image classification


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.classifier_encoder_attribute
def classifier_encoder_attribute(config, has_target_encoder: bool) -> str:
    """The attribute of the encoder a classification head sits on: `"target_encoder"` or `"context_encoder"`, the
    name the JEPA model's checkpoint keeps that encoder's weights under (so a JEPA folder's weights load into it
    as they are). Read from `config.classifier_encoder` (`"target"` or `"context"`); unset, it is the EMA target
    encoder where the model has one, and the choice is written back to the config so a saved classifier rebuilds the
    same module. Raises `ValueError` naming the field for another value, or for `"target"` without a target encoder."""
    name = type(config).__name__
    choice = getattr(config, "classifier_encoder", None)
    if choice is None:
        choice = "target" if has_target_encoder else "context"
    if choice not in ("target", "context"):
        raise ValueError(
            f"{name}.classifier_encoder must be 'target' (the EMA target encoder) or 'context' (the online encoder), "
            f"got {choice!r}"
        )
    if choice == "target" and not has_target_encoder:
        raise ValueError(
            f"{name}.classifier_encoder='target' needs an EMA target encoder, and this configuration trains without "
            "one: use 'context'"
        )
    config.classifier_encoder = choice
    return f"{choice}_encoder"


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.forget_pretraining_declarations
def forget_pretraining_declarations(config) -> None:
    """Drop what a JEPA model's config declares for the JEPA model itself (and a classifier cannot serve): its
    `custom_pipelines` (the family's own tasks call the predictor) and the `AutoModel` entry of `auto_map` (that
    class cannot load a classifier's weights). The classifier declares its own Auto class when it is saved."""
    if "custom_pipelines" in vars(config):
        del config.custom_pipelines
    auto_map = getattr(config, "auto_map", None)
    if auto_map and "AutoModel" in auto_map:
        config.auto_map = {key: value for key, value in auto_map.items() if key != "AutoModel"}


class EpmJepaForImageClassification(EpmJepaPreTrainedModel):
    """
    An EPM-JEPA frame encoder with a linear classification head on its latent: transformers'
    `pipeline("image-classification")` runs it on single frames and `transformers.Trainer` fine-tunes it.
    `EpmJepaForImageClassification.from_pretrained(world_model_folder, num_labels=..., id2label=...)` loads the
    encoder from a trained EPM-JEPA folder (any track) and initialises only the head.

    The head sits on one encoder, `config.classifier_encoder`: `"target"`, the EMA target encoder (the default: the
    space the world model's predictions are scored in), or `"context"`, the online encoder (the latent
    `pipeline("image-feature-extraction")` returns). The encoder keeps its checkpoint name (`target_encoder.*` or
    `context_encoder.*`), so a world model's weights load into it unchanged; the predictor, the surprisal gate and the
    experience memory are left out. The head reads the encoder's latent `(batch, latent_dim)`; with
    `config.num_labels == 0` the model returns that latent as its logits.

    The loss follows transformers' `config.problem_type`: cross-entropy for integer labels, mean squared error for
    `num_labels == 1` (regression), binary cross-entropy for float multi-hot labels (`"multi_label_classification"`).
    """

    input_modalities = ("image",)
    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = ""
    # The JEPA model whose folders the classifier starts from (what it may leave out of their checkpoints).
    _pretraining_model_class = EpmJepaModel

    def __init__(self, config: EpmJepaConfig, classifier_encoder: str | None = None):
        super().__init__(config)
        config.validate()
        if classifier_encoder is not None:
            config.classifier_encoder = classifier_encoder
        self.encoder_attribute = classifier_encoder_attribute(config, True)
        setattr(self, self.encoder_attribute, EpmJepaFrameEncoder(config))
        self.num_labels = config.num_labels
        self.classifier = nn.Linear(config.latent_dim, config.num_labels) if config.num_labels > 0 else nn.Identity()
        self._encoder_frozen = False
        forget_pretraining_declarations(config)
        self.post_init()

    def _check_pixel_values(self, pixel_values) -> torch.Tensor:
        """Checked frames: a non-empty floating tensor `(batch, C, H, W)` of finite values in the world model's
        scale ([0, 1], `EpmJepaImageProcessor`), cast to the model's dtype."""
        config = self.config
        expected = (config.num_channels, config.image_size, config.image_size)
        shape_text = f"(batch, {', '.join(map(str, expected))})"
        if not isinstance(pixel_values, torch.Tensor) or not pixel_values.is_floating_point():
            raise TypeError(
                f"pixel_values must be a floating-point tensor {shape_text} with values in [0, 1] "
                "(EpmJepaImageProcessor)"
            )
        if pixel_values.ndim != 4 or tuple(pixel_values.shape[1:]) != expected:
            raise ValueError(
                f"pixel_values must have shape {shape_text} (single frames), got {tuple(pixel_values.shape)}"
            )
        if pixel_values.shape[0] == 0:
            raise ValueError("pixel_values is empty (batch size 0): pass at least one frame")
        return _finite_pixels(pixel_values, "pixel_values", self.encoder.projection.weight.dtype)

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaForImageClassification.encoder
    @property
    def encoder(self) -> nn.Module:
        """The encoder the head sits on (`config.classifier_encoder`)."""
        return getattr(self, self.encoder_attribute)

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaForImageClassification.freeze_encoder
    def freeze_encoder(self, frozen: bool = True):
        """Train the head alone (`frozen=True`: a linear probe trained by gradient descent) or everything again
        (`False`). A frozen encoder stays in eval mode under `train()` too, so normalisation layers keep their
        pretrained statistics. Call it after `from_pretrained` (loading marks every weight trainable). Returns the
        model."""
        self._encoder_frozen = frozen
        self.encoder.requires_grad_(not frozen)
        return self.train(self.training)

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaForImageClassification.train
    def train(self, mode: bool = True):
        super().train(mode)
        if self._encoder_frozen:
            self.encoder.eval()
        return self

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaForImageClassification._reset_head
    @torch.no_grad()
    def _reset_head(self):
        """Initialise the head afresh, as construction does: a JEPA model's own module of that name (e.g. BRo-JEPA's
        supervised baseline's op-conditioned head) is not this head, even where its shape fits."""
        for parameter in self.classifier.parameters():
            parameter._is_hf_initialized = False
        self._init_weights(self.classifier)

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaForImageClassification.from_pretrained
    @classmethod
    def from_pretrained(cls, *args, strict: bool = True, **kwargs):
        """`PreTrainedModel.from_pretrained` from a saved classifier or from the family's JEPA model folder, strict
        by default. From a JEPA model's folder (its config names another architecture) the head starts fresh and the
        JEPA model's other weights are left out on purpose: only the encoder the head sits on is read. Anything else
        missing, left unused or of another shape raises `ValueError` (`strict=False` only warns); a folder or repo of
        another model type raises `ValueError` naming both types."""
        output_loading_info = kwargs.pop("output_loading_info", False)
        config_dict = source_config_dict(cls, args[0] if args else kwargs.get("pretrained_model_name_or_path"), kwargs)
        if config_dict is None:
            architectures = getattr(kwargs.get("config"), "architectures", None)
        else:
            architectures = config_dict.get("architectures")
        from_pretraining_model = cls.__name__ not in (architectures or [])
        if from_pretraining_model:  # a head of another shape under the same name is replaced, not an error
            kwargs.setdefault("ignore_mismatched_sizes", True)
        # From a JEPA folder transformers' load report lists the pre-training modules as UNEXPECTED and the head as
        # MISSING, both intended; the check below names whatever else does not fit (an error, or a warning).
        # (A filter on that one record: raising the logger's level would make transformers log its TP-plan check.)
        load_logger = logging.getLogger("transformers.modeling_utils")

        def without_load_report(record):
            return not (from_pretraining_model and "LOAD REPORT" in record.getMessage())

        load_logger.addFilter(without_load_report)
        try:
            model, loading_info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
            copy_into_aligned_memory(model)
        finally:
            load_logger.removeFilter(without_load_report)

        def key(entry):  # mismatched keys come as (key, shape in the checkpoint, shape in the model)
            return entry[0] if isinstance(entry, tuple) else entry

        problems = {k: list(loading_info.get(k) or ()) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
        if from_pretraining_model:
            head = {name for name in model.state_dict() if name.startswith("classifier.")}
            with torch.device("meta"):
                pretraining_keys = set(cls._pretraining_model_class(model.config).state_dict())
            if head & pretraining_keys:
                model._reset_head()
            problems["missing_keys"] = [k for k in problems["missing_keys"] if key(k) not in head]
            problems["mismatched_keys"] = [k for k in problems["mismatched_keys"] if key(k) not in head]
            problems["unexpected_keys"] = [k for k in problems["unexpected_keys"] if key(k) not in pretraining_keys]
        problems = {k: sorted(str(key(x)) for x in v) for k, v in problems.items()}
        if any(problems.values()):
            message = (
                f"{cls.__name__}.from_pretrained: the checkpoint does not match the config (missing keys: "
                f"{problems['missing_keys'][:8]}, unexpected keys: {problems['unexpected_keys'][:8]}, mismatched "
                f"keys: {problems['mismatched_keys'][:8]}). {cls._strict_loading_hint}"
            )
            if strict:
                raise ValueError(message + "Pass strict=False to load anyway.")
            logging.getLogger(cls.__module__).warning(message + "Loaded anyway (strict=False).")
        return (model, loading_info) if output_loading_info else model

    def forward(
        self,
        pixel_values: torch.Tensor,
        labels: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ImageClassifierOutput | tuple:
        r"""
        pixel_values (`torch.FloatTensor` of shape `(batch, num_channels, image_size, image_size)`):
            Single frames with values in [0, 1] (`EpmJepaImageProcessor`).
        labels (`torch.LongTensor` of shape `(batch,)`, or float `(batch, num_labels)`, *optional*):
            Class indices (cross-entropy), targets for `num_labels == 1` (regression) or multi-hot float labels
            (`problem_type="multi_label_classification"`); with them the output holds the loss. Other keyword
            arguments reach transformers' loss (`num_items_in_batch`, which `Trainer` passes).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        logits = self.classifier(self.encoder(self._check_pixel_values(pixel_values)))
        loss = None if labels is None else self.loss_function(labels, logits, self.config, **kwargs)
        output = ImageClassifierOutput(loss=loss, logits=logits)
        return output if return_dict else output.to_tuple()


__all__ = ["EpmJepaForImageClassification", "EpmJepaModel", "EpmJepaOutput", "EpmJepaPreTrainedModel"]
