"""Experiment trackers of the Accelerate loop: the `log_with` names accepted and where the local ones write.

TensorBoard writes under `<output_dir>/logs`; trackio (Hugging Face's local-first tracker, `pip install
hf-jepa[trackio]`) writes its SQLite database under `<output_dir>/logs/trackio` unless `TRACKIO_DIR` is set, and never
touches the network unless `TRACKIO_SPACE_ID` / `TRACKIO_SERVER_URL` ask it to. Torch-free: `TrainingArguments`
validates `log_with` with it while the CLI parses."""

import logging
import os
import sys

logger = logging.getLogger(__name__)

# The trackers accelerate 1.15 knows (`accelerate.utils.LoggerType`), minus "all" (which would start every tracker
# that happens to be installed).
TRACKERS = ("tensorboard", "trackio", "wandb", "mlflow", "comet_ml", "aim", "clearml", "dvclive", "swanlab")
# trackio reads this environment variable once, when it is first imported.
TRACKIO_DIR_ENV = "TRACKIO_DIR"


def parse_log_with(log_with: str) -> list[str]:
    """`"tensorboard"`, `"trackio"` or a comma-separated list (`"tensorboard,trackio"`) -> the tracker names.
    Raises ValueError naming `log_with` for an empty or unknown name."""
    names = [name.strip() for name in log_with.split(",") if name.strip()]
    if not names:
        raise ValueError(f"log_with must name a tracker ({', '.join(TRACKERS)}), got {log_with!r}")
    for name in names:
        if name not in TRACKERS:
            raise ValueError(
                f"log_with: unknown tracker {name!r}; expected one or a comma-separated list of {', '.join(TRACKERS)}"
            )
    return names


def trackio_directory(output_dir: str) -> str:
    """Where trackio will write this run: `$TRACKIO_DIR` if the user set it, else `<output_dir>/logs/trackio` (set
    through the environment before trackio is imported). trackio fixes its folder at its first import, so a second
    run in the same process writes where the first did: that folder is returned and a warning says so."""
    wanted = os.environ.setdefault(TRACKIO_DIR_ENV, os.path.abspath(os.path.join(output_dir, "logs", "trackio")))
    trackio_utils = sys.modules.get("trackio.utils")
    actual = str(trackio_utils.TRACKIO_DIR) if trackio_utils is not None else wanted
    if os.path.abspath(actual) != os.path.abspath(wanted):
        logger.warning(
            "trackio was imported earlier in this process and keeps writing to %s (not %s): start a new process "
            "or set TRACKIO_DIR before the first run to choose the folder",
            actual,
            wanted,
        )
    return actual


def tracker_setup(log_with: str | None, output_dir: str) -> tuple[list[str], dict]:
    """The tracker names for `Accelerator(log_with=...)` and the `init_kwargs` for `init_trackers` (trackio: the run
    is named after the output folder)."""
    if not log_with:
        return [], {}
    names = parse_log_with(log_with)
    init_kwargs = {}
    if "trackio" in names:
        directory = trackio_directory(output_dir)
        init_kwargs["trackio"] = {"name": os.path.basename(os.path.abspath(output_dir))}
        logger.info("trackio logs to %s (view with: TRACKIO_DIR=%s trackio show)", directory, directory)
    return names, init_kwargs
