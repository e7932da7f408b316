from .configuration_epm_jepa import EpmJepaConfig
from .modeling_epm_jepa import EpmJepaModel, EpmJepaOutput, EpmJepaPreTrainedModel

__all__ = ["EpmJepaConfig", "EpmJepaModel", "EpmJepaOutput", "EpmJepaPreTrainedModel"]
