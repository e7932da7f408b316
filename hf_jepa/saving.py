"""Saving a model writes the complete folder: card, processor or tokenizer, pipeline code and results carry over.

`hf-jepa train` writes more than weights and config: the card, `eval_results.json`, figures, the image processor or
tokenizer, the pipeline code. A model loaded from such a folder (or Hub repo) and saved again should give the same
folder while its weights are unchanged, and an honest derived card once they changed. This module is that policy,
once, in the installed package (the modeling folders hold models only and are exported for `trust_remote_code`; a
remote-code copy saves like any remote-code model: weights, config and code).

Two ways in, the same behaviour:
- `save_folder(model, dir)` / `push_folder(model, repo_id)`: explicit, for any `PreTrainedModel`, including a
  remote-code copy loaded where hf_jepa is installed;
- `model.save_pretrained(dir)` / `model.push_to_hub(repo_id)` / `Model.from_pretrained(...)` of hf_jepa's installed
  model classes: `hf_jepa.register_auto_classes` (run on `import hf_jepa`) gives them these methods through
  `install_folder_saving`, which delegate to the two functions above.

The rules (see `save_folder`): the source is the folder or Hub repo the model was loaded from (`name_or_path`, at the
`revision`, `subfolder` and `cache_dir` it was loaded with; `hf-jepa train` points the model it returns at its
output folder). After transformers has written weights and config:
- always carried over (they do not depend on the weights): tokenizer and image-processor files, the processor's and
  the pipelines' code, `custom_pipelines` in `config.json` and `generation_config.json`;
- carried over only while the saved weights are bit-identical to the source's (every tensor's name, dtype, shape and
  bytes, streamed through sha256): everything else that describes those weights (card, `eval_results.json`,
  figures, training records, subfolders such as `experience_adapter/` or `pair/`);
- when the weights differ, none of those: a card saying the model was derived from the source (`base_model` when the
  source is a Hub repo), with no evaluation results.
Never carried: weights of other formats, `config.json`, model code (transformers writes it), checkpoints, tracker logs
and lock files; nothing overwrites a file transformers just wrote. Saving into the source folder itself writes weights
and config only, with a warning when the weights changed. A source that cannot be read any more gives a warning and
weights and config only.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from transformers import PreTrainedModel

from .hub import RUN_STATE, upload_in_one_commit

logger = logging.getLogger(__name__)

__all__ = ["install_folder_saving", "push_folder", "save_folder"]

# Weights in formats other than this model's safetensors: never read or carried over.
OTHER_WEIGHT_FORMATS = ("*.bin", "*.bin.index.json", "*.pt", "*.pth", "*.ckpt", "*.h5", "*.msgpack", "*.onnx")
# Top-level names never carried over: written from the model by save_pretrained, weights, run state.
NEVER_CARRIED = (
    ("config.json", ".gitattributes", "*.safetensors", "*.safetensors.index.json", "*.gguf")
    + OTHER_WEIGHT_FORMATS
    + RUN_STATE
)
# Top-level files that do not depend on the weights: always carried over.
WEIGHT_INDEPENDENT = (
    "tokenizer*.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "spiece.model",
    "chat_template.json",
    "chat_template.jinja",
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
    "generation_config.json",
)
# save_pretrained(push_to_hub=True, ...) arguments of the upload.
UPLOAD_ARGUMENTS = ("repo_id", "commit_message", "commit_description", "private", "revision", "create_pr")
# The pipeline task of a fine-tuning head, by the Auto class it is registered for (the derived card's pipeline_tag).
HEAD_TASKS = {
    "AutoModelForImageClassification": "image-classification",
    "AutoModelForSequenceClassification": "text-classification",
}
# Where from_pretrained records the model's source on the instance.
SOURCE_ATTRIBUTE = "_hf_jepa_source"


# ---------------------------------------------------------------------------------------------- the two entry points


def save_folder(model: PreTrainedModel, save_directory, *args, push_to_hub: bool = False, **kwargs) -> None:
    """`PreTrainedModel.save_pretrained(save_directory, *args, **kwargs)`, then the source's companion files (rules in
    the module docstring). With `push_to_hub=True` the complete folder is then uploaded in one commit (`repo_id`,
    default: the folder's name; `commit_message`, `commit_description`, `private`, `revision`, `create_pr`,
    `token`)."""
    upload = {key: kwargs.pop(key) for key in UPLOAD_ARGUMENTS if key in kwargs} if push_to_hub else {}
    is_main_process = args[0] if args else kwargs.get("is_main_process", True)
    token = kwargs.get("token")
    destination = Path(save_directory)
    source = _source_folder(model, token) if is_main_process else None
    source_weights = tensor_digests(source) if source is not None else None
    same_folder = source is not None and destination.is_dir() and source.resolve() == destination.resolve()
    before = _folder_state(destination)
    PreTrainedModel.save_pretrained(model, save_directory, *args, **kwargs)
    if not is_main_process:
        return
    if source is not None:
        identical = source_weights is not None and source_weights == tensor_digests(destination)
        if not same_folder:
            after = _folder_state(destination)
            written = {name for name, state in after.items() if before.get(name) != state}
            _carry_companions(model, source, destination, identical, written)
        elif not identical:
            logger.warning(
                "Saved changed weights into %s, the folder the model was loaded from: its card, evaluation results "
                "and figures still describe the earlier weights",
                destination,
            )
    if push_to_hub:
        repo_id = upload.pop("repo_id", None) or destination.resolve().name
        _upload_model_folder(model, destination, repo_id, token=token, **upload)


def push_folder(
    model: PreTrainedModel,
    repo_id: str,
    *,
    commit_message: str | None = None,
    commit_description: str | None = None,
    private: bool | None = None,
    token: bool | str | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    max_shard_size: int | str | None = "50GB",
    tags: list[str] | None = None,
):
    """Save the complete folder (`save_folder`) to a temporary directory and upload it to `repo_id` in one commit;
    the arguments mean what they mean in `PreTrainedModel.push_to_hub` (`tags` are added to the card's tags, with
    `model.model_tags`). Returns the commit's `CommitInfo` (a str: its URL; with `create_pr`, `.pr_url`)."""
    with tempfile.TemporaryDirectory(prefix="hf-jepa-push-") as folder:
        save_folder(model, folder, max_shard_size=max_shard_size, token=token)
        return _upload_model_folder(
            model,
            Path(folder),
            repo_id,
            token=token,
            commit_message=commit_message,
            commit_description=commit_description,
            private=private,
            revision=revision,
            create_pr=create_pr,
            tags=tags,
        )


