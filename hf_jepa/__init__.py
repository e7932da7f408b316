"""hf-jepa: JEPA research systems as first-class Hugging Face citizens.

Importing the package registers every config and model with the transformers Auto classes and every pipeline task.
"""

from transformers import AutoConfig, AutoImageProcessor, AutoModel

from .modeling.bro_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel, BroJepaOutput
from .modeling.epm_jepa import EpmJepaConfig, EpmJepaModel, EpmJepaOutput
from .modeling.i_jepa import IJepaConfig, IJepaModel, IJepaOutput
# The JEPA-Reasoner family registers its own configs/models (five model types) on import.
from .modeling.jepa_reasoner import (
    CoconutConfig,
    CoconutLM,
    CoupledTransformerConfig,
    CoupledTransformerLM,
    DualTalkerConfig,
    DualTalkerModel,
    JepaReasonerConfig,
    JepaReasonerModel,
    JepaReasonerWithTalker,
    JepaReasonerWithTalkerConfig,
    MonoTalkerConfig,
    MonoTalkerModel,
)
from .modeling.t_jepa import TJepaConfig, TJepaModel, TJepaOutput


__version__ = "0.1.0"

AutoConfig.register(BroJepaConfig.model_type, BroJepaConfig, exist_ok=True)
AutoModel.register(BroJepaConfig, BroJepaModel, exist_ok=True)
AutoImageProcessor.register(BroJepaConfig, image_processor_classes={"pil": BroJepaImageProcessor}, exist_ok=True)
AutoConfig.register(EpmJepaConfig.model_type, EpmJepaConfig, exist_ok=True)
AutoModel.register(EpmJepaConfig, EpmJepaModel, exist_ok=True)
AutoConfig.register(IJepaConfig.model_type, IJepaConfig, exist_ok=True)
AutoModel.register(IJepaConfig, IJepaModel, exist_ok=True)
AutoConfig.register(TJepaConfig.model_type, TJepaConfig, exist_ok=True)
AutoModel.register(TJepaConfig, TJepaModel, exist_ok=True)

# trust_remote_code export: `save_pretrained` / `push_to_hub` copy the self-contained modeling folder's files next to
# the weights and write `auto_map`, so a saved directory or Hub repo loads with `AutoModel.from_pretrained(path,
# trust_remote_code=True)` (and `AutoImageProcessor`, from preprocessor_config.json's own `auto_map`) where hf_jepa
# is not installed. Where it is installed, the registered classes above are used (no remote code runs).
BroJepaConfig.register_for_auto_class()
BroJepaModel.register_for_auto_class("AutoModel")
BroJepaImageProcessor.register_for_auto_class("AutoImageProcessor")
EpmJepaConfig.register_for_auto_class()
EpmJepaModel.register_for_auto_class("AutoModel")
IJepaConfig.register_for_auto_class()
IJepaModel.register_for_auto_class("AutoModel")
TJepaConfig.register_for_auto_class()
TJepaModel.register_for_auto_class("AutoModel")

from . import pipelines  # noqa: E402,F401  (registers the pipeline tasks)


__all__ = [
    "BroJepaConfig",
    "CoconutConfig",
    "CoconutLM",
    "CoupledTransformerConfig",
    "CoupledTransformerLM",
    "DualTalkerConfig",
    "DualTalkerModel",
    "JepaReasonerConfig",
    "JepaReasonerModel",
    "JepaReasonerWithTalker",
    "JepaReasonerWithTalkerConfig",
    "MonoTalkerConfig",
    "MonoTalkerModel",
    "BroJepaImageProcessor",
    "BroJepaModel",
    "BroJepaOutput",
    "EpmJepaConfig",
    "EpmJepaModel",
    "EpmJepaOutput",
    "IJepaConfig",
    "IJepaModel",
    "IJepaOutput",
    "TJepaConfig",
    "TJepaModel",
    "TJepaOutput",
    "__version__",
]
