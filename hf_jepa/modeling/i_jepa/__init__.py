from .configuration_i_jepa import IJepaConfig, vit_huge_config
from .image_processing_i_jepa import IJepaImageProcessor
from .modeling_i_jepa import IJepaForImageClassification, IJepaModel, IJepaOutput, IJepaPreTrainedModel

__all__ = [
    "IJepaConfig",
    "IJepaForImageClassification",
    "IJepaImageProcessor",
    "IJepaModel",
    "IJepaOutput",
    "IJepaPreTrainedModel",
    "vit_huge_config",
]