def remember_source(model: PreTrainedModel, revision=None, subfolder=None, cache_dir=None) -> None:
    """Record where `model` was just loaded from, so a later save reads the companion files from the same place."""
    setattr(
        model,
        SOURCE_ATTRIBUTE,
        {
            "name_or_path": model.name_or_path,
            "revision": revision,
            "subfolder": subfolder or "",
            "cache_dir": cache_dir,
        },
    )


def install_folder_saving(model_class: type[PreTrainedModel]) -> None:
    """Give an installed hf-jepa model class `save_pretrained` and `push_to_hub` that follow this module's policy,
    and wrap its `from_pretrained` (the family's strict loading stays) so the model remembers its source. Idempotent;
    never applied to remote-code copies."""
    if not (isinstance(model_class, type) and issubclass(model_class, PreTrainedModel)):
        raise TypeError(f"install_folder_saving expects a PreTrainedModel subclass, got {model_class!r}")
    if model_class.__dict__.get("_hf_jepa_folder_saving"):
        return
    load = model_class.from_pretrained.__func__  # the family's own (strict) from_pretrained, found through the MRO

    def from_pretrained(cls, *args, **kwargs):
        loaded = load(cls, *args, **kwargs)
        model = loaded[0] if kwargs.get("output_loading_info") else loaded
        remember_source(model, kwargs.get("revision"), kwargs.get("subfolder"), kwargs.get("cache_dir"))
        return loaded

    from_pretrained.__doc__ = (load.__doc__ or "").rstrip() + (
        "\n\nThe model also remembers the `revision`, `subfolder` and `cache_dir` it was loaded with, so that "
        "`save_pretrained` / `push_to_hub` read the companion files from the same place (hf_jepa.saving)."
    )
    model_class.from_pretrained = classmethod(from_pretrained)
    model_class.save_pretrained = save_folder
    model_class.push_to_hub = push_folder
    model_class._hf_jepa_folder_saving = True


# ------------------------------------------------------------------------------ where the companion files come from


