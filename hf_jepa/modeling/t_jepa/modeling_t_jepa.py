"""T-JEPA: I-JEPA's latent prediction objective on text, with a BERT backbone, and the paper's text baselines.

JEPA objective: the target encoder (an EMA copy of the context encoder, frozen) reads the full sentence; its
last-layer states, layer-normalised, are the targets. The context encoder reads the same sentence with the target
spans removed from attention (every key position in a span is masked out, so no context token sees them). The
predictor projects the context states to its narrower width, replaces each target position by a learned mask token,
adds learned position embeddings everywhere, and runs transformer blocks in which a span's mask tokens see the context
and their own span only (I-JEPA predicts each target block separately); a linear layer maps back to the encoder width.
The loss is the squared error (or smooth L1) between predictions and targets at the target positions.

Baselines on the same backbone: `"mlm"` (masked language modelling of the same spans), and `"vicreg"`,
`"barlow_twins"`, `"byol"` on two views of a sentence (two independent span maskings, `[MASK]` at the spans), with a
projector on the mean-pooled encoder output.

This file imports only torch and transformers so that `trust_remote_code` export works.
"""

import contextlib
import copy
import logging
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertModel, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput

from .configuration_t_jepa import TJepaConfig


@dataclass
class TJepaOutput(ModelOutput):
    """
    Output of [`TJepaModel`].

    Args:
        loss: the objective's loss.
        predictions: `(num_target_tokens, hidden)` JEPA predictions at the target positions (row-major over the
            batch), or the online projections of view 1 for the joint-embedding objectives.
        targets: the matching `(num_target_tokens, hidden)` target representations, or the projections of view 2.
        logits: `(num_target_tokens, vocab)` MLM logits at the masked positions.
        last_hidden_state: `(batch, length, hidden)` context encoder output.
        pooled_embeddings: `(batch, hidden)` mean-pooled encoder output of the (first view of the) input.
        prediction_loss, variance_loss, covariance_loss: loss parts where the objective has them.
    """

    loss: torch.FloatTensor | None = None
    predictions: torch.FloatTensor | None = None
    targets: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    pooled_embeddings: torch.FloatTensor | None = None
    prediction_loss: torch.FloatTensor | None = None
    variance_loss: torch.FloatTensor | None = None
    covariance_loss: torch.FloatTensor | None = None


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of `(B, L, H)` states over the positions where `attention_mask` is 1 (I-JEPA evaluates average-pooled)."""
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


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


# Copied from hf_jepa.modeling.jepa_reasoner.modeling_jepa_reasoner_blocks.mask_for_attention_backend
def mask_for_attention_backend(allowed: torch.Tensor, implementation: str | None, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask (True = may attend) in the form the attention backend takes: boolean for "sdpa",
    additive float of `dtype` (0 where allowed, the dtype's minimum elsewhere) for "eager" and any other backend."""
    if implementation == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


