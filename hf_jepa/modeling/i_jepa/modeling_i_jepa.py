"""I-JEPA (Assran et al., 2023, facebookresearch/ijepa) as a transformers model: ViT context encoder, EMA target
encoder, narrow predictor and the latent regression loss.

transformers ships its own `IJepaModel` (`model_type="ijepa"`): an encoder only, for inference with the released
checkpoints. This model (`model_type="i_jepa"`) adds what pre-training needs: the predictor, the EMA target encoder
(frozen, always in eval mode; the trainer updates it through `ema_pairs()`) and the loss.

Encoder (context and target are two copies): transformers' `ViTPatchEmbeddings` (a stride-`patch` convolution),
plus FIXED 2-D sin-cos position embeddings (I-JEPA's `pos_embed`, never trained; a non-persistent buffer recomputed in
`_init_weights`), then transformers' `ViTLayer` blocks and a final LayerNorm. There is no CLS token (I-JEPA has none):
`ViTModel`'s embeddings always prepend one and add learned position embeddings, so they are not used; only the patch
embedding, the layers and the norm are reused. The context encoder embeds every patch, then keeps the context
patches only (gather by index) before the first layer: target patches, and patches outside the context block, never
reach attention.

Patch indices are row-major over the `grid x grid` patch grid: patch `(row, col)` has index `row * grid + col`.

Predictor (I-JEPA's `VisionTransformerPredictor`): linear to a narrower width, plus fixed 2-D sin-cos position
embeddings at the context positions; ONE learned mask token plus the sin-cos embedding of each target position; for
each target block separately, transformer blocks over `[context tokens; that block's mask tokens]` (batched by
repeating the context once per block, block-major, as the reference's `repeat_interleave_batch` does); a final norm;
the mask-token outputs only; a linear layer back to the encoder width.

Loss: `F.layer_norm(target_encoder(all patches), (D,))` gathered at each target block; smooth L1 (the reference code)
or MSE per block, averaged over blocks (equal to the reference's mean over all blocks since blocks have equal sizes).

This file imports only torch and transformers so that `trust_remote_code` export works.
"""

import copy
import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPooling, ImageClassifierOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.vit.modeling_vit import ViTLayer, ViTPatchEmbeddings
from transformers.utils import ModelOutput

from .configuration_i_jepa import IJepaConfig


@dataclass
class IJepaOutput(ModelOutput):
    """
    Output of [`IJepaModel`].

    Args:
        loss: the regression loss, averaged over target blocks.
        predictions: `(batch, num_blocks, num_target_patches, hidden)` predicted target representations.
        targets: the matching `(batch, num_blocks, num_target_patches, hidden)` target encoder representations
            (layer-normalised when `config.normalize_targets`), detached.
        last_hidden_state: `(batch, num_context_patches, hidden)` context encoder output on the context patches.
        block_losses: `(num_blocks,)` the loss of each target block (detached).
    """

    loss: torch.FloatTensor | None = None
    predictions: torch.FloatTensor | None = None
    targets: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    block_losses: torch.FloatTensor | None = None


def sincos_2d_position_embeddings(dim: int, grid_size: int, device=None) -> torch.Tensor:
    """I-JEPA's (MAE's) fixed 2-D sin-cos table, `(grid_size**2, dim)` float32, rows in row-major patch order.

    As the reference `get_2d_sincos_pos_embed` (numpy `meshgrid(grid_w, grid_h)`): the first `dim/2` features encode
    the patch's COLUMN, the last `dim/2` its ROW; each half is `[sin(p * w_k), cos(p * w_k)]` with
    `w_k = 1 / 10000**(k / (dim/4))`, `k = 0 .. dim/4 - 1`. Computed in float64, as the reference does."""
    if dim % 4:
        raise ValueError(f"2-D sin-cos position embeddings need a width divisible by 4, got {dim}")
    quarter = dim // 4
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64, device=device) / quarter)
    coords = torch.arange(grid_size, dtype=torch.float64, device=device)
    rows, cols = torch.meshgrid(coords, coords, indexing="ij")

    def one_d(positions):
        angles = positions.reshape(-1, 1) * omega[None]
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)

    return torch.cat([one_d(cols), one_d(rows)], dim=1).float()


