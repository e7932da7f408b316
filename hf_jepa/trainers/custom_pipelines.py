"""What a saved folder declares for environments without hf_jepa (`trust_remote_code=True`), written so that the
same folder asks no question where hf_jepa is installed.

- `write_custom_pipelines`: the hf-jepa pipeline tasks a model runs, declared in its config.json with the pipeline
  code copied beside it, as `Pipeline.save_pretrained` does - so `pipeline(task, model=folder_or_repo,
  trust_remote_code=True)` works where hf_jepa is not installed. (Where it is installed, `hf_jepa.pipelines` hides
  these declarations from `pipeline()`, which then uses the registered task: no `trust_remote_code` needed.)
- `declare_image_processor_in_config`: the image processor's `auto_map` entry lives in config.json, not in
  preprocessor_config.json.

The tasks come from transformers' `PIPELINE_REGISTRY` (hf_jepa registers its tasks on import); a pipeline class
names the model types it runs on in `model_types`. This module does not import `hf_jepa.pipelines` (a layer below).
The rules are documented once, in docs/guides/remote-code.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["custom_pipeline_tasks", "declare_image_processor_in_config", "write_custom_pipelines"]

_IMAGE_PROCESSOR = "AutoImageProcessor"


def custom_pipeline_tasks(model_type: str) -> dict[str, dict]:
    """{task: registry entry} of the registered pipeline tasks whose class lists `model_type` in `model_types`."""
    from transformers.pipelines import PIPELINE_REGISTRY

    tasks = {}
    for task in PIPELINE_REGISTRY.get_supported_tasks():
        info = PIPELINE_REGISTRY.supported_tasks.get(task)
        if info is not None and model_type in getattr(info.get("impl"), "model_types", ()):
            tasks[task] = info
    return tasks


def write_custom_pipelines(output_dir: str | os.PathLike, model_type: str | None = None) -> list[str]:
    """Add `custom_pipelines` for the folder's model type (read from its config.json unless given) to
    `output_dir/config.json` and copy the pipeline modules (and their relative imports) beside it. Tasks already
    declared there are kept. Returns the tasks written (empty for a model type no hf-jepa pipeline runs on, e.g. a
    Talker alone)."""
    from transformers.dynamic_module_utils import custom_object_save

    config_path = Path(output_dir) / "config.json"
    config = json.loads(config_path.read_text())
    tasks = custom_pipeline_tasks(model_type or config.get("model_type", ""))
    if not tasks:
        return []
    declared = dict(config.get("custom_pipelines") or {})
    for task, info in tasks.items():
        impl = info["impl"]
        entry = {key: value for key, value in info.items() if key not in ("impl", "pt")}
        entry["impl"] = f"{impl.__module__.split('.')[-1]}.{impl.__name__}"
        entry["pt"] = [model_class.__name__ for model_class in info["pt"]]
        declared[task] = entry
        custom_object_save(impl, output_dir)
    config["custom_pipelines"] = declared
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return sorted(tasks)


def declare_image_processor_in_config(output_dir: str | os.PathLike, config=None) -> str | None:
    """Move the `AutoImageProcessor` entry of `output_dir/preprocessor_config.json`'s `auto_map` into config.json's,
    dropping the file's `image_processor_type` (and put the entry into `config.auto_map` when the in-memory config is given, so its later saves keep it). Returns the class
    reference moved, or None when the folder has no remote-code image processor.

    Why: every pipeline also looks for a video processor, and transformers derives one from preprocessor_config.json's
    `AutoImageProcessor` entry ("...ImageProcessor" -> "...VideoProcessor"); finding no local class of that name, it
    asks "Do you wish to run the custom code?" on a terminal even where hf_jepa is installed. `AutoImageProcessor`
    reads the same entry from config.json (so `trust_remote_code=True` still loads the processor without hf_jepa);
    `AutoVideoProcessor` does not derive anything from there. Where hf_jepa is installed, `AutoImageProcessor` finds
    the class registered for the model's config type."""
    folder = Path(output_dir)
    processor_path = folder / "preprocessor_config.json"
    if not processor_path.is_file():
        return None
    processor = json.loads(processor_path.read_text())
    auto_map = dict(processor.get("auto_map") or {})
    reference = auto_map.pop(_IMAGE_PROCESSOR, None)
    if reference is None:
        return None
    if auto_map:
        processor["auto_map"] = auto_map
    else:
        processor.pop("auto_map")
    # `AutoImageProcessor` reads config.json only when the processor file names no type; the video lookup derives its
    # class name from the type as well.
    processor.pop("image_processor_type", None)
    config_path = folder / "config.json"
    saved = json.loads(config_path.read_text())
    saved["auto_map"] = {**(saved.get("auto_map") or {}), _IMAGE_PROCESSOR: reference}
    config_path.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    processor_path.write_text(json.dumps(processor, indent=2, sort_keys=True) + "\n")
    if config is not None:
        config.auto_map = {**(getattr(config, "auto_map", None) or {}), _IMAGE_PROCESSOR: reference}
    return reference
