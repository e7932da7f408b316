"""Sharing on the Hub: upload a saved model folder (weights, config, card, processors, figures, metrics).

The cards themselves are rendered by `hf_jepa.cards`; this module only pushes what a training run saved.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .cards.common import MODEL_ID_PLACEHOLDER

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_IGNORE_PATTERNS", "push_to_hub"]

# Never uploaded: Accelerate `save_state` checkpoints and tracker logs of the run.
DEFAULT_IGNORE_PATTERNS = ["checkpoints/*", "checkpoints/**", "logs/*", "logs/**", "runs/**", ".cache/**", "*.lock"]


def push_to_hub(
    model_dir: str | os.PathLike,
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload hf-jepa model",
    ignore_patterns: list[str] | None = None,
) -> str:
    """Upload a saved model folder (weights, config, card, image processor, figures, metrics) to `repo_id`.

    Creates the repo if needed and uploads the folder in one commit with `huggingface_hub.upload_folder` (not
    `PreTrainedModel.push_to_hub`, which would replace README.md with a default card). Accelerate checkpoints and
    tracker logs are left out (`DEFAULT_IGNORE_PATTERNS`). When the folder's README.md still shows
    `MODEL_ID_PLACEHOLDER` in its usage snippet, the placeholder is replaced by the repo id in the local README first,
    so the local and the uploaded card stay identical. Returns the repo URL.
    """
    from huggingface_hub import create_repo, upload_folder

    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved model folder (no config.json)")
    if not (folder / "README.md").is_file():
        logger.warning("%s has no README.md: the repo will have no model card", folder)
    repo_url = create_repo(repo_id, token=token, private=private, exist_ok=True, repo_type="model")
    readme = folder / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        if MODEL_ID_PLACEHOLDER in text:
            readme.write_text(text.replace(MODEL_ID_PLACEHOLDER, repo_url.repo_id), encoding="utf-8")
    commit = upload_folder(
        repo_id=repo_url.repo_id,
        folder_path=str(folder),
        token=token,
        commit_message=commit_message,
        ignore_patterns=DEFAULT_IGNORE_PATTERNS if ignore_patterns is None else ignore_patterns,
    )
    logger.info("Uploaded %s to %s (%s)", folder, repo_url.repo_id, commit.commit_url)
    return str(repo_url)
