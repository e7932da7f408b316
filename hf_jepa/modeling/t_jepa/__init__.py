from .configuration_t_jepa import TJepaConfig, bert_large_config
from .modeling_t_jepa import TJepaModel, TJepaOutput, TJepaPreTrainedModel

__all__ = ["TJepaConfig", "TJepaModel", "TJepaOutput", "TJepaPreTrainedModel", "bert_large_config"]
