"""Sharing on the Hub: upload a saved model folder (weights, config, card, processors, figures, metrics).

The cards themselves are rendered by `hf_jepa.cards`; this module only uploads a folder, in one commit, and never
changes the folder it pushes. `hf-jepa push` calls `push_to_hub`; `model.push_to_hub` (`hf_jepa.saving`) saves the
complete folder and uploads it through the same `upload_in_one_commit`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from .cards.common import MODEL_ID_PLACEHOLDER

logger = logging.getLogger(__name__)

__all__ = ["RUN_STATE", "card_for_repo", "folder_files", "push_to_hub", "quiet_http_loggers", "upload_in_one_commit"]

# A training run's state and tool caches (Accelerate `save_state` checkpoints, tracker logs, lock files): never
# uploaded, nor carried over by a save (`hf_jepa.saving`), at any depth.
RUN_STATE = ("checkpoints", "logs", "runs", ".cache", ".git", ".locks", "*.lock")
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


def folder_files(folder: Path) -> list[str]:
    """Paths (posix, relative to `folder`) of the files an upload takes: all but the run state (`RUN_STATE`, at any
    depth)."""
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file()
        and not any(fnmatch.fnmatch(part, p) for part in path.relative_to(folder).parts for p in RUN_STATE)
    )


def upload_in_one_commit(
    folder: Path,
    repo_id: str,
    *,
    card: bytes | None = None,
    token: bool | str | None = None,
    private: bool | None = None,
    commit_message: str = "Upload hf-jepa model",
    commit_description: str | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    repo_type: str = "model",
    space_sdk: str | None = None,
):
    """Create `repo_id` (of `repo_type`; a Space with `space_sdk`) if needed and upload `folder` (`folder_files`) in
    one commit (`huggingface_hub.create_commit`; not `PreTrainedModel.push_to_hub`, which would replace README.md with
    a default card). README.md is `card` (by default the folder's own), with `MODEL_ID_PLACEHOLDER` replaced by the
    repo id in memory (`card_for_repo`): the folder is only read. `revision` commits to that branch (created from main when missing); `create_pr=True` opens a
    pull request instead. Returns (the repo's `RepoUrl`, the commit's `CommitInfo`)."""
    from huggingface_hub import CommitOperationAdd, create_branch, create_commit, create_repo

    readme = folder / "README.md"
    if card is None and readme.is_file():
        card = readme.read_bytes()
    with quiet_http_loggers():
        repo_url = create_repo(
            repo_id, token=token, private=private, exist_ok=True, repo_type=repo_type, space_sdk=space_sdk
        )
        operations = [
            CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(folder / path))
            for path in folder_files(folder)
            if path != "README.md"
        ]
        if card is not None:
            readme_operation = CommitOperationAdd("README.md", card_for_repo(card, repo_url.repo_id))
            operations.insert(0, readme_operation)
        if revision is not None and not revision.startswith("refs/pr/"):
            create_branch(repo_url.repo_id, branch=revision, token=token, repo_type=repo_type, exist_ok=True)
        commit = create_commit(
            repo_url.repo_id,
            operations,
            commit_message=commit_message,
            commit_description=commit_description,
            token=token,
            repo_type=repo_type,
            revision=revision,
            create_pr=create_pr,
        )
    return repo_url, commit


def push_to_hub(
    model_dir: str | os.PathLike,
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload hf-jepa model",
    revision: str | None = None,
    create_pr: bool = False,
) -> str:
    """Upload a saved model folder (weights, config, card, image processor, figures, metrics) to `repo_id` in one
    commit (`upload_in_one_commit`): Accelerate checkpoints, tracker logs and caches are left out (`RUN_STATE`), and
    the folder is only read, so a failed push, or a push to another repo, leaves the local card as it was. Returns the
    repo URL, or the pull request's URL with `create_pr`."""
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a saved model folder (no config.json)")
    if not (folder / "README.md").is_file():
        logger.warning("%s has no README.md: the repo will have no model card", folder)
    repo_url, commit = upload_in_one_commit(
        folder,
        repo_id,
        token=token,
        private=private,
        commit_message=commit_message,
        revision=revision,
        create_pr=create_pr,
    )
    logger.info("Uploaded %s to %s (%s)", folder, repo_url.repo_id, commit.pr_url or commit.commit_url)
    return str(commit.pr_url) if create_pr and commit.pr_url else str(repo_url)
