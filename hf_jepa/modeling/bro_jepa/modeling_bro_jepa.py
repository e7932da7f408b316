"""BRo-JEPA: modular arithmetic in latent space with a block-rotation predictor.

A context encoder maps an image of digit ``x`` to a latent ``z``; a predictor conditioned on an operation ``k`` maps it
to ``z_p``, trained to match the EMA target encoder's latent of an image of digit ``(x + k) mod modulus``. The
block-rotation predictor rotates true 2-D pairs of ``z`` by ``k * theta_j``, so ``P(z, a) = P(P(z, b), a - b)`` holds by
construction and ops never seen in training (+-2..+-9 when trained on +-1) are predicted zero-shot.

This file imports only torch and transformers so that ``trust_remote_code`` export works.
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
from transformers.modeling_outputs import BaseModelOutputWithPooling, ImageClassifierOutput
from transformers.utils import ModelOutput

from .configuration_bro_jepa import BroJepaConfig


@dataclass
class BroJepaOutput(ModelOutput):
    """
    Output of [`BroJepaModel`].

    Args:
        loss: total training loss (only when targets are given).
        logits: `(batch, modulus)` class scores of the predicted latent: scaled cosine (or negative squared distance)
            to the stored class prototypes for the JEPA objective, the linear head for the supervised objective. `None`
            for a JEPA model whose prototypes have not been filled yet.
        predicted_latent: `(batch, latent_dim)` predictor output `P(z_context, k)`.
        context_latent: `(batch, latent_dim)` context encoder output.
        target_latent: `(batch, latent_dim)` EMA target encoder output on `target_pixel_values` (JEPA objective).
        prediction_loss, variance_loss, covariance_loss, composition_loss: the weighted loss's parts, unweighted.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    predicted_latent: torch.FloatTensor | None = None
    context_latent: torch.FloatTensor | None = None
    target_latent: torch.FloatTensor | None = None
    prediction_loss: torch.FloatTensor | None = None
    variance_loss: torch.FloatTensor | None = None
    covariance_loss: torch.FloatTensor | None = None
    composition_loss: torch.FloatTensor | None = None


# ----------------------------------------------------------------------------------------------------------- encoders


class BroJepaMlpEncoder(nn.Module):
    def __init__(self, config: BroJepaConfig):
        super().__init__()
        layers, width = [], config.num_channels * config.image_size**2
        for hidden in config.mlp_hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True)]
            width = hidden
        self.layers = nn.Sequential(nn.Flatten(), *layers)
        self.projection = nn.Linear(width, config.latent_dim)

    def forward(self, pixel_values):
        return self.projection(self.layers(pixel_values))


def _conv_bn_relu(in_channels, out_channels, stride=1):
    return [
        nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]


class BroJepaCnnEncoder(nn.Module):
    """Stages of 3x3 conv + BN + ReLU, halving the resolution with 2x max-pooling between them or with stride-2 convs
    (`config.cnn_downsampling`), then a projection of the flattened feature map (keeping where strokes are, which
    global pooling would discard): linear, or with a hidden layer (`config.cnn_hidden_size`)."""

    def __init__(self, config: BroJepaConfig):
        super().__init__()
        layers, width, side = [], config.num_channels, config.image_size
        strided = config.cnn_downsampling == "stride"
        for index, channels in enumerate(config.cnn_channels):
            if strided:
                side = (side + 1) // 2  # 3x3, padding 1, stride 2
            elif index > 0:
                layers.append(nn.MaxPool2d(2))
                side //= 2
            layers += _conv_bn_relu(width, channels, stride=2 if strided else 1)
            width = channels
        self.layers = nn.Sequential(*layers, nn.Flatten())
        hidden = config.cnn_hidden_size
        self.projection = (
            nn.Sequential(
                nn.Linear(width * side * side, hidden),
                nn.BatchNorm1d(hidden),
                nn.ReLU(inplace=True),
                nn.Linear(hidden, config.latent_dim),
            )
            if hidden
            else nn.Linear(width * side * side, config.latent_dim)
        )

    def forward(self, pixel_values):
        return self.projection(self.layers(pixel_values))


class BroJepaBasicBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, hidden):
        out = F.relu(self.bn1(self.conv1(hidden)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(hidden), inplace=True)


class BroJepaResNet18Encoder(nn.Module):
    """ResNet-18 (2-2-2-2 basic blocks) adapted to 28x28: a 3x3 stride-1 stem and no max-pool, as for CIFAR."""

    def __init__(self, config: BroJepaConfig):
        super().__init__()
        width = config.resnet_base_width
        self.stem = nn.Sequential(*_conv_bn_relu(config.num_channels, width))
        blocks, in_channels = [], width
        for stage, multiplier in enumerate((1, 2, 4, 8)):
            out_channels = width * multiplier
            for index in range(2):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(BroJepaBasicBlock(in_channels, out_channels, stride))
                in_channels = out_channels
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projection = nn.Linear(in_channels, config.latent_dim)

    def forward(self, pixel_values):
        return self.projection(self.pool(self.blocks(self.stem(pixel_values))))


ENCODER_CLASSES = {"mlp": BroJepaMlpEncoder, "cnn": BroJepaCnnEncoder, "resnet18": BroJepaResNet18Encoder}


class BroJepaEncoder(nn.Module):
    """Backbone + projection to the latent, optionally standardised per dimension (BatchNorm without affine)."""

    def __init__(self, config: BroJepaConfig):
        super().__init__()
        self.backbone = ENCODER_CLASSES[config.encoder_type](config)
        self.latent_norm = nn.BatchNorm1d(config.latent_dim, affine=False) if config.normalize_latent else nn.Identity()

    def forward(self, pixel_values):
        return self.latent_norm(self.backbone(pixel_values))


# --------------------------------------------------------------------------------------------------------- predictors


def rotation_harmonics(config: BroJepaConfig) -> torch.Tensor:
    """Integer frequency of each 2-D block: all 1 for SFR, cycling 1..modulus//2 for MFR (each stays cyclic)."""
    if config.rotation_frequencies == "single":
        return torch.ones(1)
    return (torch.arange(config.num_blocks) % max(config.modulus // 2, 1) + 1).float()


class BroJepaBlockRotationPredictor(nn.Module):
    """`z_p = R_block(k * theta) z`: block `j` rotates the pair `(z[2j], z[2j+1])` by `k * theta_j`."""

    def __init__(self, config: BroJepaConfig):
        super().__init__()
        self.num_blocks = config.num_blocks
        shape = (1,) if config.rotation_frequencies == "single" else (config.num_blocks,)
        angles = torch.empty(shape)
        if config.learnable_angle:
            self.angles = nn.Parameter(angles)
        else:
            self.register_buffer("angles", angles)

    def forward(self, latent: torch.Tensor, operations: torch.Tensor) -> torch.Tensor:
        phase = operations.to(latent.dtype)[:, None] * self.angles.to(latent.dtype)[None, :]
        cos, sin = phase.cos(), phase.sin()
        pairs = latent.reshape(latent.shape[0], self.num_blocks, 2)
        x, y = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack((cos * x - sin * y, sin * x + cos * y), dim=-1)
        return rotated.reshape_as(latent)


class BroJepaAdditivePredictor(nn.Module):
    """Baseline predictor with an additive compositional operation embedding: `z_p = MLP(z + k * v)`, or
    `MLP([z, k * v])` with `config.additive_input == "concat"`; plus `z` with `config.additive_residual`."""

    def __init__(self, config: BroJepaConfig):
        super().__init__()
        self.residual = config.additive_residual
        self.concatenate = config.additive_input == "concat"
        self.operation_direction = nn.Parameter(torch.empty(config.latent_dim))
        self.mlp = nn.Sequential(
            nn.Linear(config.latent_dim * (2 if self.concatenate else 1), config.predictor_hidden_size),
            nn.GELU(),
            nn.Linear(config.predictor_hidden_size, config.latent_dim),
        )

    def forward(self, latent: torch.Tensor, operations: torch.Tensor) -> torch.Tensor:
        operation = operations.to(latent.dtype)[:, None] * self.operation_direction[None, :]
        # Summed, the op's shift competes with the latent's own spread along v; concatenated, k stays exactly readable.
        embedded = torch.cat((latent, operation), dim=-1) if self.concatenate else latent + operation
        return latent + self.mlp(embedded) if self.residual else self.mlp(embedded)


PREDICTOR_CLASSES = {"block_rotation": BroJepaBlockRotationPredictor, "additive_mlp": BroJepaAdditivePredictor}


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


# -------------------------------------------------------------------------------------------------------- loss terms


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


def _gather_with_grad(latent: torch.Tensor) -> torch.Tensor:
    """All ranks' latents (differentiable), so VICReg statistics see the global batch in multi-process runs."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return latent
    if torch.distributed.get_world_size() == 1:
        return latent
    return _GatherWithGrad.apply(latent)


def vicreg_variance_loss(latent: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """VICReg hinge on the per-dimension standard deviation: `mean(relu(1 - sqrt(var + eps)))`."""
    std = torch.sqrt(latent.var(dim=0) + eps)
    return F.relu(1.0 - std).mean()


def vicreg_covariance_loss(latent: torch.Tensor) -> torch.Tensor:
    """Sum of squared off-diagonal covariance entries (unbiased) divided by the dimension."""
    batch, dim = latent.shape
    centered = latent - latent.mean(dim=0)
    covariance = centered.T @ centered / (batch - 1)
    off_diagonal = covariance - torch.diag(torch.diagonal(covariance))
    return off_diagonal.pow(2).sum() / dim


def latent_prediction_loss(prediction: torch.Tensor, target: torch.Tensor, loss_type: str) -> torch.Tensor:
    if loss_type == "mse":
        return F.mse_loss(prediction, target)
    if loss_type == "smooth_l1":
        return F.smooth_l1_loss(prediction, target)
    return (1.0 - F.cosine_similarity(prediction, target, dim=-1)).mean()


# -------------------------------------------------------------------------------------------------------------- model


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


class BroJepaPreTrainedModel(PreTrainedModel):
    config: BroJepaConfig
    config_class = BroJepaConfig
    base_model_prefix = "bro_jepa"
    main_input_name = "pixel_values"
    input_modalities = "image"

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Conv2d):
            init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            init.trunc_normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, BroJepaBlockRotationPredictor):
            init.copy_(module.angles, self.config.initial_angle * rotation_harmonics(self.config))
        elif isinstance(module, BroJepaAdditivePredictor):
            init.trunc_normal_(module.operation_direction, std=1.0 / math.sqrt(self.config.latent_dim))
        elif isinstance(module, BroJepaModel):
            init.zeros_(module.class_prototypes)
        else:
            super()._init_weights(module)


class BroJepaModel(BroJepaPreTrainedModel):
    """
    BRo-JEPA: context encoder, EMA target encoder (frozen, always in eval mode), operation-conditioned predictor and
    stored class prototypes. With `config.objective == "supervised"` it is the cross-entropy baseline instead: no target
    encoder, a linear classifier on the predicted latent.
    """

    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = (
        "config.json and model.safetensors disagree (e.g. a different encoder_type, predictor_type, objective or "
        "learnable_angle). "
    )

    def __init__(self, config: BroJepaConfig):
        super().__init__(config)
        config.validate()
        self.context_encoder = BroJepaEncoder(config)
        self.predictor = PREDICTOR_CLASSES[config.predictor_type](config)
        if config.objective == "jepa":
            self.target_encoder = copy.deepcopy(self.context_encoder)
            self.classifier = None
        else:
            self.target_encoder = None
            self.classifier = nn.Linear(config.latent_dim, config.modulus)
        # Mean target latent of each class, filled after training by `fill_class_prototypes`; saved with the weights.
        self.register_buffer("class_prototypes", torch.zeros(config.modulus, config.latent_dim))
        self.post_init()
        if self.class_prototypes.device.type != "meta":
            self.copy_online_to_targets()
        self.freeze_targets()

    # ------------------------------------------------------------------ EMA target housekeeping

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) module pairs the trainer updates by EMA: none for the supervised baseline."""
        return [] if self.target_encoder is None else [(self.context_encoder, self.target_encoder)]

    @torch.no_grad()
    def copy_online_to_targets(self):
        """Make every EMA target an exact copy of its online module (parameters and buffers)."""
        for online, target in self.ema_pairs():
            target.load_state_dict(online.state_dict())

    def freeze_targets(self):
        """Keep every EMA target out of the optimiser and in eval mode: only the EMA update (`ema_pairs`) moves it."""
        for _, target in self.ema_pairs():
            target.requires_grad_(False)
            target.eval()

    def train(self, mode: bool = True):
        super().train(mode)
        for _, target in self.ema_pairs():
            target.eval()
        return self

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

    def _check_pixel_values(self, pixel_values, name) -> torch.Tensor:
        """Checked `pixel_values`: a non-empty floating tensor `(batch, C, H, W)` of finite values, cast to the
        model's dtype (float64 / float16 / bfloat16 input is accepted); integer images raise `TypeError` (use the
        image processor)."""
        config = self.config
        expected = (config.num_channels, config.image_size, config.image_size)
        if not isinstance(pixel_values, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (batch, {', '.join(map(str, expected))})")
        if not pixel_values.is_floating_point():
            raise TypeError(
                f"{name} must be a normalised floating-point tensor, got dtype {pixel_values.dtype}; convert uint8 "
                f"images with BroJepaImageProcessor or ((x / 255) - {config.pixel_mean}) / {config.pixel_std}"
            )
        if pixel_values.ndim != 4 or tuple(pixel_values.shape[1:]) != expected:
            raise ValueError(
                f"{name} must have shape (batch, {', '.join(map(str, expected))}), got {tuple(pixel_values.shape)}"
            )
        if pixel_values.shape[0] == 0:
            raise ValueError(f"{name} is empty (batch size 0): pass at least one image")
        return _finite_pixels(pixel_values, name, self.dtype)

    def _check_operations(self, operations, batch_size) -> torch.Tensor:
        modulus = self.config.modulus
        operations = torch.as_tensor(operations, device=self.class_prototypes.device)
        if operations.is_floating_point() or operations.dtype == torch.bool:
            raise TypeError(f"operations must be integers, got dtype {operations.dtype}")
        if operations.ndim == 0:
            operations = operations.expand(batch_size)
        if operations.shape != (batch_size,):
            raise ValueError(
                f"operations must have shape ({batch_size},) or be a scalar, got {tuple(operations.shape)}"
            )
        if operations.numel() and operations.abs().max().item() >= modulus:
            raise ValueError(
                f"operations must lie in [-{modulus - 1}, {modulus - 1}] (modulus {modulus}), "
                f"got values in [{operations.min().item()}, {operations.max().item()}]"
            )
        return operations.long()

    # ------------------------------------------------------------------ building blocks

    def encode(self, pixel_values: torch.Tensor, use_target_encoder: bool = False) -> torch.Tensor:
        """Latents of images; `use_target_encoder=True` for the EMA target encoder (the space prototypes live in)."""
        pixel_values = self._check_pixel_values(pixel_values, "pixel_values")
        if use_target_encoder and self.target_encoder is not None:
            return self._target_latent(pixel_values)
        return self.context_encoder(pixel_values)

    @torch.no_grad()
    def _target_latent(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Target encoder output. While the model trains, the target's BatchNorm layers normalise with the statistics
        of the target's own batch and update their own running statistics (as BYOL/MoCo key encoders do); otherwise
        the target is in eval mode. Eval-mode BatchNorm with statistics copied or averaged from the fast-moving
        context encoder does not fit the lagging target weights and collapses or explodes its latents."""
        if not self.training:
            return self.target_encoder(pixel_values)
        norms = [m for m in self.target_encoder.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        for module in norms:
            module.train()
        try:
            return self.target_encoder(pixel_values)
        finally:
            for module in norms:
                module.eval()

    def predict(self, latent: torch.Tensor, operations) -> torch.Tensor:
        """Apply operation(s) `k` in latent space: `P(z, k)`."""
        return self.predictor(latent, self._check_operations(operations, latent.shape[0]))

    def rollout(self, latent: torch.Tensor, operations) -> torch.Tensor:
        """Apply the unit step `sign(k)` `|k|` times (only the ops seen in training) instead of `k` at once."""
        operations = self._check_operations(operations, latent.shape[0])
        steps, unit = operations.abs(), operations.sign()
        for step in range(int(steps.max().item()) if steps.numel() else 0):
            active = (steps > step)[:, None]
            latent = torch.where(active, self.predictor(latent, unit), latent)
        return latent

    def composition_loss(
        self,
        latent: torch.Tensor,
        operations: torch.Tensor,
        target_latent: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Composition consistency of the predictor, in the form `config.composition_mode` names.

        `"rollout"`: `mean_n ||P(z, n k) - P^n(z, k)||^2` for `n = 2 .. composition_max_n`: applying `2k` once must
        land where applying `k` twice lands, and so on. The unseen ops' embeddings are thereby trained indirectly,
        which is why the paper calls the resulting generalisation "weak" zero-shot. Exactly zero for a block rotation,
        whose `R(nk theta) = R(k theta)^n` holds by construction. `"rollout_stopgrad"` detaches the rollout,
        `"group"` asks `P(P(z, a), b) = P(z, a + b)` and `P(P(z, k), -k) = z` (`_group_law_loss`),
        `"labelled_target"` matches `P(z, n k)` with the batch's mean target latent of class `(x + n k) mod modulus`
        (`_labelled_composition_loss`; needs `target_latent` and `labels`, the target classes).
        """
        mode = self.config.composition_mode
        if mode == "group":
            return self._group_law_loss(latent)
        if mode == "labelled_target":
            if target_latent is None or labels is None:
                raise ValueError(
                    "composition_mode='labelled_target' needs target_latent and labels (the target classes): pass "
                    "target_pixel_values and labels to forward"
                )
            return self._labelled_composition_loss(latent, operations, target_latent, labels)
        rolled, terms = latent, []
        for n in range(1, self.config.composition_max_n + 1):
            rolled = self.predictor(rolled, operations)
            if n >= 2:
                direct = self.predictor(latent, n * operations)
                # Detached, the rollout is a fixed target: the loss cannot shorten the +-1 chain to meet P(z, nk).
                target = rolled.detach() if mode == "rollout_stopgrad" else rolled
                terms.append(self._composition_distance(direct, target).mean())
        return torch.stack(terms).mean()

    def _composition_distance(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-sample distance of the composition loss, in float32: mean squared error over the latent
        (`composition_loss_type="mse"`, so the batch mean is `F.mse_loss`) or `1 - cos` (`"cosine"`, blind to the
        norm, as the cosine class prototypes are)."""
        prediction, target = prediction.float(), target.float()
        if self.config.composition_loss_type == "cosine":
            return 1.0 - F.cosine_similarity(prediction, target, dim=-1)
        return (prediction - target).pow(2).mean(-1)

    def _group_law_loss(self, latent: torch.Tensor) -> torch.Tensor:
        """`||P(P(z, a), b) - P(z, a + b)||^2 + ||P(P(z, a), -a) - z||^2`, batch means, with `a` uniform over the
        nonzero ops and `b` uniform over the nonzero ops that keep `a + b` in `[-(modulus - 1), modulus - 1]`
        (`P(z, 0) := z`, so `b = -a` is an inverse pair too)."""
        largest = self.config.modulus - 1
        batch, device = latent.shape[0], latent.device
        nonzero = torch.cat([torch.arange(-largest, 0), torch.arange(1, largest + 1)]).to(device)
        first = nonzero[torch.randint(len(nonzero), (batch,), device=device)]
        # b in [low, high] \ {0}: draw from the range without 0 (one value fewer) and skip over 0.
        low, high = -largest - first.clamp(max=0), largest - first.clamp(min=0)
        offset = (torch.rand(batch, device=device) * (high - low)).long()  # high - low values once 0 is removed
        second = low + offset
        second = second + (second >= 0).long()
        composed = first + second
        two_steps = self.predictor(self.predictor(latent, first), second)
        direct = torch.where((composed == 0)[:, None], latent, self.predictor(latent, composed))
        inverse = self.predictor(self.predictor(latent, first), -first)
        distance = self._composition_distance
        return distance(two_steps, direct).mean() + distance(inverse, latent).mean()

    def _labelled_composition_loss(self, latent, operations, target_latent, labels) -> torch.Tensor:
        """`mean_n ||P(z, n k) - t_{(x + n k) mod modulus}||^2` over the samples whose class `(x + n k)` occurs among
        the batch's targets; `t_c` is the mean target latent of class `c` in the batch and `x = labels - k`."""
        modulus = self.config.modulus
        labels = torch.as_tensor(labels, device=latent.device).long()
        target_latent = target_latent.float()
        counts = torch.bincount(labels, minlength=modulus)
        sums = torch.zeros(modulus, target_latent.shape[1], device=latent.device).index_add_(0, labels, target_latent)
        class_means = sums / counts.clamp(min=1)[:, None]
        terms = []
        for n in range(2, self.config.composition_max_n + 1):
            composed_class = (labels + (n - 1) * operations) % modulus  # x + n k = (x + k) + (n - 1) k
            present = counts[composed_class] > 0
            direct = self.predictor(latent, n * operations).float()
            error = self._composition_distance(direct, class_means[composed_class])
            terms.append((error * present).sum() / present.sum().clamp(min=1))
        return torch.stack(terms).mean()

    def has_class_prototypes(self) -> bool:
        return bool(self.class_prototypes.abs().sum() > 0)

    def class_logits(self, latent: torch.Tensor) -> torch.Tensor | None:
        """Class scores of latents: the supervised head, or similarity to the stored class prototypes."""
        if self.classifier is not None:
            return self.classifier(latent)
        if not self.has_class_prototypes():
            return None
        prototypes = self.class_prototypes.to(latent.dtype)
        if self.config.prototype_metric == "euclidean":
            return -torch.cdist(latent, prototypes).pow(2)
        # Cosine similarity scaled by 1/0.1 so that a softmax over classes gives a usable confidence.
        return F.normalize(latent, dim=-1) @ F.normalize(prototypes, dim=-1).T / 0.1

    @torch.no_grad()
    def fill_class_prototypes(self, pixel_values: torch.Tensor, labels: torch.Tensor, batch_size: int = 2048):
        """Store each class's mean target latent (context latent for the supervised objective) as its prototype."""
        labels = torch.as_tensor(labels, device=self.class_prototypes.device)
        if labels.shape != (pixel_values.shape[0],):
            raise ValueError(f"labels must have shape ({pixel_values.shape[0]},), got {tuple(labels.shape)}")
        counts = torch.bincount(labels, minlength=self.config.modulus)
        if counts.numel() != self.config.modulus or (counts == 0).any():
            raise ValueError(f"labels must cover every class 0..{self.config.modulus - 1} exactly, got counts {counts}")
        sums = torch.zeros_like(self.class_prototypes)
        was_training = self.training
        self.eval()
        for start in range(0, pixel_values.shape[0], batch_size):
            chunk = pixel_values[start : start + batch_size].to(self.class_prototypes.device)
            latent = self.encode(chunk, use_target_encoder=True).float()
            sums.index_add_(0, labels[start : start + batch_size], latent)
        self.class_prototypes.copy_(sums / counts[:, None].to(sums.dtype))
        self.train(was_training)
        return self.class_prototypes

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        pixel_values: torch.Tensor,
        operations=None,
        target_pixel_values: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BroJepaOutput | BaseModelOutputWithPooling | tuple:
        r"""
        Without `operations` the model acts as an encoder, as `pipeline("image-feature-extraction")` calls it: a
        `BaseModelOutputWithPooling` whose `pooler_output` is the context latent `(batch, latent_dim)` and whose
        `last_hidden_state` is the same latent as a one-token sequence `(batch, 1, latent_dim)`; no loss.

        pixel_values (`torch.FloatTensor` of shape `(batch, num_channels, image_size, image_size)`):
            Normalised images of the operands `x`. Any floating dtype is accepted and cast to the model's dtype; NaN
            or inf values and an empty batch raise `ValueError`, integer images `TypeError` (use the image processor).
        operations (`torch.LongTensor` of shape `(batch,)` or `int`):
            Operation `k` per sample, in `[-(modulus - 1), modulus - 1]`.
        target_pixel_values (`torch.FloatTensor`, *optional*):
            Images of class `(x + k) mod modulus`; with them the JEPA loss is computed.
        labels (`torch.LongTensor` of shape `(batch,)`, *optional*):
            Target classes `(x + k) mod modulus`; required for the loss of the supervised objective.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        config = self.config
        context_latent = self.encode(pixel_values)
        if operations is None:  # encoder use (feature extraction)
            if target_pixel_values is not None or labels is not None:
                raise ValueError(
                    "operations is missing: target_pixel_values and labels need the operation k per sample"
                )
            output = BaseModelOutputWithPooling(last_hidden_state=context_latent[:, None], pooler_output=context_latent)
            return output if return_dict else output.to_tuple()
        operations = self._check_operations(operations, pixel_values.shape[0])
        predicted_latent = self.predictor(context_latent, operations)
        logits = self.class_logits(predicted_latent)

        target_latent = loss = None
        parts = {}
        if config.objective == "jepa" and target_pixel_values is not None:
            target_pixel_values = self._check_pixel_values(target_pixel_values, "target_pixel_values")
            if target_pixel_values.shape[0] != pixel_values.shape[0]:
                raise ValueError("target_pixel_values must have the same batch size as pixel_values")
            target_latent = self._target_latent(target_pixel_values)
            gathered = _gather_with_grad(context_latent.float())
            parts["prediction_loss"] = latent_prediction_loss(
                predicted_latent.float(), target_latent.float(), config.loss_type
            )
            parts["variance_loss"] = vicreg_variance_loss(gathered)
            parts["covariance_loss"] = vicreg_covariance_loss(gathered)
            loss = (
                config.invariance_weight * parts["prediction_loss"]
                + config.variance_weight * parts["variance_loss"]
                + config.covariance_weight * parts["covariance_loss"]
            )
        elif config.objective == "supervised" and labels is not None:
            labels = torch.as_tensor(labels, device=logits.device)
            parts["prediction_loss"] = F.cross_entropy(logits.float(), labels)
            loss = parts["prediction_loss"]

        if loss is not None and config.composition_weight > 0:
            parts["composition_loss"] = self.composition_loss(context_latent, operations, target_latent, labels)
            loss = loss + config.composition_weight * parts["composition_loss"]

        output = BroJepaOutput(
            loss=loss,
            logits=logits,
            predicted_latent=predicted_latent,
            context_latent=context_latent,
            target_latent=target_latent,
            **parts,
        )
        return output if return_dict else output.to_tuple()


# ------------------------------------------------------------------------------------------ image classification


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


def forget_pretraining_declarations(config) -> None:
    """Drop what a JEPA model's config declares for the JEPA model itself (and a classifier cannot serve): its
    `custom_pipelines` (the family's own tasks call the predictor) and the `AutoModel` entry of `auto_map` (that
    class cannot load a classifier's weights). The classifier declares its own Auto class when it is saved."""
    if "custom_pipelines" in vars(config):
        del config.custom_pipelines
    auto_map = getattr(config, "auto_map", None)
    if auto_map and "AutoModel" in auto_map:
        config.auto_map = {key: value for key, value in auto_map.items() if key != "AutoModel"}


class BroJepaForImageClassification(BroJepaPreTrainedModel):
    """
    A BRo-JEPA encoder with a linear classification head: transformers' `pipeline("image-classification")` runs it
    and `transformers.Trainer` fine-tunes it. `BroJepaForImageClassification.from_pretrained(jepa_folder,
    num_labels=..., id2label=...)` loads the encoder from a trained BRo-JEPA folder and initialises only the head.

    The head sits on one encoder, `config.classifier_encoder`: `"target"`, the EMA target encoder (the space the
    class prototypes are filled in; the default where the model has one), or `"context"`, the online encoder (the
    only one of the supervised baseline). The encoder keeps its checkpoint name (`target_encoder.*` or
    `context_encoder.*`), so a JEPA folder's weights load into it unchanged. What only pre-training needs is left
    out: the other encoder, the predictor, the class prototypes (and the supervised baseline's op-conditioned head).
    The head reads the encoder's latent `(batch, latent_dim)`, the vector `pipeline("image-feature-extraction")`
    returns; with `config.num_labels == 0` the model returns that latent as its logits.

    The loss follows transformers' `config.problem_type`: cross-entropy for integer labels, mean squared error for
    `num_labels == 1` (regression), binary cross-entropy for float multi-hot labels (`"multi_label_classification"`).
    """

    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = BroJepaModel._strict_loading_hint
    # The JEPA model whose folders the classifier starts from (what it may leave out of their checkpoints).
    _pretraining_model_class = BroJepaModel

    def __init__(self, config: BroJepaConfig, classifier_encoder: str | None = None):
        super().__init__(config)
        config.validate()
        if classifier_encoder is not None:
            config.classifier_encoder = classifier_encoder
        self.encoder_attribute = classifier_encoder_attribute(config, config.objective == "jepa")
        setattr(self, self.encoder_attribute, BroJepaEncoder(config))
        self.num_labels = config.num_labels
        self.classifier = nn.Linear(config.latent_dim, config.num_labels) if config.num_labels > 0 else nn.Identity()
        self._encoder_frozen = False
        forget_pretraining_declarations(config)
        self.post_init()

    _check_pixel_values = BroJepaModel._check_pixel_values  # the same checks and messages

    @property
    def encoder(self) -> nn.Module:
        """The encoder the head sits on (`config.classifier_encoder`)."""
        return getattr(self, self.encoder_attribute)

    def freeze_encoder(self, frozen: bool = True):
        """Train the head alone (`frozen=True`: a linear probe trained by gradient descent) or everything again
        (`False`). A frozen encoder stays in eval mode under `train()` too, so normalisation layers keep their
        pretrained statistics. Call it after `from_pretrained` (loading marks every weight trainable). Returns the
        model."""
        self._encoder_frozen = frozen
        self.encoder.requires_grad_(not frozen)
        return self.train(self.training)

    def train(self, mode: bool = True):
        super().train(mode)
        if self._encoder_frozen:
            self.encoder.eval()
        return self

    @torch.no_grad()
    def _reset_head(self):
        """Initialise the head afresh, as construction does: a JEPA model's own module of that name (e.g. BRo-JEPA's
        supervised baseline's op-conditioned head) is not this head, even where its shape fits."""
        for parameter in self.classifier.parameters():
            parameter._is_hf_initialized = False
        self._init_weights(self.classifier)

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
            Normalised images (`BroJepaImageProcessor`); checked as `BroJepaModel` checks them.
        labels (`torch.LongTensor` of shape `(batch,)`, or float `(batch, num_labels)`, *optional*):
            Class indices (cross-entropy), targets for `num_labels == 1` (regression) or multi-hot float labels
            (`problem_type="multi_label_classification"`); with them the output holds the loss. Other keyword
            arguments reach transformers' loss (`num_items_in_batch`, which `Trainer` passes).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        latent = self.encoder(self._check_pixel_values(pixel_values, "pixel_values"))
        logits = self.classifier(latent)
        loss = None if labels is None else self.loss_function(labels, logits, self.config, **kwargs)
        output = ImageClassifierOutput(loss=loss, logits=logits)
        return output if return_dict else output.to_tuple()


__all__ = ["BroJepaForImageClassification", "BroJepaModel", "BroJepaPreTrainedModel", "BroJepaOutput"]
