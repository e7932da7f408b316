from .configuration_bro_jepa import BroJepaConfig
from .image_processing_bro_jepa import BroJepaImageProcessor
from .modeling_bro_jepa import BroJepaForImageClassification, BroJepaModel, BroJepaOutput, BroJepaPreTrainedModel

__all__ = [
    "BroJepaConfig",
    "BroJepaForImageClassification",
    "BroJepaImageProcessor",
    "BroJepaModel",
    "BroJepaOutput",
    "BroJepaPreTrainedModel",
]
