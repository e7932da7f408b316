from .configuration_epm_jepa import EpmJepaConfig
from .image_processing_epm_jepa import EpmJepaImageProcessor
from .modeling_epm_jepa import EpmJepaForImageClassification, EpmJepaModel, EpmJepaOutput, EpmJepaPreTrainedModel

__all__ = [
    "EpmJepaConfig",
    "EpmJepaForImageClassification",
    "EpmJepaImageProcessor",
    "EpmJepaModel",
    "EpmJepaOutput",
    "EpmJepaPreTrainedModel",
]
