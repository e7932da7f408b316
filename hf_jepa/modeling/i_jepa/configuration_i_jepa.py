"""I-JEPA configuration: the image baseline (Assran et al., 2023) on a transformers ViT backbone."""

import inspect

from transformers import PretrainedConfig, ViTConfig

LOSS_TYPES = ("smooth_l1", "mse")
INIT_SCHEMES = ("trunc_normal", "xavier_uniform", "pytorch_default")
# "sincos": the fixed 2-D sin-cos tables recomputed from the grid (not saved); "stored": fixed tables saved with the
# weights, for a converted checkpoint's own tables (transformers' IJepaModel learns its position embeddings) or tables
# interpolated to another image size, which are no longer the sin-cos table of the new grid.
POSITION_EMBEDDING_TYPES = ("sincos", "stored")
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
MNIST_MEAN = [0.1307]
MNIST_STD = [0.3081]


def vit_huge_config(**overrides) -> ViTConfig:
    """I-JEPA's ViT-H/16 at 224 px: hidden 1280, 32 layers, 16 heads, MLP 5120, patch 16 (a 14 x 14 grid), 3
    channels, qkv bias, LayerNorm eps 1e-6 (the reference code's `partial(nn.LayerNorm, eps=1e-6)`), exact GELU."""
    kwargs = dict(
        hidden_size=1280,
        num_hidden_layers=32,
        num_attention_heads=16,
        intermediate_size=5120,
        image_size=224,
        patch_size=16,
        num_channels=3,
        qkv_bias=True,
        layer_norm_eps=1e-6,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    kwargs.update(overrides)
    return ViTConfig(**kwargs)


def preset_config(config_class, backbone_class, backbone_factory, backbone: dict, fields: dict, overrides: dict):
    """A preset of `config_class`: its `fields` and the backbone `backbone_factory(**backbone)`, with `overrides`.

    How an override is routed: a name that `config_class` takes (e.g. `predictor_hidden_size`, `objective`) sets that
    field; a name that only the backbone config (`backbone_class`) has (e.g. `hidden_size`, `num_hidden_layers`,
    `image_size`, `vocab_size`) sets the backbone's field; `backbone_config=` (a config or a dict) replaces the preset's
    backbone, and backbone fields given with it apply on top of it.
    """
    own = set(inspect.signature(config_class.__init__).parameters)
    generic = set(inspect.signature(PretrainedConfig.__init__).parameters)
    backbone_fields = set(inspect.signature(backbone_class.__init__).parameters) - own - generic
    kwargs = {**fields, **{k: v for k, v in overrides.items() if k not in backbone_fields}}
    for_backbone = {k: v for k, v in overrides.items() if k in backbone_fields}
    if "backbone_config" not in kwargs:
        kwargs["backbone_config"] = backbone_factory(**{**backbone, **for_backbone})
    elif for_backbone:
        base = kwargs["backbone_config"]
        base = base.to_dict() if isinstance(base, PretrainedConfig) else dict(base)
        merged = {**base, **for_backbone}
        kwargs["backbone_config"] = backbone_class(**{k: v for k, v in merged.items() if k != "model_type"})
    return config_class(**kwargs)


def _as_float_list(value):
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return [float(value)]
    return [float(v) for v in value]


class IJepaConfig(PretrainedConfig):
    r"""
    Configuration of an I-JEPA model: a ViT context encoder reads the context patches only (the target blocks and
    everything outside the context block are never embedded), a narrow transformer predictor places a learned mask
    token with fixed 2-D sin-cos position embeddings at each target block's positions, and regresses the EMA target
    encoder's layer-normalised representations of the full image there (one predictor pass per target block).

    Distinct from transformers' own encoder-only `IJepaConfig` (`model_type="ijepa"`): this is `model_type="i_jepa"`.

    Args:
        backbone_config (`ViTConfig` or `dict`, *optional*): the encoder (context and target encoders are two copies);
            I-JEPA's ViT-H/16 at 224 px by default (`vit_huge_config()`). Its `image_size` and `patch_size` must be
            integers (square images, square patches); its CLS token and learned position embeddings are not used.
        predictor_hidden_size (`int`, *optional*, defaults to 384): predictor width (I-JEPA: 384).
        predictor_num_layers (`int`, *optional*, defaults to 12): predictor depth (I-JEPA ViT-H: 12).
        predictor_num_heads (`int`, *optional*, defaults to 16): predictor heads (I-JEPA uses the encoder's count).
        predictor_mlp_ratio (`float`, *optional*, defaults to 4.0): MLP width of predictor blocks / their width.
        num_target_blocks (`int`, *optional*, defaults to 4): target blocks per image for the multi-block sampler.
        target_scale, target_aspect_ratio (`list[float]`): [min, max] area fraction (0.15, 0.2) and aspect ratio
            (0.75, 1.5) of a target block.
        context_scale (`list[float]`): [min, max] area fraction of the (square) context block, (0.85, 1.0).
        min_keep (`int`, *optional*, defaults to 4): fewest patches a context or target block may keep.
        loss_type (`str`, *optional*, defaults to `"smooth_l1"`): `"smooth_l1"` (the I-JEPA reference code) or `"mse"`.
        normalize_targets (`bool`, *optional*, defaults to `True`): layer-normalise target representations over the
            feature dimension (no affine), as I-JEPA does.
        ema_momentum, ema_momentum_end (`float`): EMA target momentum schedule, linear 0.996 -> 1.0 (I-JEPA).
        pixel_mean, pixel_std (`list[float]`): per-channel normalisation the model expects its `pixel_values` to have
            had (ImageNet statistics by default, MNIST's 0.1307 / 0.3081 in the MNIST presets). The model does not
            normalise: the data pipeline does.
        initializer_range (`float`, *optional*, defaults to 0.02): std of the truncated-normal init of new weights
            (and of the predictor's mask token).
        position_embedding_type (`str`, *optional*, defaults to `"sincos"`): the encoders' and the predictor's
            position tables: `"sincos"` (fixed 2-D sin-cos, recomputed from the grid, not saved) or `"stored"` (fixed
            tables saved with the weights: a converted checkpoint's own, or ones interpolated to another image size).
            Neither is trained, as in I-JEPA, whose `pos_embed` has `requires_grad=False`.
        predictor_layer_norm_eps (`float`, *optional*): the predictor's LayerNorm eps; None (default) uses the
            backbone's `layer_norm_eps` (I-JEPA uses 1e-6 for both).
        converted_from (`dict`, *optional*): set by `hf-jepa convert`: where the weights came from (`source`,
            `layout`) and which parts were converted or freshly initialised (`predictor`: `"converted"` or
            `"initialised"`). None for models hf-jepa trained from scratch.
        init_scheme (`str`, *optional*, defaults to `"trunc_normal"`): init of linear and patch-embedding weights:
            `"trunc_normal"` (I-JEPA's reference, std `initializer_range`, zero biases; made for ViT-H's width),
            `"xavier_uniform"` (MAE's / the JAX ViT's, zero biases) or `"pytorch_default"` (`nn.Linear`'s own:
            weights and biases U(+-1 / sqrt(fan_in))); the `tiny` and `cpu_fast` presets use `"pytorch_default"`. At
            width 128 with 4 x 4 patches std 0.02 starts the encoders as position-only maps and pre-training collapses;
            Xavier (fan-average, so the separate q/k/v and the MLP's down-projection start 1.7-2.2x above fan-in scale)
            no longer collapses but makes the targets easy to predict (loss ~0.05 by step 300, half the reference's)
            and the pooled embeddings lose rank as they train (research/i_jepa/health/README.md).
    """

    model_type = "i_jepa"
    sub_configs = {"backbone_config": ViTConfig}

    def __init__(
        self,
        backbone_config: ViTConfig | dict | None = None,
        predictor_hidden_size: int = 384,
        predictor_num_layers: int = 12,
        predictor_num_heads: int = 16,
        predictor_mlp_ratio: float = 4.0,
        num_target_blocks: int = 4,
        target_scale: list | tuple | None = None,
        target_aspect_ratio: list | tuple | None = None,
        context_scale: list | tuple | None = None,
        min_keep: int = 4,
        loss_type: str = "smooth_l1",
        normalize_targets: bool = True,
        ema_momentum: float = 0.996,
        ema_momentum_end: float = 1.0,
        pixel_mean: list | float | None = None,
        pixel_std: list | float | None = None,
        initializer_range: float = 0.02,
        init_scheme: str = "trunc_normal",
        position_embedding_type: str = "sincos",
        predictor_layer_norm_eps: float | None = None,
        converted_from: dict | None = None,
        **kwargs,
    ):
        if backbone_config is None:
            backbone_config = vit_huge_config()
        elif isinstance(backbone_config, dict):
            backbone_config = ViTConfig(**{k: v for k, v in backbone_config.items() if k != "model_type"})
        self.backbone_config = backbone_config
        self.predictor_hidden_size = predictor_hidden_size
        self.predictor_num_layers = predictor_num_layers
        self.predictor_num_heads = predictor_num_heads
        self.predictor_mlp_ratio = predictor_mlp_ratio
        self.num_target_blocks = num_target_blocks
        self.target_scale = _as_float_list(target_scale) if target_scale is not None else [0.15, 0.2]
        self.target_aspect_ratio = (
            _as_float_list(target_aspect_ratio) if target_aspect_ratio is not None else [0.75, 1.5]
        )
        self.context_scale = _as_float_list(context_scale) if context_scale is not None else [0.85, 1.0]
        self.min_keep = min_keep
        self.loss_type = loss_type
        self.normalize_targets = normalize_targets
        self.ema_momentum = ema_momentum
        self.ema_momentum_end = ema_momentum_end
        channels = getattr(backbone_config, "num_channels", 3)
        default_mean, default_std = (MNIST_MEAN, MNIST_STD) if channels == 1 else (IMAGENET_MEAN, IMAGENET_STD)
        self.pixel_mean = _as_float_list(pixel_mean) if pixel_mean is not None else list(default_mean)
        self.pixel_std = _as_float_list(pixel_std) if pixel_std is not None else list(default_std)
        self.initializer_range = initializer_range
        self.init_scheme = init_scheme
        self.position_embedding_type = position_embedding_type
        self.predictor_layer_norm_eps = predictor_layer_norm_eps
        self.converted_from = dict(converted_from) if converted_from is not None else None
        super().__init__(**kwargs)
        self.validate()

    def validate(self):
        """Raise `ValueError` naming the first invalid field."""
        backbone = self.backbone_config
        if not isinstance(backbone, ViTConfig):
            raise ValueError(f"IJepaConfig.backbone_config must be a ViTConfig, got {type(backbone).__name__}")
        for field in (
            "image_size",
            "patch_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "num_channels",
        ):
            value = getattr(backbone, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(
                    f"IJepaConfig.backbone_config.{field} must be a positive integer (square images and patches), "
                    f"got {value!r}"
                )
        if backbone.image_size % backbone.patch_size:
            raise ValueError(
                f"IJepaConfig.backbone_config.image_size ({backbone.image_size}) must be divisible by "
                f"backbone_config.patch_size ({backbone.patch_size})"
            )
        if backbone.hidden_size % backbone.num_attention_heads:
            raise ValueError(
                f"IJepaConfig.backbone_config.hidden_size ({backbone.hidden_size}) must be divisible by "
                f"backbone_config.num_attention_heads ({backbone.num_attention_heads})"
            )
        if backbone.hidden_size % 4:
            raise ValueError(
                f"IJepaConfig.backbone_config.hidden_size ({backbone.hidden_size}) must be divisible by 4 "
                "(2-D sin-cos position embeddings)"
            )
        for field in (
            "predictor_hidden_size",
            "predictor_num_layers",
            "predictor_num_heads",
            "num_target_blocks",
            "min_keep",
        ):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"IJepaConfig.{field} must be a positive integer, got {value!r}")
        if self.predictor_hidden_size % self.predictor_num_heads:
            raise ValueError(
                f"IJepaConfig.predictor_hidden_size ({self.predictor_hidden_size}) must be divisible by "
                f"predictor_num_heads ({self.predictor_num_heads})"
            )
        if self.predictor_hidden_size % 4:
            raise ValueError(
                f"IJepaConfig.predictor_hidden_size ({self.predictor_hidden_size}) must be divisible by 4 "
                "(2-D sin-cos position embeddings)"
            )
        if not self.predictor_mlp_ratio > 0:
            raise ValueError(f"IJepaConfig.predictor_mlp_ratio must be > 0, got {self.predictor_mlp_ratio!r}")
        for field, upper in (("target_scale", 1.0), ("context_scale", 1.0), ("target_aspect_ratio", None)):
            value = getattr(self, field)
            if len(value) != 2 or not 0.0 < value[0] <= value[1] or (upper is not None and value[1] > upper):
                bound = f"0 < min <= max <= {upper}" if upper is not None else "0 < min <= max"
                raise ValueError(f"IJepaConfig.{field} must be [min, max] with {bound}, got {value!r}")
        if self.init_scheme not in INIT_SCHEMES:
            raise ValueError(f"IJepaConfig.init_scheme must be one of {INIT_SCHEMES}, got {self.init_scheme!r}")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"IJepaConfig.position_embedding_type must be one of {POSITION_EMBEDDING_TYPES}, got "
                f"{self.position_embedding_type!r}"
            )
        eps = self.predictor_layer_norm_eps
        if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0):
            raise ValueError(f"IJepaConfig.predictor_layer_norm_eps must be None or a number > 0, got {eps!r}")
        if self.converted_from is not None and not isinstance(self.converted_from, dict):
            raise ValueError(f"IJepaConfig.converted_from must be None or a dict, got {self.converted_from!r}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"IJepaConfig.loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        for field in ("ema_momentum", "ema_momentum_end"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                raise ValueError(f"IJepaConfig.{field} must lie in [0, 1], got {getattr(self, field)!r}")
        channels = backbone.num_channels
        for field in ("pixel_mean", "pixel_std"):
            if len(getattr(self, field)) != channels:
                raise ValueError(
                    f"IJepaConfig.{field} must hold one value per channel ({channels}), got {getattr(self, field)!r}"
                )
        if any(s <= 0 for s in self.pixel_std):
            raise ValueError(f"IJepaConfig.pixel_std must be > 0, got {self.pixel_std!r}")

    @property
    def hidden_size(self) -> int:
        return self.backbone_config.hidden_size

    @property
    def num_channels(self) -> int:
        return self.backbone_config.num_channels

    @property
    def image_size(self) -> int:
        return self.backbone_config.image_size

    @property
    def patch_size(self) -> int:
        return self.backbone_config.patch_size

    @property
    def predictor_eps(self) -> float:
        """The predictor's LayerNorm eps: `predictor_layer_norm_eps`, else the backbone's `layer_norm_eps`."""
        eps = self.predictor_layer_norm_eps
        return float(self.backbone_config.layer_norm_eps if eps is None else eps)

    @property
    def grid_size(self) -> int:
        """Patches per side."""
        return self.backbone_config.image_size // self.backbone_config.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid_size**2

    # Presets: `tiny` (seconds-scale, for tests), `cpu_fast` (what the CPU reproduction trains), `full` (the paper's
    # size). Each takes `**overrides`: IJepaConfig fields, and ViTConfig fields (`hidden_size`, `num_hidden_layers`,
    # `image_size`, `patch_size`...) which go to the backbone, or `backbone_config=` to replace it (`preset_config`).

    @classmethod
    def tiny(cls, **overrides) -> "IJepaConfig":
        """A seconds-scale preset for tests: MNIST 28 x 28, patch 7 (a 4 x 4 grid), a 2-layer, 32-wide ViT, a
        2-layer, 16-wide predictor. `overrides`: IJepaConfig fields, or ViTConfig fields for the backbone."""
        backbone = dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=28,
            patch_size=7,
            num_channels=1,
            layer_norm_eps=1e-6,
        )
        fields = dict(
            predictor_hidden_size=16,
            predictor_num_layers=2,
            predictor_num_heads=2,
            ema_momentum=0.99,
            init_scheme="pytorch_default",
        )
        return preset_config(cls, ViTConfig, vit_huge_config, backbone, fields, overrides)

    @classmethod
    def cpu_fast(cls, **overrides) -> "IJepaConfig":
        """The size the reproduction trains on a 2-core CPU: MNIST 28 x 28, patch 4 (a 7 x 7 grid), a 4-layer,
        128-wide ViT (4 heads, MLP 512), a 3-layer, 64-wide predictor (4 heads), EMA momentum 0.996 -> 1.0, the MSE loss
        (the paper's), PyTorch's default (fan-in) init and 3 targets of 8-18% with the rest of the image as context.
        `overrides`: IJepaConfig fields, or ViTConfig fields for the backbone."""
        backbone = dict(
            hidden_size=128,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=512,
            image_size=28,
            patch_size=4,
            num_channels=1,
            layer_norm_eps=1e-6,
        )
        fields = dict(
            predictor_hidden_size=64,
            predictor_num_layers=3,
            predictor_num_heads=4,
            ema_momentum=0.996,  # I-JEPA's 0.996 -> 1.0
            # On a 7 x 7 grid I-JEPA's ImageNet masks (4 targets of 15-20%, context 85-100%) leave ~4-12 context
            # patches after the batch-minimum cut; 3 smaller targets with the whole rest as context lift the 1600-step
            # MNIST probe from 0.702 to 0.805 (untrained 0.732; research/i_jepa/health/README.md).
            num_target_blocks=3,
            target_scale=[0.08, 0.18],
            context_scale=[1.0, 1.0],
            loss_type="mse",  # the paper's loss (average squared L2 distance); its code uses smooth L1
            init_scheme="pytorch_default",
        )
        return preset_config(cls, ViTConfig, vit_huge_config, backbone, fields, overrides)

    @classmethod
    def full(cls, **overrides) -> "IJepaConfig":
        """The paper-size I-JEPA (the class defaults: ViT-H/16 at 224 px, a 12-layer, 384-wide predictor).
        `overrides`: IJepaConfig fields, or ViTConfig fields for the backbone."""
        return preset_config(cls, ViTConfig, vit_huge_config, {}, {}, overrides)


__all__ = ["POSITION_EMBEDDING_TYPES", "IJepaConfig", "vit_huge_config"]