def _source_folder(model: PreTrainedModel, token=None) -> Path | None:
    """The local folder holding the source's files (a Hub repo's cached snapshot), or None without a source."""
    source = str(model.name_or_path or "")
    if not source:
        return None
    loaded = getattr(model, SOURCE_ATTRIBUTE, None) or {}
    if loaded.get("name_or_path") != source:  # pointed elsewhere since loading (e.g. by the trainer)
        loaded = {}
    subfolder = loaded.get("subfolder") or ""
    folder, reason = None, "no config.json"
    if os.path.isdir(source):
        folder = Path(source, subfolder)
    else:
        from huggingface_hub import snapshot_download

        try:
            snapshot = snapshot_download(
                source,
                revision=loaded.get("revision"),
                cache_dir=loaded.get("cache_dir"),
                token=token,
                allow_patterns=[f"{subfolder}/*"] if subfolder else None,
                ignore_patterns=[*OTHER_WEIGHT_FORMATS, *(f"{name}/*" for name in RUN_STATE if "*" not in name)],
            )
            folder = Path(snapshot, subfolder)
        except (OSError, ValueError) as error:  # not a repo id, offline and not cached, gone, no access
            reason = f"{type(error).__name__}: {error}"
    if folder is None or not (folder / "config.json").is_file():
        logger.warning(
            "The model was loaded from %r, whose files cannot be read now (%s): saving weights and config only, "
            "without its card, processor, tokenizer or pipeline code",
            source,
            reason,
        )
        return None
    return folder


def tensor_digests(folder: Path) -> dict[str, str] | None:
    """{tensor name: sha256 of its dtype, shape and bytes} over the folder's safetensors checkpoint (one file or
    shards), read straight from the files; None when the folder has none."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        return None
    digests = {}
    for name in files:
        with open(folder / name, "rb") as handle:
            header_size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(header_size))
            for key, info in header.items():
                if key == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                handle.seek(8 + header_size + begin)
                digest = hashlib.sha256(f"{info['dtype']}{info['shape']}".encode())
                remaining = end - begin
                while remaining:
                    chunk = handle.read(min(remaining, 1 << 24))
                    if not chunk:
                        raise ValueError(f"{folder / name} is truncated (tensor {key})")
                    digest.update(chunk)
                    remaining -= len(chunk)
                digests[key] = digest.hexdigest()
    return digests


# ------------------------------------------------------------------------------------------- carrying the files over


def _folder_state(folder: Path) -> dict[str, tuple[int, int, int]]:
    """{top-level name: (inode, size, mtime in ns)}: what differs between two calls is what was written."""
    if not folder.is_dir():
        return {}
    return {path.name: (s.st_ino, s.st_size, s.st_mtime_ns) for path in folder.iterdir() for s in [path.stat()]}


def _matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def _code_modules(config: dict) -> set[str]:
    """Module names (`modular_arithmetic`) of the code a saved json points to: its `custom_pipelines` impls and its
    `auto_map` classes (only same-folder ones: `repo--module.Class` lives elsewhere)."""
    references = [entry.get("impl") for entry in (config.get("custom_pipelines") or {}).values()]
    for value in (config.get("auto_map") or {}).values():
        references.extend(value if isinstance(value, (list, tuple)) else [value])
    return {ref.split(".")[0] for ref in references if isinstance(ref, str) and "." in ref and "--" not in ref}


def _carry_companions(model, source: Path, destination: Path, identical: bool, written: set[str]) -> None:
    """Copy the source's companion files into `destination`, never over what save_pretrained `written` there."""
    from transformers.dynamic_module_utils import get_relative_import_files

    source_config = json.loads((source / "config.json").read_text())
    # A fine-tuning head loaded from a JEPA folder (e.g. BroJepaForImageClassification) keeps the processor or
    # tokenizer but not the JEPA model's own tasks: their pipelines call parts the head does not have.
    same_architecture = type(model).__name__ in (source_config.get("architectures") or [type(model).__name__])
    modules = _code_modules(source_config) if same_architecture else set()
    carried = []
    for entry in sorted(source.iterdir(), key=lambda path: path.name):
        name = entry.name
        if name in written or _matches(name, NEVER_CARRIED) or name.endswith(".py"):
            continue
        if entry.is_file() and _matches(name, WEIGHT_INDEPENDENT):
            if name.endswith(".json"):
                modules |= _code_modules(json.loads(entry.read_text()))
        elif not identical:
            continue
        carried.append(name)
        if entry.is_dir():
            shutil.copytree(entry, destination / name, ignore=shutil.ignore_patterns(*RUN_STATE))
        else:
            shutil.copyfile(entry, destination / name)
    code = set()
    for module in modules:
        path = source / f"{module}.py"
        # A module save_pretrained wrote is the destination's own: its imports, not the source's, are what it needs
        # (a folder saved by an older hf-jepa imports files this version no longer writes).
        if path.is_file() and path.name not in written:
            code |= {Path(p).name for p in [path, *get_relative_import_files(str(path))]}
    code -= written
    for name in sorted(code):
        shutil.copyfile(source / name, destination / name)
    declared = {
        task: entry
        for task, entry in (source_config.get("custom_pipelines") or {}).items()
        if same_architecture and (destination / f"{str(entry.get('impl', '')).split('.')[0]}.py").is_file()
    }
    config_path = destination / "config.json"
    config = json.loads(config_path.read_text())
    if declared and not config.get("custom_pipelines"):  # a model the trainer saved: its config does not hold them
        config["custom_pipelines"] = declared
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if not identical:
        _derived_card(model, source, same_architecture).save(str(destination / "README.md"))
    logger.info(
        "Carried over from %s: %s (weights %s)",
        source,
        ", ".join(carried + sorted(code)) or "nothing",
        "identical" if identical else "changed: derived card, no evaluation results",
    )


