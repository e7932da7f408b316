from .configuration_i_jepa import IJepaConfig, vit_huge_config
from .modeling_i_jepa import IJepaModel, IJepaOutput, IJepaPreTrainedModel

__all__ = ["IJepaConfig", "IJepaModel", "IJepaOutput", "IJepaPreTrainedModel", "vit_huge_config"]