class TJepaPredictorBlock(GradientCheckpointingLayer):
    """Pre-norm transformer block; its attention goes through transformers' attention interface
    (`config._attn_implementation`: "sdpa" or "eager") and takes a `(B, 1, L, L)` mask, boolean (True = may attend)
    for SDPA, additive otherwise (`mask_for_attention_backend`). No dropout."""

    def __init__(self, config: TJepaConfig):
        super().__init__()
        self.config = config
        width, self.num_heads = config.predictor_hidden_size, config.predictor_num_heads
        self.scaling = (width // self.num_heads) ** -0.5
        self.is_causal = False
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        hidden = int(width * config.predictor_mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))

    def forward(self, hidden: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        batch, length, width = hidden.shape
        q, k, v = self.qkv(self.norm1(hidden)).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        attended, _ = attend(self, q, k, v, attention, dropout=0.0, scaling=self.scaling, is_causal=False)
        hidden = hidden + self.proj(attended.reshape(batch, length, width))
        return hidden + self.mlp(self.norm2(hidden))


class TJepaPredictor(nn.Module):
    """Context states + mask tokens at the target positions -> predicted target representations."""

    def __init__(self, config: TJepaConfig):
        super().__init__()
        width = config.predictor_hidden_size
        self.embed = nn.Linear(config.hidden_size, width)
        self.mask_token = nn.Parameter(torch.empty(width))
        self.position_embeddings = nn.Embedding(config.backbone_config.max_position_embeddings, width)
        self.blocks = nn.ModuleList(TJepaPredictorBlock(config) for _ in range(config.predictor_num_layers))
        self.norm = nn.LayerNorm(width)
        self.output = nn.Linear(width, config.hidden_size)

    @staticmethod
    def attention_mask(attention_mask: torch.Tensor, target_mask: torch.Tensor, span_ids: torch.Tensor) -> torch.Tensor:
        """`(B, 1, L, L)`: every token may attend the context (valid, non-target positions); a target token also
        attends the tokens of its own span. Each position may attend itself (keeps padding rows defined)."""
        context = attention_mask.bool() & ~target_mask
        same_span = (span_ids[:, :, None] == span_ids[:, None, :]) & target_mask[:, :, None] & target_mask[:, None, :]
        allowed = context[:, None, :] | same_span
        allowed = allowed | torch.eye(allowed.shape[-1], dtype=torch.bool, device=allowed.device)
        return allowed[:, None]

    def forward(self, context_states, attention_mask, target_mask, span_ids):
        hidden = self.embed(context_states)
        hidden = torch.where(target_mask[..., None], self.mask_token.to(hidden.dtype), hidden)
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        hidden = hidden + self.position_embeddings(positions)[None]
        attention = self.attention_mask(attention_mask, target_mask, span_ids)
        attention = mask_for_attention_backend(attention, self.blocks[0].config._attn_implementation, hidden.dtype)
        for block in self.blocks:
            hidden = block(hidden, attention)
        return self.output(self.norm(hidden))


# ------------------------------------------------------------------------------------------------------ baselines


class TJepaProjector(nn.Module):
    """VICReg-style expander: Linear-BN-ReLU, Linear-BN-ReLU, Linear."""

    def __init__(self, in_size: int, hidden: int, out: int):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_size, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, out),
        )

    def forward(self, x):
        return self.layers(x)


class TJepaMlmHead(nn.Module):
    """BERT's prediction head: dense + GELU + LayerNorm, then a decoder to the vocabulary."""

    def __init__(self, config: TJepaConfig):
        super().__init__()
        hidden = config.hidden_size
        self.transform = nn.Sequential(
            nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden, eps=config.backbone_config.layer_norm_eps)
        )
        self.decoder = nn.Linear(hidden, config.backbone_config.vocab_size)

    def forward(self, hidden):
        return self.decoder(self.transform(hidden))


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


def barlow_twins_loss(z1: torch.Tensor, z2: torch.Tensor, off_diagonal_weight: float) -> torch.Tensor:
    """`sum_i (1 - C_ii)^2 + lambda sum_{i != j} C_ij^2` with `C` the cross-correlation of the batch-standardised
    projections (Zbontar et al., 2021)."""
    batch = z1.shape[0]
    # Biased std, as the reference's BatchNorm1d(affine=False) in training mode: identical views give C_ii = 1.
    z1 = (z1 - z1.mean(0)) / (z1.std(0, correction=0) + 1e-5)
    z2 = (z2 - z2.mean(0)) / (z2.std(0, correction=0) + 1e-5)
    correlation = z1.T @ z2 / batch
    on_diagonal = (1 - torch.diagonal(correlation)).pow(2).sum()
    off_diagonal = (correlation - torch.diag(torch.diagonal(correlation))).pow(2).sum()
    return on_diagonal + off_diagonal_weight * off_diagonal


