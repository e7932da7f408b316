"""Pipeline tasks; importing this package registers them with transformers."""

from transformers import AutoModel
from transformers.pipelines import PIPELINE_REGISTRY

from .feature_extraction import JepaFeatureExtractionPipeline
from .latent_reasoning import LatentReasoningPipeline
from .latent_world_model import LatentWorldModelPipeline
from .modular_arithmetic import ModularArithmeticPipeline
from .registered_tasks import serve_registered_tasks

PIPELINE_REGISTRY.register_pipeline(
    "modular-arithmetic", pipeline_class=ModularArithmeticPipeline, pt_model=AutoModel, type="image"
)
# "video": transformers' own type for frame-sequence tasks (video-classification); 5.24 stores the type but does not
# validate it.
PIPELINE_REGISTRY.register_pipeline(
    "latent-world-model", pipeline_class=LatentWorldModelPipeline, pt_model=AutoModel, type="video"
)

# "multimodal": transformers' type for tasks taking more than one modality; this one takes text (T-JEPA) or images
# (I-JEPA) depending on the model.
PIPELINE_REGISTRY.register_pipeline(
    "jepa-feature-extraction", pipeline_class=JepaFeatureExtractionPipeline, pt_model=AutoModel, type="multimodal"
)

# "text": a prompt string in, generated text out (through a latent chain).
PIPELINE_REGISTRY.register_pipeline(
    "latent-reasoning", pipeline_class=LatentReasoningPipeline, pt_model=AutoModel, type="text"
)

__all__ = [
    "serve_registered_tasks",
    "JepaFeatureExtractionPipeline",
    "LatentReasoningPipeline",
    "LatentWorldModelPipeline",
    "ModularArithmeticPipeline",
]
