"""T-JEPA configuration: the text analogue of I-JEPA on a BERT backbone, and the paper's text baselines."""

import inspect

from transformers import BertConfig, PretrainedConfig

OBJECTIVES = ("jepa", "mlm", "vicreg", "barlow_twins", "byol")
LOSS_TYPES = ("mse", "smooth_l1")


def bert_large_config(**overrides) -> BertConfig:
    """BERT-Large: 24 layers, hidden 1024, 16 heads, 4096 intermediate, the uncased WordPiece vocabulary (30,522)."""
    kwargs = dict(
        vocab_size=30522,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        max_position_embeddings=512,
    )
    kwargs.update(overrides)
    return BertConfig(**kwargs)


# Copied from hf_jepa.modeling.i_jepa.configuration_i_jepa.preset_config
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


class TJepaConfig(PretrainedConfig):
    r"""
    Configuration of a T-JEPA model: a context encoder (BERT) reads a sentence whose target spans are hidden from
    attention, a narrow transformer predictor places learned mask tokens with position embeddings at the target
    positions, and regresses the EMA target encoder's (layer-normalised) representations of the full sentence there.

    `objective` switches the same backbone to the paper's text baselines: `"mlm"` (BERT masked language modelling on
    the same spans), and the joint-embedding objectives `"vicreg"`, `"barlow_twins"` and `"byol"` on two views of a
    sentence (two independent span maskings), each with an MLP projector on the mean-pooled encoder output.

    Args:
        backbone_config (`BertConfig` or `dict`, *optional*): the encoder; BERT-Large by default.
        objective (`str`, *optional*, defaults to `"jepa"`): one of `"jepa"`, `"mlm"`, `"vicreg"`, `"barlow_twins"`,
            `"byol"`.
        predictor_hidden_size, predictor_num_layers, predictor_num_heads (`int`): the JEPA predictor (I-JEPA: a
            narrower width than the encoder, here 384 by default).
        predictor_mlp_ratio (`float`, *optional*, defaults to 4.0): MLP width of predictor blocks / their width.
        mask_ratio (`float`, *optional*, defaults to 0.25): fraction of a sentence's tokens in target spans.
        num_spans (`int`, *optional*, defaults to 4): target spans per sentence (fewer when the sentence is short).
        min_span_length, max_span_length (`int`): target span lengths in tokens.
        loss_type (`str`, *optional*, defaults to `"mse"`): the JEPA regression loss, squared error (the paper) or
            smooth L1 (I-JEPA's reference code).
        normalize_targets (`bool`, *optional*, defaults to `True`): layer-normalise target representations (no
            affine), as I-JEPA does.
        projector_hidden_size, projector_output_size (`int`): the joint-embedding baselines' projector.
        byol_predictor_hidden_size (`int`): hidden width of BYOL's online predictor.
        vicreg_weights (`list[float]`): invariance, variance, covariance weights (25, 25, 1).
        barlow_twins_lambda (`float`, *optional*, defaults to 0.005): off-diagonal weight of Barlow Twins.
        ema_momentum, ema_momentum_end (`float`): EMA target momentum schedule (I-JEPA: 0.996 -> 1.0).
        mask_token_id, pad_token_id (`int`): token ids of `[MASK]` and `[PAD]` in the tokenizer the model is used with.
        initializer_range (`float`, *optional*, defaults to 0.02): std of the truncated-normal init of new weights.
    """

    model_type = "t_jepa"
    sub_configs = {"backbone_config": BertConfig}

    def __init__(
        self,
        backbone_config: BertConfig | dict | None = None,
        objective: str = "jepa",
        predictor_hidden_size: int = 384,
        predictor_num_layers: int = 6,
        predictor_num_heads: int = 12,
        predictor_mlp_ratio: float = 4.0,
        mask_ratio: float = 0.25,
        num_spans: int = 4,
        min_span_length: int = 2,
        max_span_length: int = 6,
        loss_type: str = "mse",
        normalize_targets: bool = True,
        projector_hidden_size: int = 2048,
        projector_output_size: int = 2048,
        byol_predictor_hidden_size: int = 512,
        vicreg_weights: list | None = None,
        barlow_twins_lambda: float = 0.005,
        ema_momentum: float = 0.996,
        ema_momentum_end: float = 1.0,
        mask_token_id: int = 103,
        pad_token_id: int = 0,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        if backbone_config is None:
            backbone_config = bert_large_config()
        elif isinstance(backbone_config, dict):
            backbone_config = BertConfig(**{k: v for k, v in backbone_config.items() if k != "model_type"})
        if not isinstance(backbone_config, BertConfig):  # before PretrainedConfig.__init__, which would fail on it
            raise ValueError(f"TJepaConfig.backbone_config must be a BertConfig, got {type(backbone_config).__name__}")
        self.backbone_config = backbone_config
        self.objective = objective
        self.predictor_hidden_size = predictor_hidden_size
        self.predictor_num_layers = predictor_num_layers
        self.predictor_num_heads = predictor_num_heads
        self.predictor_mlp_ratio = predictor_mlp_ratio
        self.mask_ratio = mask_ratio
        self.num_spans = num_spans
        self.min_span_length = min_span_length
        self.max_span_length = max_span_length
        self.loss_type = loss_type
        self.normalize_targets = normalize_targets
        self.projector_hidden_size = projector_hidden_size
        self.projector_output_size = projector_output_size
        self.byol_predictor_hidden_size = byol_predictor_hidden_size
        self.vicreg_weights = list(vicreg_weights) if vicreg_weights is not None else [25.0, 25.0, 1.0]
        self.barlow_twins_lambda = barlow_twins_lambda
        self.ema_momentum = ema_momentum
        self.ema_momentum_end = ema_momentum_end
        self.mask_token_id = mask_token_id
        self.initializer_range = initializer_range
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.validate()

    def validate(self):
        """Raise `ValueError` naming the first invalid field."""
        if not isinstance(self.backbone_config, BertConfig):
            raise ValueError(
                f"TJepaConfig.backbone_config must be a BertConfig, got {type(self.backbone_config).__name__}"
            )
        if self.objective not in OBJECTIVES:
            raise ValueError(f"TJepaConfig.objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"TJepaConfig.loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        for field in (
            "predictor_hidden_size",
            "predictor_num_layers",
            "predictor_num_heads",
            "num_spans",
            "min_span_length",
            "max_span_length",
            "projector_hidden_size",
            "projector_output_size",
            "byol_predictor_hidden_size",
        ):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"TJepaConfig.{field} must be a positive integer, got {value!r}")
        if self.predictor_hidden_size % self.predictor_num_heads:
            raise ValueError(
                f"TJepaConfig.predictor_hidden_size ({self.predictor_hidden_size}) must be divisible by "
                f"predictor_num_heads ({self.predictor_num_heads})"
            )
        if self.min_span_length > self.max_span_length:
            raise ValueError(
                f"TJepaConfig.min_span_length ({self.min_span_length}) must not exceed max_span_length ({self.max_span_length})"
            )
        if not 0.0 < self.mask_ratio < 1.0:
            raise ValueError(f"TJepaConfig.mask_ratio must lie in (0, 1), got {self.mask_ratio!r}")
        if len(self.vicreg_weights) != 3 or any(w < 0 for w in self.vicreg_weights):
            raise ValueError(f"TJepaConfig.vicreg_weights must be 3 non-negative numbers, got {self.vicreg_weights!r}")
        for field in ("ema_momentum", "ema_momentum_end"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                raise ValueError(f"TJepaConfig.{field} must lie in [0, 1], got {getattr(self, field)!r}")
        vocab = self.backbone_config.vocab_size
        for field in ("mask_token_id", "pad_token_id"):
            value = getattr(self, field)
            if not isinstance(value, int) or not 0 <= value < vocab:
                raise ValueError(f"TJepaConfig.{field} must be a token id in [0, {vocab}), got {value!r}")

    @property
    def hidden_size(self) -> int:
        return self.backbone_config.hidden_size

    @property
    def uses_target_encoder(self) -> bool:
        return self.objective in ("jepa", "byol")

    # Presets: `tiny` (seconds-scale, for tests), `cpu_fast` (what the CPU reproduction trains), `full` (the paper's
    # size). Each takes `**overrides`: TJepaConfig fields, and BertConfig fields (`vocab_size`, `hidden_size`,
    # `num_hidden_layers`...) which go to the backbone, or `backbone_config=` to replace it (`preset_config`).

    @classmethod
    def tiny(cls, **overrides) -> "TJepaConfig":
        """A seconds-scale preset for tests: a 2-layer, 32-wide BERT with a 512-token vocabulary. `overrides`:
        TJepaConfig fields, or BertConfig fields for the backbone."""
        backbone = dict(
            vocab_size=512,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
        fields = dict(
            predictor_hidden_size=32,
            predictor_num_layers=2,
            predictor_num_heads=2,
            projector_hidden_size=64,
            projector_output_size=64,
            byol_predictor_hidden_size=32,
            ema_momentum=0.99,
            mask_token_id=4,
        )
        return preset_config(cls, BertConfig, BertConfig, backbone, fields, overrides)

    @classmethod
    def cpu_fast(cls, **overrides) -> "TJepaConfig":
        """A 4-layer, 256-wide BERT with a locally trained 8k WordPiece vocabulary: the size the reproduction trains
        on a 2-core CPU. `mask_token_id=4` is `[MASK]` in the tokenizers `hf_jepa.data` trains. `overrides`:
        TJepaConfig fields, or BertConfig fields (e.g. `vocab_size`) for the backbone."""
        backbone = dict(
            vocab_size=8000,
            hidden_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=1024,
            max_position_embeddings=128,
        )
        fields = dict(
            predictor_hidden_size=128,
            predictor_num_layers=2,
            predictor_num_heads=4,
            projector_hidden_size=512,
            projector_output_size=512,
            byol_predictor_hidden_size=256,
            ema_momentum=0.99,
            mask_token_id=4,
        )
        return preset_config(cls, BertConfig, BertConfig, backbone, fields, overrides)

    @classmethod
    def full(cls, **overrides) -> "TJepaConfig":
        """The paper-size T-JEPA: the class defaults (a BERT-Large backbone). `overrides`: TJepaConfig fields, or
        BertConfig fields for the backbone."""
        return preset_config(cls, BertConfig, bert_large_config, {}, {}, overrides)


__all__ = ["TJepaConfig", "bert_large_config"]
