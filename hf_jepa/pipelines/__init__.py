"""Pipeline tasks; importing this package registers them with transformers."""

from transformers import AutoModel
from transformers.pipelines import PIPELINE_REGISTRY

from .modular_arithmetic import ModularArithmeticPipeline


PIPELINE_REGISTRY.register_pipeline(
    "modular-arithmetic", pipeline_class=ModularArithmeticPipeline, pt_model=AutoModel, type="image"
)


__all__ = ["ModularArithmeticPipeline"]
