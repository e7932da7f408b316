"""Where hf_jepa is installed, its registered pipeline tasks serve its folders: no `trust_remote_code` needed.

A saved hf-jepa folder declares its tasks in config.json's `custom_pipelines` (with the pipeline code beside it) so
that `pipeline(model=folder, trust_remote_code=True)` works where hf_jepa is not installed. transformers' `pipeline()`
treats any task found in `config.custom_pipelines` as remote code and refuses it without `trust_remote_code=True`,
even when the same task is registered locally. So on the installed config classes, `config.custom_pipelines` reads
without the tasks hf_jepa registers itself; the declaration stays stored (and saved) whole. The rules are documented
once, in docs/guides/remote-code.md.
"""

from transformers.pipelines import PIPELINE_REGISTRY

__all__ = ["RegisteredTasksFirst", "serve_registered_tasks"]


def _tasks_served_here() -> set[str]:
    """The tasks registered with transformers by hf_jepa's own pipeline classes."""
    return {
        task
        for task, info in PIPELINE_REGISTRY.supported_tasks.items()
        if getattr(info.get("impl"), "__module__", "").startswith("hf_jepa.")
    }


class RegisteredTasksFirst:
    """`config.custom_pipelines`, as `pipeline()` reads it where hf_jepa is installed: the declared tasks minus those
    served by the registered hf-jepa pipelines. Setting it (transformers' `Pipeline.save_pretrained` does) stores the
    whole declaration, which `to_dict` / `save_pretrained` write unchanged."""

    def __get__(self, config, owner=None):
        if config is None:
            return self
        declared = config.__dict__.get("custom_pipelines")
        if declared is None:
            raise AttributeError(f"{type(config).__name__!r} object has no attribute 'custom_pipelines'")
        served = _tasks_served_here()
        return {task: entry for task, entry in declared.items() if task not in served}

    def __set__(self, config, value):
        config.__dict__["custom_pipelines"] = value

    def __delete__(self, config):
        config.__dict__.pop("custom_pipelines", None)


def serve_registered_tasks(config_class) -> None:
    """Give `config_class` (an installed hf-jepa config class, never a remote-code copy) the rule above."""
    config_class.custom_pipelines = RegisteredTasksFirst()
