"""JEPA-Reasoner family: the latent reasoner, its Mono/Dual Talkers and the coupled baselines (COCONUT, plain LM).

Importing this package registers every config and model with the transformers Auto classes, and marks them for
trust_remote_code export (`save_pretrained` copies the modeling files and writes `auto_map`).
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .configuration_jepa_reasoner import (
    CoconutConfig,
    CoupledTransformerConfig,
    DualTalkerConfig,
    JepaBlockStackConfig,
    JepaReasonerConfig,
    JepaReasonerWithTalkerConfig,
    JepaTalkerConfig,
    MonoTalkerConfig,
)
from .modeling_jepa_reasoner import (
    JepaReasonerModel,
    JepaReasonerOutput,
    JepaReasonerPreTrainedModel,
    scaled_cosine_loss,
)
from .modeling_jepa_reasoner_baselines import CoconutLM, CoconutOutput, CoupledTransformerLM
from .modeling_jepa_reasoner_blocks import (
    HybridNorm,
    JepaTalkerOutput,
    decoder_inputs_from_answers,
    hybrid_normalize,
    residual_noise,
)
from .modeling_jepa_talker import DualTalkerModel, JepaReasonerWithTalker, MonoTalkerModel

AutoConfig.register(JepaReasonerConfig.model_type, JepaReasonerConfig, exist_ok=True)
AutoModel.register(JepaReasonerConfig, JepaReasonerModel, exist_ok=True)
AutoConfig.register(JepaReasonerWithTalkerConfig.model_type, JepaReasonerWithTalkerConfig, exist_ok=True)
AutoModel.register(JepaReasonerWithTalkerConfig, JepaReasonerWithTalker, exist_ok=True)
# The pair generates text: `pipeline("text-generation")` loads it through AutoModelForCausalLM.
AutoModelForCausalLM.register(JepaReasonerWithTalkerConfig, JepaReasonerWithTalker, exist_ok=True)
for _config, _model in (
    (MonoTalkerConfig, MonoTalkerModel),
    (DualTalkerConfig, DualTalkerModel),
    (CoupledTransformerConfig, CoupledTransformerLM),
    (CoconutConfig, CoconutLM),
):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)
    AutoModelForCausalLM.register(_config, _model, exist_ok=True)

# trust_remote_code export. The generative models are exported for AutoModelForCausalLM; their __init__ pre-seeds
# `config.auto_map["AutoModel"]` too (only the registered Auto class is written by save_pretrained).
JepaReasonerConfig.register_for_auto_class()
JepaReasonerModel.register_for_auto_class("AutoModel")
# The pair: its sub-configs (reasoner, Mono/Dual Talker) live in the same configuration file, which the exported
# config resolves by model_type itself, so the exported directory needs only these two entries in auto_map.
JepaReasonerWithTalkerConfig.register_for_auto_class()
JepaReasonerWithTalker.register_for_auto_class("AutoModel")
for _config, _model in (
    (MonoTalkerConfig, MonoTalkerModel),
    (DualTalkerConfig, DualTalkerModel),
    (CoupledTransformerConfig, CoupledTransformerLM),
    (CoconutConfig, CoconutLM),
):
    _config.register_for_auto_class()
    _model.register_for_auto_class("AutoModelForCausalLM")
del _config, _model


__all__ = [
    "CoconutConfig",
    "CoconutLM",
    "CoconutOutput",
    "CoupledTransformerConfig",
    "CoupledTransformerLM",
    "DualTalkerConfig",
    "DualTalkerModel",
    "HybridNorm",
    "JepaBlockStackConfig",
    "JepaReasonerConfig",
    "JepaReasonerModel",
    "JepaReasonerOutput",
    "JepaReasonerPreTrainedModel",
    "JepaReasonerWithTalker",
    "JepaReasonerWithTalkerConfig",
    "JepaTalkerConfig",
    "JepaTalkerOutput",
    "MonoTalkerConfig",
    "MonoTalkerModel",
    "decoder_inputs_from_answers",
    "hybrid_normalize",
    "residual_noise",
    "scaled_cosine_loss",
]