def _derived_card(model, source: Path, same_architecture: bool = True):
    """The card of weights derived from `source`: its library_name, pipeline_tag and tags, `base_model` when the
    source is a Hub repo, and no results. A head of another architecture (a classifier on a JEPA encoder) gets its
    own task as pipeline_tag."""
    from huggingface_hub import ModelCard, ModelCardData

    origin = str(model.name_or_path)
    metadata = {}
    if (source / "README.md").is_file():
        metadata = ModelCard.load(source / "README.md", ignore_metadata_errors=True).data.to_dict()
    copied = {key: metadata[key] for key in ("library_name", "pipeline_tag", "tags") if metadata.get(key)}
    if not same_architecture:
        copied.pop("pipeline_tag", None)
        task = HEAD_TASKS.get(getattr(type(model), "_auto_class", None))
        copied.update({"pipeline_tag": task} if task else {})
    if os.path.isdir(origin):  # a local path is no Hub id: the Hub would reject it as base_model
        named, shown, base = f"the weights in a local folder named `{Path(origin).name}`", Path(origin).name, {}
    else:
        named, shown = f"[`{origin}`](https://huggingface.co/{origin})", origin
        base = {"base_model": origin, "base_model_relation": "finetune"}
    data = ModelCardData(**{"library_name": "transformers", **copied, **base})
    if not same_architecture:
        body = (
            f"# {type(model).__name__} derived from {shown}\n\n"
            f"A classification head on the encoder of {named}. The source's card, evaluation results and figures "
            "describe the JEPA model it was pre-trained as, so none of them is carried over: evaluate this "
            "classifier on held-out data before relying on it. The tokenizer or image processor is the source's.\n"
        )
        return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")
    body = (
        f"# {model.config.model_type} model derived from {shown}\n\n"
        f"These weights start from {named} and differ from it. The source's card, evaluation results and figures "
        "describe the source's weights, so none of them is carried over: evaluate this model before relying on "
        "it (`hf-jepa eval DIR` where hf-jepa is installed). The tokenizer or image processor, the pipeline code "
        "and the decoding defaults are the source's.\n"
    )
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


# -------------------------------------------------------------------------------------------------------------- upload


def _upload_model_folder(model, folder: Path, repo_id: str, *, tags=None, **upload):
    """Upload a folder this module saved: a model without a card gets a minimal one saying so (never transformers'
    default card), and `tags` plus `model.model_tags` are added to the card's tags."""
    from huggingface_hub import ModelCard, ModelCardData

    readme = folder / "README.md"
    if readme.is_file():
        card = readme.read_text()
    else:
        data = ModelCardData(library_name="transformers", tags=[model.config.model_type])
        card = (
            f"---\n{data.to_yaml()}\n---\n\n# {model.config.model_type} model\n\nSaved from memory without an "
            "hf-jepa card (the model was neither loaded from nor trained into a folder holding one): no evaluation "
            "results are recorded.\n"
        )
    added = [tag for tag in [*(getattr(model, "model_tags", None) or []), *(tags or [])] if tag]
    if added:
        parsed = ModelCard(card)
        parsed.data.tags = list(dict.fromkeys([*(parsed.data.tags or []), *added]))
        card = str(parsed)
    upload.setdefault("commit_message", None)
    upload["commit_message"] = upload["commit_message"] or "Upload model"
    _, commit = upload_in_one_commit(folder, repo_id, card=card.encode(), **upload)
    return commit