def interpolate_position_table(table: torch.Tensor, grid_size: int, height: int, width: int) -> torch.Tensor:
    """A `(grid_size**2, D)` row-major position table resampled to a `height x width` patch grid, `(height * width,
    D)`: bicubic on the 2-D grid (`align_corners=False`), computed in float32 and returned in the table's dtype, as
    transformers' `IJepaEmbeddings.interpolate_pos_encoding` does (it too returns the table unchanged for the same
    square grid). Used at forward for other input sizes and by `hf-jepa convert --image-size`."""
    if height == width == grid_size:
        return table
    if height <= 0 or width <= 0:
        raise ValueError(f"a position table needs a grid of at least 1 x 1 patches, got {height} x {width}")
    dim = table.shape[-1]
    grid = table.float().reshape(1, grid_size, grid_size, dim).permute(0, 3, 1, 2)
    resized = F.interpolate(grid, size=(height, width), mode="bicubic", align_corners=False)
    return resized.permute(0, 2, 3, 1).reshape(height * width, dim).to(table.dtype)


def gather_patches(hidden: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """`hidden[b, indices[b, ...]]`: `(B, N, D)` and integer `(B, *shape)` -> `(B, *shape, D)`."""
    batch, dim = hidden.shape[0], hidden.shape[-1]
    flat = indices.reshape(batch, -1)
    gathered = torch.gather(hidden, 1, flat[..., None].expand(-1, -1, dim))
    return gathered.reshape(*indices.shape, dim)


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


# --------------------------------------------------------------------------------------------------------- encoder


class IJepaEncoder(nn.Module):
    """ViT without a CLS token: patch embedding + fixed positions (sin-cos, or a saved table with
    `position_embedding_type="stored"`), an optional gather of the kept patches, transformers' `ViTLayer` blocks and a
    final LayerNorm."""

    def __init__(self, config: IJepaConfig):
        super().__init__()
        backbone = config.backbone_config
        self.grid_size = config.grid_size
        self.patch_size = backbone.patch_size
        self.patch_embeddings = ViTPatchEmbeddings(backbone)
        # A buffer either way (never trained); saved with the weights only when it is not the recomputable sin-cos.
        self.register_buffer(
            "position_embeddings",
            sincos_2d_position_embeddings(backbone.hidden_size, self.grid_size),
            persistent=config.position_embedding_type == "stored",
        )
        self.layers = nn.ModuleList([ViTLayer(backbone) for _ in range(backbone.num_hidden_layers)])
        self.layernorm = nn.LayerNorm(backbone.hidden_size, eps=backbone.layer_norm_eps)

    def forward(
        self,
        pixel_values: torch.Tensor,
        patch_indices: torch.Tensor | None = None,
        interpolate_pos_encoding: bool = False,
    ) -> torch.Tensor:
        """`(B, C, H, W)` -> `(B, N, D)` over all patches, or `(B, K, D)` over `patch_indices` `(B, K)` only. With
        `interpolate_pos_encoding`, an input of another size gets the position table resampled to its patch grid
        (`interpolate_position_table`)."""
        weight = self.patch_embeddings.projection.weight
        hidden = self.patch_embeddings(pixel_values.to(weight.dtype))
        positions = self.position_embeddings
        if interpolate_pos_encoding:
            height, width = pixel_values.shape[-2] // self.patch_size, pixel_values.shape[-1] // self.patch_size
            positions = interpolate_position_table(positions, self.grid_size, height, width)
        hidden = hidden + positions.to(hidden.dtype)[None]
        if patch_indices is not None:
            hidden = gather_patches(hidden, patch_indices)
        for layer in self.layers:
            hidden = layer(hidden, None)
        return self.layernorm(hidden)


# ------------------------------------------------------------------------------------------------------- predictor


# Copied from hf_jepa.modeling.jepa_reasoner.modeling_jepa_reasoner_blocks.eager_attention_forward
def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
):
    """Attention written out (`attn_implementation="eager"`), with the signature of transformers' attention interface:
    `softmax(query key^T * scaling + attention_mask) value`, the softmax in fp32. `query`, `key`, `value`: `(B, heads,
    q|k, head_dim)`; `attention_mask`: additive float `(B, 1 | heads, q, k)` (0 where a query may attend, the dtype's
    minimum elsewhere) or None; dropout on the attention weights in training mode only. Returns the output `(B, q,
    heads, head_dim)` and the weights `(B, heads, q, k)`."""
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


