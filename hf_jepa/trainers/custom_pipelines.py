"""`custom_pipelines` for saved folders: the hf-jepa pipeline tasks a model runs, declared in its config.json with the
pipeline code copied beside it, as `Pipeline.save_pretrained` does - so `pipeline(task, model=folder_or_repo,
trust_remote_code=True)` works where hf_jepa is not installed.

The tasks come from transformers' `PIPELINE_REGISTRY` (hf_jepa registers its tasks on import); a pipeline class
names the model types it runs on in `model_types`. This module does not import `hf_jepa.pipelines` (a layer below).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["custom_pipeline_tasks", "write_custom_pipelines"]


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
