"""`JepaPipeline`: what every hf-jepa pipeline shares - no preprocessing component is required by default, input type
checks for images and arrays, and a `save_pretrained` that does not leave `custom_pipelines` on the model's config.

The pipeline modules import this one relatively, so `pipe.save_pretrained(dir)` copies it beside them (transformers
copies a custom object's relative imports) and the folder still loads without hf_jepa."""

import numpy as np
import torch
from transformers import Pipeline


def is_pil_image(value) -> bool:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - PIL is a transformers vision dependency
        return False
    return isinstance(value, Image.Image)


def is_array(value) -> bool:
    return isinstance(value, (np.ndarray, torch.Tensor))


class JepaPipeline(Pipeline):
    """Base of the hf-jepa pipelines. Subclasses set `_load_tokenizer` / `_load_image_processor` to None ("load when
    present") where they can use one."""

    _load_tokenizer = False
    _load_feature_extractor = False
    _load_processor = False
    _load_video_processor = False
    _load_image_processor = False
    # The `config.model_type`s this task runs on: a saved folder of one of them declares the task in `custom_pipelines`
    # (`hf_jepa.trainers.custom_pipelines`), so it loads with `trust_remote_code=True` where hf_jepa is not installed.
    model_types: tuple[str, ...] = ()

    def save_pretrained(self, save_directory, **kwargs):
        """Save the model, its tokenizer or image processor and the pipeline's code; `config.json` gets
        `custom_pipelines`, so the directory loads with `pipeline(model=dir, trust_remote_code=True)` without hf_jepa.
        Where hf_jepa is installed its config classes hide their own tasks from `custom_pipelines`, so the plain
        task name loads the folder without `trust_remote_code` (docs/guides/remote-code.md).

        Unlike `Pipeline.save_pretrained`, the model's in-memory config is left as it was (no `custom_pipelines`
        leaking into later `model.save_pretrained` / `push_to_hub` calls)."""
        config = self.model.config
        missing = object()
        previous = config.__dict__.get("custom_pipelines", missing)
        try:
            super().save_pretrained(save_directory, **kwargs)
        finally:
            if previous is missing:
                config.__dict__.pop("custom_pipelines", None)
            else:
                config.custom_pipelines = previous