# Copied from hf_jepa.modeling.jepa_reasoner.modeling_jepa_reasoner_blocks.attend
def attend(module: nn.Module, query, key, value, attention_mask, **kwargs):
    """`module`'s attention through transformers' attention interface (`module.config._attn_implementation`),
    `(B, heads, q|k, head_dim)` inputs -> `(output (B, q, heads, head_dim), weights or None)`.

    One exception, for speed: an SDPA call that autograd records, in bf16 on CPU, with fewer than 256 keys runs in
    fp32. PyTorch's CPU flash-attention backward is slower in bf16 than in fp32 at these lengths, and bf16 only wins
    from 256 keys with 64-dim heads (`benchmarks/report.py`, section 6, measures it: there the training steps' bf16
    attention backward took most of their time). Autograd records the casts (gradients reach the bf16 inputs) and
    the output comes back in the query's dtype; inference, GPUs and fp32 are untouched."""
    implementation = module.config._attn_implementation
    attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
    in_float32 = (
        implementation == "sdpa"
        and query.device.type == "cpu"
        and query.dtype == torch.bfloat16
        and torch.is_grad_enabled()
        and key.shape[-2] < 256
    )
    if not in_float32:
        return attention_interface(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    with torch.autocast("cpu", enabled=False):
        output, weights = attention_interface(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return output.to(query.dtype), weights


class IJepaPredictorBlock(GradientCheckpointingLayer):
    """Pre-norm transformer block (I-JEPA's `Block`: qkv with bias, exact GELU MLP), full attention (no mask) through
    transformers' attention interface (`config._attn_implementation`: "sdpa", "eager" or flash attention)."""

    def __init__(self, config: IJepaConfig):
        super().__init__()
        self.config = config
        width, self.num_heads = config.predictor_hidden_size, config.predictor_num_heads
        self.scaling = (width // self.num_heads) ** -0.5
        self.is_causal = False
        eps = config.predictor_eps
        self.norm1 = nn.LayerNorm(width, eps=eps)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width, eps=eps)
        hidden = int(width * config.predictor_mlp_ratio)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, length, width = hidden.shape
        q, k, v = self.qkv(self.norm1(hidden)).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        attended, _ = attend(self, q, k, v, None, dropout=0.0, scaling=self.scaling, is_causal=False)
        hidden = hidden + self.proj(attended.reshape(batch, length, width))
        return hidden + self.fc2(F.gelu(self.fc1(self.norm2(hidden))))


class IJepaPredictor(nn.Module):
    """Context states + a mask token at each target position -> predicted target representations, one pass per
    target block (all blocks batched together)."""

    def __init__(self, config: IJepaConfig):
        super().__init__()
        width = config.predictor_hidden_size
        self.grid_size = config.grid_size
        self.embed = nn.Linear(config.hidden_size, width)
        self.mask_token = nn.Parameter(torch.empty(width))
        self.register_buffer(
            "position_embeddings",
            sincos_2d_position_embeddings(width, self.grid_size),
            persistent=config.position_embedding_type == "stored",
        )
        self.blocks = nn.ModuleList([IJepaPredictorBlock(config) for _ in range(config.predictor_num_layers)])
        self.norm = nn.LayerNorm(width, eps=config.predictor_eps)
        self.output = nn.Linear(width, config.hidden_size)

    def forward(
        self, context_states: torch.Tensor, context_indices: torch.Tensor, target_indices: torch.Tensor
    ) -> torch.Tensor:
        """`(B, n_ctx, D)` context states at `context_indices` `(B, n_ctx)`; `target_indices` `(B, M, n_tgt)` ->
        `(B, M, n_tgt, D)` predictions."""
        batch, num_context = context_indices.shape
        num_blocks, num_targets = target_indices.shape[1:]
        hidden = self.embed(context_states)
        positions = self.position_embeddings.to(hidden.dtype)
        hidden = hidden + positions[context_indices]
        # Block-major batch: rows [k * B, (k + 1) * B) hold target block k (the reference's repeat_interleave_batch).
        hidden = hidden.repeat(num_blocks, 1, 1)
        block_indices = target_indices.transpose(0, 1).reshape(num_blocks * batch, num_targets)
        mask_tokens = self.mask_token.to(hidden.dtype) + positions[block_indices]
        hidden = torch.cat([hidden, mask_tokens], dim=1)
        for block in self.blocks:
            hidden = block(hidden)
        predicted = self.output(self.norm(hidden[:, num_context:]))
        return predicted.view(num_blocks, batch, num_targets, -1).transpose(0, 1)


# -------------------------------------------------------------------------------------------------------- model


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


class IJepaPreTrainedModel(PreTrainedModel):
    config: IJepaConfig
    config_class = IJepaConfig
    base_model_prefix = "i_jepa"
    main_input_name = "pixel_values"
    input_modalities = ("image",)
    supports_gradient_checkpointing = True
    _no_split_modules = ["ViTLayer", "IJepaPredictorBlock"]
    # The ViT encoders and the predictor (full attention, no mask) all go through transformers' attention interface.
    _supports_sdpa = True
    _supports_flash_attn = True

    def _init_weights(self, module):
        """Weights (and biases) by `config.init_scheme`, unit LayerNorms, truncated-normal mask token (std
        `initializer_range`); then each block's output projections (attention output, second MLP layer) divided by
        `sqrt(2 * layer_id)` (the reference's `fix_init_weight`; children are initialised before their parent, so the
        rescale sees the fresh weights). The fixed sin-cos tables are non-persistent buffers, recomputed here so that
        they are right after `from_pretrained` too; stored tables (`position_embedding_type="stored"`) start as the
        sin-cos table and are left alone once loaded (transformers' `init` functions skip loaded tensors).

        `"trunc_normal"` (I-JEPA's reference): truncated normal, std `initializer_range` (0.02), zero biases.
        `"xavier_uniform"` (MAE's): Xavier-uniform, zero biases. `"pytorch_default"` (`nn.Linear`'s own
        `reset_parameters`): weights and biases U(+-1 / sqrt(fan_in)). Convolutions count as the linear layer
        `(hidden, C * p * p)`. Std 0.02 suits ViT-H (width 1280) but leaves a 128-wide ViT with 4 x 4 patches
        position-only (pre-training collapses); Xavier's fan-average scale (the separate 128 x 128 q/k/v and the
        MLP's down-projection start 1.7-2.2x above fan-in scale) trains to easy targets and falling rank; the fan-in
        scale trains healthily (the small presets use it; research/i_jepa/health/README.md)."""
        std = self.config.initializer_range
        scheme = self.config.init_scheme
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            weight = module.weight.view(module.weight.shape[0], -1)  # conv as the linear layer (out, C * p * p)
            if scheme == "pytorch_default":
                bound = 1.0 / math.sqrt(weight.shape[1])
                init.kaiming_uniform_(weight, a=math.sqrt(5))  # U(+-1 / sqrt(fan_in)), nn.Linear's reset_parameters
                if module.bias is not None:
                    init.uniform_(module.bias, -bound, bound)
            else:
                if scheme == "xavier_uniform":
                    init.xavier_uniform_(weight)
                else:
                    init.trunc_normal_(module.weight, std=std)
                if module.bias is not None:
                    init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, IJepaEncoder):
            table = sincos_2d_position_embeddings(module.position_embeddings.shape[-1], module.grid_size)
            init.copy_(module.position_embeddings, table.to(module.position_embeddings.device))
            for layer_id, layer in enumerate(module.layers, start=1):
                for weight in (layer.attention.o_proj.weight, layer.mlp.fc2.weight):
                    init.copy_(weight, weight / math.sqrt(2.0 * layer_id))
        elif isinstance(module, IJepaPredictor):
            init.trunc_normal_(module.mask_token, std=std)
            table = sincos_2d_position_embeddings(module.position_embeddings.shape[-1], module.grid_size)
            init.copy_(module.position_embeddings, table.to(module.position_embeddings.device))
            for layer_id, block in enumerate(module.blocks, start=1):
                for weight in (block.proj.weight, block.fc2.weight):
                    init.copy_(weight, weight / math.sqrt(2.0 * layer_id))


class IJepaModel(IJepaPreTrainedModel):
    """
    I-JEPA pre-training model: a ViT context encoder run on the context patches only, an EMA target encoder (a copy,
    frozen, always in eval mode) run on all patches, and the predictor; `forward` returns the loss.

    Unlike transformers' encoder-only `IJepaModel` (`model_type="ijepa"`), this one (`model_type="i_jepa"`) adds the
    predictor, the EMA target encoder and the loss. Evaluate with `embed()`: the target encoder, average-pooled over
    all patches (I-JEPA has no CLS token).
    """

    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = ""

    def __init__(self, config: IJepaConfig):
        super().__init__(config)
        config.validate()
        # The encoders are transformers' ViTLayer blocks without a ViT PreTrainedModel around them: hand the resolved
        # attention implementation (sdpa by default) to the backbone sub-config they read it from.
        if config.backbone_config._attn_implementation is None:
            config.backbone_config._attn_implementation_internal = config._attn_implementation
        self.context_encoder = IJepaEncoder(config)
        self.target_encoder = copy.deepcopy(self.context_encoder)
        self.predictor = IJepaPredictor(config)
        self.post_init()
        if self.context_encoder.layernorm.weight.device.type != "meta":
            self.copy_online_to_targets()
        self.freeze_targets()

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

    # ------------------------------------------------------------------ input checks

    def get_input_embeddings(self) -> nn.Module:
        """The context encoder's patch embedding (as transformers' ViT models return theirs)."""
        return self.context_encoder.patch_embeddings

    def _check_pixel_values(self, pixel_values, interpolate_pos_encoding: bool = False) -> torch.Tensor:
        """Checked `pixel_values`: a non-empty floating tensor `(batch, C, H, W)` of finite values, cast to the
        model's dtype (float64 / float16 / bfloat16 input is accepted). `H x W` must be the config's image size, or,
        with `interpolate_pos_encoding`, any size of at least one patch per side."""
        config = self.config
        expected = (config.num_channels, config.image_size, config.image_size)
        shape_ok = isinstance(pixel_values, torch.Tensor) and pixel_values.ndim == 4
        if shape_ok and interpolate_pos_encoding:
            shape_ok = pixel_values.shape[1] == config.num_channels and min(pixel_values.shape[2:]) >= config.patch_size
        elif shape_ok:
            shape_ok = tuple(pixel_values.shape[1:]) == expected
        if not shape_ok or not pixel_values.is_floating_point():
            if interpolate_pos_encoding:
                expected = (config.num_channels, f"H >= {config.patch_size}", f"W >= {config.patch_size}")
            got = tuple(pixel_values.shape) if isinstance(pixel_values, torch.Tensor) else type(pixel_values).__name__
            dtype = f" {pixel_values.dtype}" if isinstance(pixel_values, torch.Tensor) else ""
            raise ValueError(
                f"pixel_values must be a float tensor of shape (batch, C, H, W) = (batch, {expected[0]}, "
                f"{expected[1]}, {expected[2]}), normalised with mean {config.pixel_mean} and std {config.pixel_std}; "
                f"got{dtype} {got}"
            )
        if pixel_values.shape[0] == 0:
            raise ValueError("pixel_values is empty: the batch needs at least one image")
        dtype = self.get_input_embeddings().projection.weight.dtype  # the model's, whichever encoder it holds
        return _finite_pixels(pixel_values, "pixel_values", dtype)

    def _check_indices(self, indices, name, ndim, batch):
        num_patches = self.config.num_patches
        layout = "(batch, num_context_patches)" if ndim == 2 else "(batch, num_blocks, num_target_patches)"
        if indices is None:
            raise ValueError(f"{name} is required: an integer tensor {layout} of row-major patch indices")
        if not isinstance(indices, torch.Tensor) or indices.is_floating_point() or indices.dtype == torch.bool:
            raise ValueError(
                f"{name} must be an integer tensor {layout} of row-major patch indices, got "
                f"{getattr(indices, 'dtype', type(indices).__name__)}"
            )
        if indices.ndim != ndim or indices.shape[0] != batch:
            hint = " (one target block: target_indices.unsqueeze(1))" if ndim == 3 and indices.ndim == 2 else ""
            raise ValueError(f"{name} must have shape {layout} with batch {batch}, got {tuple(indices.shape)}{hint}")
        if any(size == 0 for size in indices.shape[1:]):
            what = "context patch" if ndim == 2 else "target block with at least one patch"
            raise ValueError(f"{name} is empty (shape {tuple(indices.shape)}): every image needs at least one {what}")
        if indices.min() < 0 or indices.max() >= num_patches:
            raise ValueError(
                f"{name} holds patch indices in [{int(indices.min())}, {int(indices.max())}], outside [0, "
                f"{num_patches}) for a {self.config.grid_size} x {self.config.grid_size} patch grid"
            )
        ordered = indices.sort(dim=-1).values
        if (ordered[..., 1:] == ordered[..., :-1]).any():
            where = "a row" if ndim == 2 else "a target block"
            raise ValueError(f"{name} repeats a patch index within {where}")
        return indices.long()

    def _check_inputs(self, pixel_values, context_indices, target_indices):
        pixel_values = self._check_pixel_values(pixel_values)
        batch = pixel_values.shape[0]
        context_indices = self._check_indices(context_indices, "context_indices", 2, batch)
        target_indices = self._check_indices(target_indices, "target_indices", 3, batch)
        in_context = torch.zeros(batch, self.config.num_patches, dtype=torch.bool, device=context_indices.device)
        in_context.scatter_(1, context_indices, True)
        overlap = torch.gather(in_context, 1, target_indices.reshape(batch, -1).to(in_context.device))
        if overlap.any():
            rows = torch.nonzero(overlap.any(1)).flatten().tolist()
            raise ValueError(
                f"context_indices and target_indices overlap in rows {rows[:8]}: I-JEPA removes the target blocks "
                "from the context block, so a target patch may not also be a context patch"
            )
        return pixel_values, context_indices, target_indices

    # ------------------------------------------------------------------ building blocks

    def encode(
        self, pixel_values: torch.Tensor, use_target_encoder: bool = False, interpolate_pos_encoding: bool = False
    ) -> torch.Tensor:
        """`(B, num_patches, hidden)` last-layer states over all patches of the context encoder, or of the EMA target
        encoder. `interpolate_pos_encoding=True` accepts another image size: the position table is resampled
        (bicubic) to its patch grid, and `num_patches` is that grid's."""
        pixel_values = self._check_pixel_values(pixel_values, interpolate_pos_encoding)
        encoder = self.target_encoder if use_target_encoder else self.context_encoder
        with torch.set_grad_enabled(torch.is_grad_enabled() and encoder is self.context_encoder):
            return encoder(pixel_values, interpolate_pos_encoding=interpolate_pos_encoding)

    def embed(
        self, pixel_values: torch.Tensor, use_target_encoder: bool = True, interpolate_pos_encoding: bool = False
    ) -> torch.Tensor:
        """`(B, hidden)` image embeddings, average-pooled over all patches; from the EMA target encoder by default
        (I-JEPA evaluates with the target encoder, average-pooled, no CLS token). `interpolate_pos_encoding`: as
        `encode`."""
        return self.encode(pixel_values, use_target_encoder, interpolate_pos_encoding).mean(dim=1)

    def target_representations(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """`(B, num_patches, hidden)` target encoder states of the full image, layer-normalised (no affine) when
        `config.normalize_targets`; no gradient."""
        with torch.no_grad():
            hidden = self.target_encoder(pixel_values)
            return F.layer_norm(hidden, hidden.shape[-1:]) if self.config.normalize_targets else hidden

    def forward(
        self,
        pixel_values: torch.Tensor,
        context_indices: torch.Tensor | None = None,
        target_indices: torch.Tensor | None = None,
        return_dict: bool | None = None,
        interpolate_pos_encoding: bool | None = None,
        **kwargs,
    ) -> IJepaOutput | BaseModelOutputWithPooling | tuple:
        r"""
        Without `context_indices` and `target_indices` the model acts as an encoder, as
        `pipeline("image-feature-extraction")` calls it: a `BaseModelOutputWithPooling` with the context encoder's
        states over all patches `(batch, num_patches, hidden)` and their average `(batch, hidden)`; no loss.

        pixel_values (`torch.FloatTensor` of shape `(batch, num_channels, image_size, image_size)`): normalised images
            (any floating dtype, cast to the model's dtype; NaN or inf values raise `ValueError`).
        context_indices (`torch.LongTensor` of shape `(batch, num_context_patches)`): row-major patch indices
            (`row * grid + col`) of each image's context patches, distinct within a row. Every image of a batch keeps
            the same number (I-JEPA's collator truncates to the batch minimum).
        target_indices (`torch.LongTensor` of shape `(batch, num_blocks, num_target_patches)`): row-major patch
            indices of each target block, distinct within a block; blocks may overlap each other but not the
            context. Equal counts across the batch and the blocks (I-JEPA's collator truncates to the minimum).
        interpolate_pos_encoding (`bool`, *optional*): encoder use only: accept images of another size, with the
            position table resampled (bicubic) to their patch grid, as transformers' `IJepaModel` does.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if context_indices is None and target_indices is None:  # encoder use (feature extraction)
            hidden = self.encode(pixel_values, interpolate_pos_encoding=bool(interpolate_pos_encoding))
            output = BaseModelOutputWithPooling(last_hidden_state=hidden, pooler_output=hidden.mean(dim=1))
            return output if return_dict else output.to_tuple()
        if context_indices is None or target_indices is None:
            missing = "context_indices" if context_indices is None else "target_indices"
            raise ValueError(
                f"{missing} is missing: pass both context_indices and target_indices (training), or neither (encoder)"
            )
        if interpolate_pos_encoding:
            raise ValueError(
                "interpolate_pos_encoding is for encoder use only (no context_indices / target_indices): training "
                "masks index the config's patch grid, so train at config.image_size"
            )
        pixel_values, context_indices, target_indices = self._check_inputs(
            pixel_values, context_indices, target_indices
        )
        context = self.context_encoder(pixel_values, context_indices)
        predictions = self.predictor(context, context_indices, target_indices)
        targets = gather_patches(self.target_representations(pixel_values), target_indices)
        if self.config.loss_type == "mse":
            per_element = F.mse_loss(predictions.float(), targets.float(), reduction="none")
        else:
            per_element = F.smooth_l1_loss(predictions.float(), targets.float(), reduction="none")
        block_losses = per_element.mean(dim=(0, 2, 3))
        output = IJepaOutput(
            loss=block_losses.mean(),
            predictions=predictions,
            targets=targets,
            last_hidden_state=context,
            block_losses=block_losses.detach(),
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


class IJepaForImageClassification(IJepaPreTrainedModel):
    """
    An I-JEPA ViT encoder with a linear head on its average-pooled patch states (I-JEPA's evaluation protocol, and
    transformers' `IJepaForImageClassification`): transformers' `pipeline("image-classification")` runs it and
    `transformers.Trainer` fine-tunes it. `IJepaForImageClassification.from_pretrained(i_jepa_folder, num_labels=...,
    id2label=...)` loads the encoder from a trained or converted I-JEPA folder and initialises only the head.

    The head sits on one encoder, `config.classifier_encoder`: `"target"`, the EMA target encoder (the default; the
    one I-JEPA evaluates and Meta releases), or `"context"`, the online encoder. The encoder keeps its checkpoint name
    (`target_encoder.*` or `context_encoder.*`), so an I-JEPA folder's weights load into it unchanged; the predictor
    and the other encoder are left out. With `config.num_labels == 0` the model returns the pooled `(batch, hidden)`
    vector as its logits.

    The loss follows transformers' `config.problem_type`: cross-entropy for integer labels, mean squared error for
    `num_labels == 1` (regression), binary cross-entropy for float multi-hot labels (`"multi_label_classification"`).
    """

    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = ""
    # The JEPA model whose folders the classifier starts from (what it may leave out of their checkpoints).
    _pretraining_model_class = IJepaModel

    def __init__(self, config: IJepaConfig, classifier_encoder: str | None = None):
        super().__init__(config)
        config.validate()
        if classifier_encoder is not None:
            config.classifier_encoder = classifier_encoder
        self.encoder_attribute = classifier_encoder_attribute(config, True)
        setattr(self, self.encoder_attribute, IJepaEncoder(config))
        self.num_labels = config.num_labels
        self.classifier = nn.Linear(config.hidden_size, config.num_labels) if config.num_labels > 0 else nn.Identity()
        self._encoder_frozen = False
        forget_pretraining_declarations(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        """The patch embedding of the encoder the head sits on."""
        return self.encoder.patch_embeddings

    _check_pixel_values = IJepaModel._check_pixel_values  # the same checks and messages

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
        interpolate_pos_encoding: bool | None = None,
        **kwargs,
    ) -> ImageClassifierOutput | tuple:
        r"""
        pixel_values (`torch.FloatTensor` of shape `(batch, num_channels, image_size, image_size)`):
            Normalised images (`IJepaImageProcessor`); checked as `IJepaModel` checks them.
        labels (`torch.LongTensor` of shape `(batch,)`, or float `(batch, num_labels)`, *optional*):
            Class indices (cross-entropy), targets for `num_labels == 1` (regression) or multi-hot float labels
            (`problem_type="multi_label_classification"`); with them the output holds the loss. Other keyword
            arguments reach transformers' loss (`num_items_in_batch`, which `Trainer` passes).
        interpolate_pos_encoding (`bool`, *optional*): accept images of another size, with the position table
            resampled (bicubic) to their patch grid, as `IJepaModel` does.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        interpolate = bool(interpolate_pos_encoding)
        pixel_values = self._check_pixel_values(pixel_values, interpolate)
        pooled = self.encoder(pixel_values, interpolate_pos_encoding=interpolate).mean(dim=1)
        logits = self.classifier(pooled)
        loss = None if labels is None else self.loss_function(labels, logits, self.config, **kwargs)
        output = ImageClassifierOutput(loss=loss, logits=logits)
        return output if return_dict else output.to_tuple()


__all__ = [
    "IJepaForImageClassification",
    "IJepaModel",
    "IJepaOutput",
    "IJepaPreTrainedModel",
    "gather_patches",
    "interpolate_position_table",
    "sincos_2d_position_embeddings",
]
