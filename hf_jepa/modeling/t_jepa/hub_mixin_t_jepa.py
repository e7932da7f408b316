"""`save_pretrained` and `push_to_hub` that write the complete folder: a copy of
hf_jepa/modeling/bro_jepa/hub_mixin_bro_jepa.py (the rules are in its `JepaHubMixin` docstring), kept equal by
utils/check_copies.py; this folder is exported for `trust_remote_code`, so it cannot import that one."""

import fnmatch
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


# Copied from hf_jepa.modeling.bro_jepa.hub_mixin_bro_jepa.JepaHubMixin
class JepaHubMixin:
    """`save_pretrained(dir)` and `push_to_hub(repo_id)` writing the complete folder `hf-jepa train` writes.

    The source is the folder or Hub repo the model was loaded from (`name_or_path`; a Hub repo is read through
    `huggingface_hub.snapshot_download`, at the revision and subfolder it was loaded with). After the weights and
    config (and, for generating models, `generation_config.json`) are written as transformers writes them:

    - always carried over (they do not depend on the weights): the tokenizer and image processor files, the
      processor's and the pipelines' code, `custom_pipelines` in `config.json` (so `pipeline(task, model=dir,
      trust_remote_code=True)` works where hf_jepa is not installed) and `generation_config.json`;
    - carried over only while the saved weights are bit-identical to the source's (every tensor's name, dtype, shape
      and bytes compared, streaming both checkpoints once through sha256): everything else the source holds that describes those weights - the card (`README.md`),
      `eval_results.json`, figures, training records, subfolders such as `experience_adapter/` or `pair/`;
    - when the weights differ, none of those: a card saying the model was derived from the source, with the source's
      `library_name`, `pipeline_tag` and `tags`, and `base_model: <repo id>` (`base_model_relation: finetune`) when the
      source is a Hub repo (a local path is no Hub id: the card names the folder instead); no evaluation results.

    Never carried: weights of any format, `config.json` (written from the model), model code (written by
    transformers), checkpoints, tracker logs and lock files; nothing overwrites a file save_pretrained just wrote. A
    model without a source (built in memory) saves as transformers saves it. Saving into the source folder itself
    writes only weights and config, and warns when the weights changed (the folder's card and results then describe
    the earlier ones). A source that cannot be read any more (a deleted folder, a Hub repo offline and not cached)
    gives a warning and the weights and config only.

    `push_to_hub` saves the complete folder to a temporary directory and uploads it in one commit
    (`huggingface_hub.create_commit`), with our card as README.md - never transformers' default card - and the
    card's usage placeholder replaced by the repo id. `save_pretrained(dir, push_to_hub=True, repo_id=...)` uploads
    `dir` the same way.
    """

    # The usage snippet of a card rendered before the model had a Hub id names this placeholder; a push writes the repo
    # id in its place. Equal to hf_jepa.cards.common.MODEL_ID_PLACEHOLDER (kept equal by tests/test_model_push.py;
    # this folder cannot import hf_jepa).
    _card_model_id_placeholder = "path/to/hf-jepa-model"
    # Weights in formats other than this model's safetensors: never read or carried over.
    _other_weight_formats = ("*.bin", "*.bin.index.json", "*.pt", "*.pth", "*.ckpt", "*.h5", "*.msgpack", "*.onnx")
    # A training run's state and tool caches: never carried over or uploaded, at any depth.
    _run_state = ("checkpoints", "logs", "runs", ".cache", ".git", ".locks", "*.lock")
    # Top-level names never carried over: written from the model by save_pretrained, weights, run state.
    _never_carried = (
        ("config.json", ".gitattributes", "*.safetensors", "*.safetensors.index.json", "*.gguf")
        + _other_weight_formats
        + _run_state
    )
    # Top-level files that do not depend on the weights: always carried over.
    _weight_independent = (
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
    _upload_arguments = ("repo_id", "commit_message", "commit_description", "private", "revision", "create_pr")

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`; the model also remembers the `revision`, `subfolder` and `cache_dir` it
        was loaded with, so `save_pretrained` / `push_to_hub` read the companion files from the same place."""
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if kwargs.get("output_loading_info") else loaded
        model._companion_source = {
            "name_or_path": model.name_or_path,
            "revision": kwargs.get("revision"),
            "subfolder": kwargs.get("subfolder") or "",
            "cache_dir": kwargs.get("cache_dir"),
        }
        return loaded

    def save_pretrained(self, save_directory, *args, push_to_hub: bool = False, **kwargs):
        """`PreTrainedModel.save_pretrained`, then the source's companion files (see the class docstring). With
        `push_to_hub=True` the complete folder is then uploaded (`repo_id`, default: the folder's name;
        `commit_message`, `commit_description`, `private`, `revision`, `create_pr`, `token`)."""
        upload = {key: kwargs.pop(key) for key in self._upload_arguments if key in kwargs} if push_to_hub else {}
        is_main_process = args[0] if args else kwargs.get("is_main_process", True)
        token = kwargs.get("token")
        destination = Path(save_directory)
        source = self._companion_folder(token) if is_main_process else None
        source_weights = self._tensor_digests(source) if source is not None else None
        same_folder = source is not None and destination.is_dir() and source.resolve() == destination.resolve()
        before = self._folder_state(destination)
        super().save_pretrained(save_directory, *args, **kwargs)
        if not is_main_process:
            return
        if source is not None:
            identical = source_weights is not None and source_weights == self._tensor_digests(destination)
            if not same_folder:
                after = self._folder_state(destination)
                written = {name for name, state in after.items() if before.get(name) != state}
                self._carry_companions(source, destination, identical, written)
            elif not identical:
                logger.warning(
                    "Saved changed weights into %s, the folder the model was loaded from: its card, evaluation "
                    "results and figures still describe the earlier weights",
                    destination,
                )
        if push_to_hub:
            repo_id = upload.pop("repo_id", None) or destination.resolve().name
            self._upload_complete_folder(destination, repo_id, token=token, **upload)

    def push_to_hub(
        self,
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
        """Upload the complete folder (see the class docstring) to `repo_id` in one commit; the arguments mean what
        they mean in `PreTrainedModel.push_to_hub` (`tags` are added to the card's tags, with `model.model_tags`).
        Returns the commit's `CommitInfo` (a str: its URL; with `create_pr`, `.pr_url` is the pull request's)."""
        with tempfile.TemporaryDirectory(prefix="hf-jepa-push-") as folder:
            self.save_pretrained(folder, max_shard_size=max_shard_size, token=token)
            return self._upload_complete_folder(
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

    # ------------------------------------------------------------------ where the companion files come from

    def _companion_folder(self, token=None) -> Path | None:
        """The local folder holding the source's files (a Hub repo's cached snapshot), or None without a source."""
        source = str(self.name_or_path or "")
        if not source:
            return None
        loaded = getattr(self, "_companion_source", None) or {}
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
                    ignore_patterns=[*self._other_weight_formats, *(f"{name}/*" for name in self._run_state[:-1])],
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

    @staticmethod
    def _tensor_digests(folder: Path) -> dict[str, str] | None:
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

    # ------------------------------------------------------------------ carrying the files over

    @staticmethod
    def _folder_state(folder: Path) -> dict[str, tuple[int, int, int]]:
        """{top-level name: (inode, size, mtime in ns)}: what differs between two calls is what was written."""
        if not folder.is_dir():
            return {}
        return {path.name: (s.st_ino, s.st_size, s.st_mtime_ns) for path in folder.iterdir() for s in [path.stat()]}

    @staticmethod
    def _matches(name: str, patterns) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)

    @staticmethod
    def _code_modules(config: dict) -> set[str]:
        """Module names (`modular_arithmetic`) of the code a saved json points to: its `custom_pipelines` impls and
        its `auto_map` classes (only same-folder ones: `repo--module.Class` lives elsewhere)."""
        references = [entry.get("impl") for entry in (config.get("custom_pipelines") or {}).values()]
        for value in (config.get("auto_map") or {}).values():
            references.extend(value if isinstance(value, (list, tuple)) else [value])
        return {ref.split(".")[0] for ref in references if isinstance(ref, str) and "." in ref and "--" not in ref}

    def _carry_companions(self, source: Path, destination: Path, identical: bool, written: set[str]) -> None:
        """Copy the source's companion files into `destination`, never over what save_pretrained `written` there."""
        from transformers.dynamic_module_utils import get_relative_import_files

        source_config = json.loads((source / "config.json").read_text())
        modules = self._code_modules(source_config)
        carried = []
        for entry in sorted(source.iterdir(), key=lambda path: path.name):
            name = entry.name
            if name in written or self._matches(name, self._never_carried) or name.endswith(".py"):
                continue
            if entry.is_file() and self._matches(name, self._weight_independent):
                if name.endswith(".json"):
                    modules |= self._code_modules(json.loads(entry.read_text()))
            elif not identical:
                continue
            carried.append(name)
            if entry.is_dir():
                shutil.copytree(entry, destination / name, ignore=shutil.ignore_patterns(*self._run_state))
            else:
                shutil.copyfile(entry, destination / name)
        code = set()
        for module in modules:
            path = source / f"{module}.py"
            if path.is_file():
                code |= {Path(p).name for p in [path, *get_relative_import_files(str(path))]}
        code -= written
        for name in sorted(code):
            shutil.copyfile(source / name, destination / name)
        declared = {
            task: entry
            for task, entry in (source_config.get("custom_pipelines") or {}).items()
            if (destination / f"{str(entry.get('impl', '')).split('.')[0]}.py").is_file()
        }
        config_path = destination / "config.json"
        config = json.loads(config_path.read_text())
        if declared and not config.get("custom_pipelines"):  # a model the trainer saved: its config does not hold them
            config["custom_pipelines"] = declared
            config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if not identical:
            self._derived_card(source).save(str(destination / "README.md"))
        logger.info(
            "Carried over from %s: %s (weights %s)",
            source,
            ", ".join(carried + sorted(code)) or "nothing",
            "identical" if identical else "changed: derived card, no evaluation results",
        )

    def _derived_card(self, source: Path):
        """The card of weights derived from `source`: its library_name, pipeline_tag and tags, `base_model` when the
        source is a Hub repo, and no results."""
        from huggingface_hub import ModelCard, ModelCardData

        origin = str(self.name_or_path)
        metadata = {}
        if (source / "README.md").is_file():
            metadata = ModelCard.load(source / "README.md", ignore_metadata_errors=True).data.to_dict()
        copied = {key: metadata[key] for key in ("library_name", "pipeline_tag", "tags") if metadata.get(key)}
        if os.path.isdir(origin):  # a local path is no Hub id: the Hub would reject it as base_model
            named, shown, base = f"the weights in a local folder named `{Path(origin).name}`", Path(origin).name, {}
        else:
            named, shown = f"[`{origin}`](https://huggingface.co/{origin})", origin
            base = {"base_model": origin, "base_model_relation": "finetune"}
        data = ModelCardData(**{"library_name": "transformers", **copied, **base})
        body = (
            f"# {self.config.model_type} model derived from {shown}\n\n"
            f"These weights start from {named} and differ from it. The source's card, evaluation results and figures "
            "describe the source's weights, so none of them is carried over: evaluate this model before relying on "
            "it (`hf-jepa eval DIR` where hf-jepa is installed). The tokenizer or image processor, the pipeline code "
            "and the decoding defaults are the source's.\n"
        )
        return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")

    # ------------------------------------------------------------------ upload

    def _upload_complete_folder(
        self,
        folder: Path,
        repo_id: str,
        *,
        token=None,
        commit_message=None,
        commit_description=None,
        private=None,
        revision=None,
        create_pr=False,
        tags=None,
    ):
        """Upload `folder` to `repo_id` in one commit, README.md patched in memory (the folder is only read): the repo
        id in place of the usage placeholder, `tags` and `model_tags` added; a model without a card gets a minimal
        one saying so, never transformers' default card."""
        from huggingface_hub import (
            CommitOperationAdd,
            ModelCard,
            ModelCardData,
            create_branch,
            create_commit,
            create_repo,
        )

        repo = create_repo(repo_id, token=token, private=private, exist_ok=True, repo_type="model")
        readme = folder / "README.md"
        if readme.is_file():
            text = readme.read_text().replace(self._card_model_id_placeholder, repo.repo_id)
        else:
            data = ModelCardData(library_name="transformers", tags=[self.config.model_type])
            text = (
                f"---\n{data.to_yaml()}\n---\n\n# {self.config.model_type} model\n\nSaved from memory without an "
                "hf-jepa card (the model was neither loaded from nor trained into a folder holding one): no "
                "evaluation results are recorded.\n"
            )
        added = [tag for tag in [*(getattr(self, "model_tags", None) or []), *(tags or [])] if tag]
        if added:
            card = ModelCard(text)
            card.data.tags = list(dict.fromkeys([*(card.data.tags or []), *added]))
            text = str(card)
        files = sorted(
            path.relative_to(folder).as_posix()
            for path in folder.rglob("*")
            if path.is_file()
            and not any(self._matches(part, self._run_state) for part in path.relative_to(folder).parts)
        )
        operations = [CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=text.encode())]
        operations += [
            CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name))
            for name in files
            if name != "README.md"
        ]
        if revision is not None and not revision.startswith("refs/pr/"):
            create_branch(repo.repo_id, branch=revision, token=token, repo_type="model", exist_ok=True)
        return create_commit(
            repo.repo_id,
            operations,
            commit_message=commit_message or "Upload model",
            commit_description=commit_description,
            token=token,
            repo_type="model",
            revision=revision,
            create_pr=create_pr,
        )
