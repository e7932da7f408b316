"""Sharing on the Hub: upload a saved model folder (weights, config, card, processors, figures, metrics).

The cards themselves are rendered by `hf_jepa.cards`; this module only pushes what a training run saved, and never
changes the folder it pushes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from .cards.common import MODEL_ID_PLACEHOLDER

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_IGNORE_PATTERNS", "card_for_repo", "push_to_hub", "quiet_http_loggers"]

# Never uploaded: Accelerate `save_state` checkpoints and tracker logs of the run.
DEFAULT_IGNORE_PATTERNS = ["checkpoints/*", "checkpoints/**", "logs/*", "logs/**", "runs/**", ".cache/**", "*.lock"]
# HTTP client loggers that print one INFO line per request; quiet (WARNING) during a push unless DEBUG is on.
HTTP_LOGGERS = ("httpx", "httpx2", "huggingface_hub")


def card_for_repo(card: bytes, repo_id: str) -> bytes:
    """The card as uploaded to `repo_id`: `MODEL_ID_PLACEHOLDER` (the usage snippet of a card rendered before the model
    had a Hub id) replaced by `repo_id`; a card without it is returned unchanged."""
    return card.replace(MODEL_ID_PLACEHOLDER.encode(), repo_id.encode())


@contextlib.contextmanager
def quiet_http_loggers() -> Iterator[None]:
    """Raise the HTTP client loggers to WARNING for the block when they would print INFO lines (restored after);
    with DEBUG logging on (``hf-jepa -v``) they stay as they are."""
    saved = []
    for name in HTTP_LOGGERS:
        client_logger = logging.getLogger(name)
        if logging.DEBUG < client_logger.getEffectiveLevel() < logging.WARNING:
            saved.append((client_logger, client_logger.level))
            client_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for client_logger, level in saved:
            client_logger.setLevel(level)


def _folder_files(folder: Path, ignore_patterns: list[str]) -> list[str]:
    """Paths (posix, relative to `folder`) of the files to upload, as `upload_folder` picks them."""
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS as HUB_IGNORE_PATTERNS
    from huggingface_hub.utils import filter_repo_objects

    files = sorted(path.relative_to(folder).as_posix() for path in folder.glob("**/*") if path.is_file())
    return list(filter_repo_objects(files, ignore_patterns=[*ignore_patterns, *HUB_IGNORE_PATTERNS]))


def push_to_hub(
    model_dir: str | os.PathLike,
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload hf-jepa model",
    ignore_patterns: list[str] | None = None,
    revision: str | None = None,
    create_pr: bool = False,
) -> str:
    """Upload a saved model folder (weights, config, card, image processor, figures, metrics) to `repo_id`.

    Creates the repo if needed and uploads the folder in one commit (`huggingface_hub.create_commit`; not
    `PreTrainedModel.push_to_hub`, which would replace README.md with a default card). Accelerate checkpoints and
    tracker logs are left out (`DEFAULT_IGNORE_PATTERNS`). The folder is only read, never written: the README.md
    uploaded is the local one with `MODEL_ID_PLACEHOLDER` replaced by the repo id in memory (`card_for_repo`), so a
    failed push, or a push to another repo, leaves the local card as it was. `revision` commits to that branch
    (created from main when missing); `create_pr=True` opens a pull request (against `revision` or main) instead of
    committing. Returns the repo URL, or the pull request's URL with `create_pr`.
    """
    from huggingface_hub import CommitOperationAdd, create_branch, create_commit, create_repo

    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved model folder (no config.json)")
    readme = folder / "README.md"
    card = readme.read_bytes() if readme.is_file() else None
    if card is None:
        logger.warning("%s has no README.md: the repo will have no model card", folder)
    paths = _folder_files(folder, DEFAULT_IGNORE_PATTERNS if ignore_patterns is None else ignore_patterns)
    with quiet_http_loggers():
        repo_url = create_repo(repo_id, token=token, private=private, exist_ok=True, repo_type="model")
        operations = [  # README.md as read above, patched in memory
            CommitOperationAdd(
                path_in_repo=p,
                path_or_fileobj=card_for_repo(card, repo_url.repo_id) if p == "README.md" else str(folder / p),
            )
            for p in paths
        ]
        if revision is not None and not revision.startswith("refs/pr/"):
            create_branch(repo_url.repo_id, branch=revision, token=token, repo_type="model", exist_ok=True)
        commit = create_commit(
            repo_url.repo_id,
            operations,
            commit_message=commit_message,
            token=token,
            repo_type="model",
            revision=revision,
            create_pr=create_pr,
        )
    logger.info("Uploaded %s to %s (%s)", folder, repo_url.repo_id, commit.pr_url or commit.commit_url)
    return str(commit.pr_url) if create_pr and commit.pr_url else str(repo_url)
