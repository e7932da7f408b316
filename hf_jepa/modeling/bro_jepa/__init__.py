from .configuration_bro_jepa import BroJepaConfig
from .image_processing_bro_jepa import BroJepaImageProcessor
from .modeling_bro_jepa import BroJepaModel, BroJepaOutput, BroJepaPreTrainedModel

__all__ = ["BroJepaConfig", "BroJepaImageProcessor", "BroJepaModel", "BroJepaOutput", "BroJepaPreTrainedModel"]
