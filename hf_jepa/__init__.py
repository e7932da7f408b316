"""hf-jepa: JEPA research systems as first-class Hugging Face citizens.

Importing the package registers every config and model with the transformers Auto classes and every pipeline task
(`register_auto_classes`). The one exception is the `hf-jepa` command line, whose `--help` must answer without
importing torch: when the process was started as `hf-jepa`, the CLI registers the classes itself before any command
runs. The public classes below are resolved on first access either way.
"""

import importlib
import os
import sys

from .version import __version__

_EXPORTS = {
    "hf_jepa.modeling.bro_jepa": (
        "BroJepaConfig",
        "BroJepaForImageClassification",
        "BroJepaImageProcessor",
        "BroJepaModel",
        "BroJepaOutput",
    ),
    "hf_jepa.modeling.epm_jepa": (
        "EpmJepaConfig",
        "EpmJepaForImageClassification",
        "EpmJepaImageProcessor",
        "EpmJepaModel",
        "EpmJepaOutput",
    ),
    "hf_jepa.modeling.i_jepa": (
        "IJepaConfig",
        "IJepaForImageClassification",
        "IJepaImageProcessor",
        "IJepaModel",
        "IJepaOutput",
    ),
    "hf_jepa.modeling.jepa_reasoner": (
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
    ),
    "hf_jepa.modeling.t_jepa": ("TJepaConfig", "TJepaForSequenceClassification", "TJepaModel", "TJepaOutput"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
_registered = False


def __getattr__(name: str):
    if name in _MODULE_OF:
        return getattr(importlib.import_module(_MODULE_OF[name]), name)
    raise AttributeError(f"module 'hf_jepa' has no attribute {name!r}")


def register_auto_classes() -> None:
    """Register every config, model and image processor with the transformers Auto classes, mark them for
    trust_remote_code export, and register the pipeline tasks. Idempotent."""
    global _registered
    if _registered:
        return
    from transformers import AutoConfig, AutoImageProcessor, AutoModel
    from transformers.utils import logging as transformers_logging

    from .modeling.bro_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel
    from .modeling.epm_jepa import EpmJepaConfig, EpmJepaImageProcessor, EpmJepaModel
    from .modeling.i_jepa import IJepaConfig, IJepaImageProcessor, IJepaModel
    from .modeling.jepa_reasoner import JepaReasonerConfig  # noqa: F401  (the family registers its five model types)
    from .modeling.t_jepa import TJepaConfig, TJepaModel

    for config_class, model_class in (
        (BroJepaConfig, BroJepaModel),
        (EpmJepaConfig, EpmJepaModel),
        (IJepaConfig, IJepaModel),
        (TJepaConfig, TJepaModel),
    ):
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, model_class, exist_ok=True)
        # trust_remote_code export: `save_pretrained` / `push_to_hub` copy the self-contained modeling folder's files
        # next to the weights and write `auto_map`, so a saved directory or Hub repo loads with
        # `AutoModel.from_pretrained(path, trust_remote_code=True)` where hf_jepa is not installed. Where it is
        # installed, the registered classes are used (no remote code runs).
        config_class.register_for_auto_class()
        model_class.register_for_auto_class("AutoModel")
    # The fine-tuning heads: transformers' standard image-classification / text-classification pipelines and
    # Trainer load them through these Auto classes (saved folders name them in `auto_map` for remote code).
    from transformers import AutoModelForImageClassification, AutoModelForSequenceClassification

    from .modeling.bro_jepa import BroJepaForImageClassification
    from .modeling.epm_jepa import EpmJepaForImageClassification
    from .modeling.i_jepa import IJepaForImageClassification
    from .modeling.t_jepa import TJepaForSequenceClassification

    for auto_class, config_class, head_class in (
        (AutoModelForImageClassification, BroJepaConfig, BroJepaForImageClassification),
        (AutoModelForImageClassification, EpmJepaConfig, EpmJepaForImageClassification),
        (AutoModelForImageClassification, IJepaConfig, IJepaForImageClassification),
        (AutoModelForSequenceClassification, TJepaConfig, TJepaForSequenceClassification),
    ):
        auto_class.register(config_class, head_class, exist_ok=True)
        head_class.register_for_auto_class(auto_class.__name__)
    # Registering walks transformers' whole image-processor mapping, which logs "`ViTImageProcessor` requires
    # torchvision" on every import: a note about ViT's processor, which hf-jepa never uses. Silenced for the walk only.
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        for config_class, processor_class in (
            (BroJepaConfig, BroJepaImageProcessor),
            (EpmJepaConfig, EpmJepaImageProcessor),
            (IJepaConfig, IJepaImageProcessor),
        ):
            AutoImageProcessor.register(config_class, image_processor_classes={"pil": processor_class}, exist_ok=True)
            processor_class.register_for_auto_class("AutoImageProcessor")
    finally:
        transformers_logging.set_verbosity(verbosity)

    from .pipelines import serve_registered_tasks  # (importing the package registers the pipeline tasks)

    # Saved folders declare the hf-jepa tasks in `custom_pipelines` for remote-code users; here the registered
    # pipelines serve them, so `pipeline(task, model=folder)` needs no trust_remote_code (docs/guides/remote-code.md).
    for name in _MODULE_OF:
        if name.endswith("Config"):
            serve_registered_tasks(__getattr__(name))

    from transformers import PreTrainedModel

    from .saving import install_folder_saving

    # The modeling folders hold models only; here their save_pretrained / push_to_hub write the complete folder
    # (card, processor or tokenizer, pipeline code, results: rules in hf_jepa/saving.py).
    for name in _MODULE_OF:
        exported = __getattr__(name)
        if isinstance(exported, type) and issubclass(exported, PreTrainedModel):
            install_folder_saving(exported)

    _registered = True


def _started_as_cli() -> bool:
    return os.path.basename(sys.argv[0] if sys.argv else "") in ("hf-jepa", "hf-jepa.exe")


if not _started_as_cli():
    register_auto_classes()


__all__ = [*sorted(_MODULE_OF), "__version__", "register_auto_classes"]
