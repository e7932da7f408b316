"""Pipeline tasks; importing this package registers them with transformers."""

from transformers import AutoModel
from transformers.pipelines import PIPELINE_REGISTRY

from .latent_world_model import LatentWorldModelPipeline
from .modular_arithmetic import ModularArithmeticPipeline


PIPELINE_REGISTRY.register_pipeline(
    "modular-arithmetic", pipeline_class=ModularArithmeticPipeline, pt_model=AutoModel, type="image"
)
# "video": transformers' own type for frame-sequence tasks (video-classification); 5.24 stores the type but does not
# validate it.
PIPELINE_REGISTRY.register_pipeline(
    "latent-world-model", pipeline_class=LatentWorldModelPipeline, pt_model=AutoModel, type="video"
)


__all__ = ["LatentWorldModelPipeline", "ModularArithmeticPipeline"]