def byol_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`2 - 2 cos(p, z)`, averaged over the batch."""
    return (2 - 2 * F.cosine_similarity(prediction, target.detach(), dim=-1)).mean()


@contextlib.contextmanager
def _batch_statistics(module: nn.Module):
    """BYOL's target projector normalises with its batch's statistics, like the online one: its BatchNorm layers run
    in train mode inside the block (the EMA update averages parameters, not running statistics)."""
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    modes = [m.training for m in norms]
    for norm in norms:
        norm.train()
    try:
        yield
    finally:
        for norm, mode in zip(norms, modes):
            norm.train(mode)


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


class TJepaPreTrainedModel(PreTrainedModel):
    config: TJepaConfig
    config_class = TJepaConfig
    base_model_prefix = "t_jepa"
    main_input_name = "input_ids"
    input_modalities = "text"
    supports_gradient_checkpointing = True
    _no_split_modules = ["BertEmbeddings", "BertLayer", "TJepaPredictorBlock"]
    # The BERT encoders take "sdpa" and "eager" (the backbone sub-config gets the same choice); flash attention is
    # not declared: the predictor's per-span mask is not a padding mask, which is all flash attention takes.
    _supports_sdpa = True

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.trunc_normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.trunc_normal_(module.weight, std=std)
        elif isinstance(module, (nn.LayerNorm, nn.BatchNorm1d)):
            if module.weight is not None:
                init.ones_(module.weight)
                init.zeros_(module.bias)
            if isinstance(module, nn.BatchNorm1d):
                init.zeros_(module.running_mean)
                init.ones_(module.running_var)
                init.zeros_(module.num_batches_tracked)
        elif isinstance(module, TJepaPredictor):
            init.trunc_normal_(module.mask_token, std=std)


class TJepaModel(TJepaPreTrainedModel):
    """
    T-JEPA (or one of its text baselines, by `config.objective`): a BERT context encoder, an EMA target encoder
    (`"jepa"`, `"byol"`; frozen, always in eval mode) and the objective's head.
    """

    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = "To start from a plain BERT checkpoint use TJepaModel.from_backbone(path). "

    def __init__(self, config: TJepaConfig):
        super().__init__(config)
        config.validate()
        self.context_encoder = BertModel(config.backbone_config, add_pooling_layer=False)
        self.target_encoder = None
        self.predictor = self.mlm_head = self.projector = self.target_projector = self.byol_predictor = None
        if config.objective == "jepa":
            self.predictor = TJepaPredictor(config)
        elif config.objective == "mlm":
            self.mlm_head = TJepaMlmHead(config)
        else:
            self.projector = TJepaProjector(
                config.hidden_size, config.projector_hidden_size, config.projector_output_size
            )
            if config.objective == "byol":
                size = config.projector_output_size
                self.byol_predictor = nn.Sequential(
                    nn.Linear(size, config.byol_predictor_hidden_size),
                    nn.BatchNorm1d(config.byol_predictor_hidden_size),
                    nn.ReLU(inplace=True),
                    nn.Linear(config.byol_predictor_hidden_size, size),
                )
        if config.uses_target_encoder:
            self.target_encoder = copy.deepcopy(self.context_encoder)
        if config.objective == "byol":
            self.target_projector = copy.deepcopy(self.projector)
        self.post_init()
        if (
            self.target_encoder is not None
            and self.context_encoder.embeddings.word_embeddings.weight.device.type != "meta"
        ):
            self.copy_online_to_targets()
        self.freeze_targets()

    # ------------------------------------------------------------------ EMA target housekeeping

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) module pairs the trainer updates by EMA."""
        pairs = []
        if self.target_encoder is not None:
            pairs.append((self.context_encoder, self.target_encoder))
        if self.target_projector is not None:
            pairs.append((self.projector, self.target_projector))
        return pairs

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

    @classmethod
    def from_backbone(cls, pretrained_model_name_or_path, **config_overrides) -> "TJepaModel":
        """A T-JEPA whose context and target encoders both start from a pretrained BERT checkpoint (a Hub id or a
        local directory, e.g. a sentence-transformers MiniLM folder); `config_overrides` set the other fields."""
        bert = BertModel.from_pretrained(pretrained_model_name_or_path, add_pooling_layer=False)
        config = TJepaConfig(backbone_config=bert.config.to_dict(), **config_overrides)
        model = cls(config)
        missing, unexpected = model.context_encoder.load_state_dict(bert.state_dict(), strict=False)
        if missing:
            raise ValueError(f"from_backbone: {pretrained_model_name_or_path} lacks encoder weights {missing[:8]}")
        model.copy_online_to_targets()
        model.freeze_targets()
        return model

    # ------------------------------------------------------------------ input checks

    def _check_inputs(self, input_ids, attention_mask):
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
            raise ValueError(
                f"input_ids must be an integer tensor (batch, length), got {getattr(input_ids, 'shape', input_ids)}"
            )
        if input_ids.shape[0] == 0:
            raise ValueError("input_ids is empty (batch size 0): pass at least one text")
        if input_ids.shape[1] == 0:
            raise ValueError("input_ids is empty: every text must have at least one token")
        limit = self.config.backbone_config.max_position_embeddings
        if input_ids.shape[1] > limit:
            raise ValueError(
                f"input_ids has length {input_ids.shape[1]}, longer than the backbone's max_position_embeddings "
                f"({limit}): truncate the text (tokenizer(..., truncation=True, max_length={limit}))"
            )
        vocab = self.config.backbone_config.vocab_size
        if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= vocab):
            raise ValueError(
                f"input_ids holds token ids up to {int(input_ids.max())}, outside the model's vocabulary of {vocab}: "
                "the tokenizer does not match the model"
            )
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if attention_mask.shape != input_ids.shape:
            raise ValueError(
                f"attention_mask must have shape {tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}"
            )
        return attention_mask

    def _check_target_mask(self, target_mask, attention_mask, name="target_mask"):
        if target_mask is None:
            raise ValueError(f"the {self.config.objective!r} objective needs {name} (from the span-masking collator)")
        target_mask = target_mask.bool()
        if target_mask.shape != attention_mask.shape:
            raise ValueError(f"{name} must have shape {tuple(attention_mask.shape)}, got {tuple(target_mask.shape)}")
        valid = attention_mask.bool()
        per_row_targets = (target_mask & valid).sum(1)
        if (per_row_targets == 0).any():
            rows = torch.nonzero(per_row_targets == 0).flatten().tolist()
            raise ValueError(f"{name} masks nothing in rows {rows}: every sentence needs at least one target token")
        if ((valid & ~target_mask).sum(1) == 0).any():
            rows = torch.nonzero((valid & ~target_mask).sum(1) == 0).flatten().tolist()
            raise ValueError(f"{name} masks every token of rows {rows}: no context is left to predict from")
        return target_mask & valid

    # ------------------------------------------------------------------ building blocks

    def _masked_input(self, input_ids, target_mask):
        return torch.where(target_mask, torch.full_like(input_ids, self.config.mask_token_id), input_ids)

    def encode(self, input_ids, attention_mask=None, use_target_encoder=False) -> torch.Tensor:
        """`(B, L, hidden)` last-layer states of the context encoder, or of the EMA target encoder."""
        attention_mask = self._check_inputs(input_ids, attention_mask)
        encoder = (
            self.target_encoder if use_target_encoder and self.target_encoder is not None else self.context_encoder
        )
        with torch.set_grad_enabled(torch.is_grad_enabled() and encoder is self.context_encoder):
            return encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def embed(self, input_ids, attention_mask=None, use_target_encoder: bool = True) -> torch.Tensor:
        """Mean-pooled sentence embeddings `(B, hidden)`; from the EMA target encoder when there is one (as I-JEPA
        evaluates), else from the context encoder."""
        attention_mask = self._check_inputs(input_ids, attention_mask)
        return mean_pool(self.encode(input_ids, attention_mask, use_target_encoder), attention_mask)

    def target_representations(self, input_ids, attention_mask) -> torch.Tensor:
        hidden = self.encode(input_ids, attention_mask, use_target_encoder=True).detach()
        return F.layer_norm(hidden, hidden.shape[-1:]) if self.config.normalize_targets else hidden

    # ------------------------------------------------------------------ objectives

    def _jepa(self, input_ids, attention_mask, target_mask, span_ids):
        if span_ids is None:  # one span per contiguous run of target tokens
            starts = target_mask & ~F.pad(target_mask[:, :-1], (1, 0), value=False)
            span_ids = torch.where(target_mask, starts.long().cumsum(1) - 1, torch.full_like(input_ids, -1))
        context_attention = attention_mask.bool() & ~target_mask
        context = self.context_encoder(input_ids=input_ids, attention_mask=context_attention.long()).last_hidden_state
        predicted = self.predictor(context, attention_mask, target_mask, span_ids)
        targets = self.target_representations(input_ids, attention_mask)
        predictions, targets = predicted[target_mask], targets[target_mask]
        if self.config.loss_type == "mse":
            loss = F.mse_loss(predictions.float(), targets.float())
        else:
            loss = F.smooth_l1_loss(predictions.float(), targets.float())
        pooled = mean_pool(context, context_attention)
        return dict(
            loss=loss,
            prediction_loss=loss,
            predictions=predictions,
            targets=targets,
            last_hidden_state=context,
            pooled_embeddings=pooled,
        )

    def _mlm(self, input_ids, attention_mask, target_mask):
        hidden = self.context_encoder(
            input_ids=self._masked_input(input_ids, target_mask), attention_mask=attention_mask
        ).last_hidden_state
        logits = self.mlm_head(hidden[target_mask])
        loss = F.cross_entropy(logits.float(), input_ids[target_mask])
        return dict(
            loss=loss,
            prediction_loss=loss,
            logits=logits,
            last_hidden_state=hidden,
            pooled_embeddings=mean_pool(hidden, attention_mask),
        )

    def _joint_embedding(self, input_ids, attention_mask, target_mask, second_target_mask):
        config = self.config
        view1, view2 = self._masked_input(input_ids, target_mask), self._masked_input(input_ids, second_target_mask)
        hidden1 = self.context_encoder(input_ids=view1, attention_mask=attention_mask).last_hidden_state
        pooled1 = mean_pool(hidden1, attention_mask)
        z1 = self.projector(pooled1)
        parts = {}
        if config.objective == "byol":
            hidden2 = self.context_encoder(input_ids=view2, attention_mask=attention_mask).last_hidden_state
            online = [self.byol_predictor(z1), self.byol_predictor(self.projector(mean_pool(hidden2, attention_mask)))]
            with torch.no_grad(), _batch_statistics(self.target_projector):
                targets = [
                    self.target_projector(
                        mean_pool(
                            self.target_encoder(input_ids=v, attention_mask=attention_mask).last_hidden_state,
                            attention_mask,
                        )
                    )
                    for v in (view2, view1)
                ]
            loss = byol_loss(online[0].float(), targets[0].float()) + byol_loss(online[1].float(), targets[1].float())
            z2 = targets[0]
        else:
            hidden2 = self.context_encoder(input_ids=view2, attention_mask=attention_mask).last_hidden_state
            z2 = self.projector(mean_pool(hidden2, attention_mask))
            a, b = z1.float(), z2.float()
            if config.objective == "vicreg":
                invariance, variance, covariance = config.vicreg_weights
                parts = dict(
                    prediction_loss=F.mse_loss(a, b),
                    variance_loss=(vicreg_variance_loss(a) + vicreg_variance_loss(b)) / 2,
                    covariance_loss=vicreg_covariance_loss(a) + vicreg_covariance_loss(b),
                )
                loss = (
                    invariance * parts["prediction_loss"]
                    + variance * parts["variance_loss"]
                    + covariance * parts["covariance_loss"]
                )
            else:
                loss = barlow_twins_loss(a, b, config.barlow_twins_lambda)
        return dict(
            loss=loss, predictions=z1, targets=z2, last_hidden_state=hidden1, pooled_embeddings=pooled1, **parts
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        span_ids: torch.Tensor | None = None,
        second_target_mask: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> TJepaOutput | BaseModelOutputWithPooling | tuple:
        r"""
        Without `target_mask` (and `second_target_mask`) the model acts as an encoder, as `pipeline("feature-extraction")`
        calls it: a `BaseModelOutputWithPooling` with the context encoder's last-layer states `(batch, length, hidden)`
        and their mean over the attended tokens `(batch, hidden)` (`mean_pool`); no loss, no masking.

        input_ids (`torch.LongTensor` of shape `(batch, length)`): token ids of the full sentences.
        attention_mask (`torch.LongTensor` of shape `(batch, length)`, *optional*): 1 for tokens, 0 for padding.
        target_mask (`torch.BoolTensor` of shape `(batch, length)`): the target spans (JEPA, MLM) or the masked
            spans of view 1 (joint-embedding objectives).
        span_ids (`torch.LongTensor` of shape `(batch, length)`, *optional*): span index of each target token
            (-1 elsewhere); by default each contiguous run of target tokens is one span.
        second_target_mask (`torch.BoolTensor`, *optional*): the masked spans of view 2 (joint-embedding objectives;
            required for them).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        attention_mask = self._check_inputs(input_ids, attention_mask)
        if target_mask is None and second_target_mask is None:  # encoder use (feature extraction)
            hidden = self.encode(input_ids, attention_mask)
            output = BaseModelOutputWithPooling(
                last_hidden_state=hidden, pooler_output=mean_pool(hidden, attention_mask)
            )
            return output if return_dict else output.to_tuple()
        target_mask = self._check_target_mask(target_mask, attention_mask)
        objective = self.config.objective
        if objective == "jepa":
            parts = self._jepa(input_ids, attention_mask, target_mask, span_ids)
        elif objective == "mlm":
            parts = self._mlm(input_ids, attention_mask, target_mask)
        else:
            second = self._check_target_mask(second_target_mask, attention_mask, "second_target_mask")
            parts = self._joint_embedding(input_ids, attention_mask, target_mask, second)
        output = TJepaOutput(**parts)
        return output if return_dict else output.to_tuple()


# ------------------------------------------------------------------------------------------ sequence classification


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


class TJepaForSequenceClassification(TJepaPreTrainedModel):
    """
    A T-JEPA encoder with a linear head on its mean-pooled sentence vector (the vector the feature pipeline and
    `TJepaModel.embed` return): `pipeline("text-classification")` runs it, `transformers.Trainer` fine-tunes it.
    `from_pretrained(t_jepa_folder, num_labels=..., id2label=..., label2id=...)` loads the encoder from a trained
    T-JEPA folder under its checkpoint name and initialises only the head.

    `config.classifier_encoder`: `"target"` (the EMA target encoder, default where the objective has one) or
    `"context"`. The loss follows `config.problem_type` (transformers' `loss_function`).
    """

    _strict_loading_hint = TJepaModel._strict_loading_hint
    _pretraining_model_class = TJepaModel

    def __init__(self, config: TJepaConfig, classifier_encoder: str | None = None):
        super().__init__(config)
        config.validate()
        if classifier_encoder is not None:
            config.classifier_encoder = classifier_encoder
        self.encoder_attribute = classifier_encoder_attribute(config, config.uses_target_encoder)
        setattr(self, self.encoder_attribute, BertModel(config.backbone_config, add_pooling_layer=False))
        self.num_labels = config.num_labels
        dropout = getattr(config.backbone_config, "hidden_dropout_prob", 0.1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self._encoder_frozen = False
        forget_pretraining_declarations(config)
        self.post_init()

    _check_inputs = TJepaModel._check_inputs

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
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch, length)`): token ids, checked as `TJepaModel` checks them.
        attention_mask (`torch.LongTensor` of shape `(batch, length)`, *optional*): 1 for tokens, 0 for padding.
        token_type_ids (`torch.LongTensor`, *optional*): accepted (tokenizers return them) and must match
            `input_ids`' shape; the encoder reads them as BERT does.
        labels (*optional*): class indices, regression targets or multi-hot floats, by `config.problem_type`.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        attention_mask = self._check_inputs(input_ids, attention_mask)
        if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
            raise ValueError(
                f"token_type_ids must have shape {tuple(input_ids.shape)}, got {tuple(token_type_ids.shape)}"
            )
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        logits = self.classifier(self.dropout(mean_pool(hidden, attention_mask)))
        loss = None if labels is None else self.loss_function(labels, logits, self.config, **kwargs)
        output = SequenceClassifierOutput(loss=loss, logits=logits)
        return output if return_dict else output.to_tuple()


__all__ = ["TJepaForSequenceClassification", "TJepaModel", "TJepaOutput", "TJepaPreTrainedModel", "mean_pool"]
