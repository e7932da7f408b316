from .configuration_t_jepa import TJepaConfig, bert_large_config
from .modeling_t_jepa import TJepaForSequenceClassification, TJepaModel, TJepaOutput, TJepaPreTrainedModel

__all__ = [
    "TJepaConfig",
    "TJepaForSequenceClassification",
    "TJepaModel",
    "TJepaOutput",
    "TJepaPreTrainedModel",
    "bert_large_config",
]
