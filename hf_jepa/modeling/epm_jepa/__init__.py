from .configuration_epm_jepa import EpmJepaConfig
from .image_processing_epm_jepa import EpmJepaImageProcessor
from .modeling_epm_jepa import EpmJepaModel, EpmJepaOutput, EpmJepaPreTrainedModel

__all__ = ["EpmJepaConfig", "EpmJepaImageProcessor", "EpmJepaModel", "EpmJepaOutput", "EpmJepaPreTrainedModel"]
