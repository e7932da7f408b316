"""How the ``hf-jepa`` command line reports a failure: one line on stderr and an exit status, or a traceback.

The taxonomy (docs/reliability.md has the cases):

* **User errors** (exit 2, one line ``hf-jepa: error: ...``, no traceback):
  - `CliError`: what hf-jepa itself finds wrong in the command (an argument, a setting, a file), raised by `hf_jepa.cli`
    with a message naming the argument or file and what to do;
  - known errors of the stack, described by `describe`: `OSError` (a missing or unreadable file or folder, a model that
    cannot be found; the Hub client's HTTP and offline errors are `OSError` too), huggingface_hub's `HFValidationError`
    (a malformed repo id), the HTTP client's transport errors (no connection, timeout), safetensors' `SafetensorError`
    (truncated or corrupt weights), and a `ValueError` / `TypeError` / `RuntimeError` raised by a ``raise`` statement
    of hf_jepa's own code: the validation messages of configs, data and training arguments, recipes and loading.
  With ``--debug`` the full traceback (with its chained causes) is printed before that line.
* **Internal errors** (exit 1): anything else is taken for a bug: the traceback is always printed (so a long run need
  not be repeated to get it), then one line ``hf-jepa: internal error: ...`` asking for a report.
* Ctrl-C: ``hf-jepa: interrupted`` and exit 130.

Argument-parsing errors (an unknown family, a missing argument) are one line and exit 2 as well (`OneLineParser`).
Also here, the checks whose whole job is a clear message: `yaml_error_message` (file:line:column of a malformed config),
`check_variants` (``reproduce --variant`` names) and `load_model` (``eval``: truncated or corrupt weights named).
Torch-free: nothing here imports a heavy module (exception classes are looked up in modules already imported).
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_USER",
    "CliError",
    "OneLineParser",
    "check_variants",
    "describe",
    "load_model",
    "one_line",
    "report",
    "yaml_error_message",
]

EXIT_USER = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130
_PACKAGE_DIR = Path(__file__).resolve().parent


class CliError(ValueError):
    """A user error found by the CLI: printed as one line without a traceback, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are one line (``hf-jepa: error: ... (see 'hf-jepa train --help')``)
    instead of the usage block followed by the message."""

    def error(self, message: str):
        self.exit(EXIT_USER, f"hf-jepa: error: {one_line(message)} (see '{self.prog} --help')\n")


def one_line(text: object) -> str:
    """`text` on one line: every run of whitespace (newlines included) becomes one space."""
    return " ".join(str(text).split())


def _instance_of(error: BaseException, module: str, name: str) -> bool:
    """`isinstance(error, module.name)`, without importing `module` (an error of a never imported module's class
    cannot exist)."""
    cls = getattr(sys.modules.get(module), name, None)
    return isinstance(cls, type) and isinstance(error, cls)


def _raised_by_hf_jepa(error: BaseException) -> bool:
    """True when the innermost frame of `error`'s traceback is a ``raise`` statement in hf_jepa's own code: a message
    written for the user (a failure inside a library call or a Python operation is a bug, not a message)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    try:
        inside = Path(last.filename).resolve().is_relative_to(_PACKAGE_DIR)
    except (OSError, ValueError):
        return False
    return inside and (last.line or "").lstrip().startswith("raise ")


def _hub_endpoint() -> str:
    constants = sys.modules.get("huggingface_hub.constants")
    return getattr(constants, "ENDPOINT", "the Hub")


def _describe_hub(error: BaseException) -> str | None:
    """The Hub client's errors: offline mode, no connection, HTTP error answers, a malformed repo id."""
    errors = "huggingface_hub.errors"
    if _instance_of(error, errors, "OfflineModeIsEnabled"):
        return f"cannot reach the Hub: offline mode is on (HF_HUB_OFFLINE=1); unset HF_HUB_OFFLINE to use {_hub_endpoint()}"
    if _instance_of(error, errors, "HFValidationError"):
        return f"invalid repo id: {one_line(error)}"
    if _instance_of(error, errors, "HfHubHTTPError"):
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
        request = getattr(response, "request", None)
        where = f" for {request.method} {request.url}" if request is not None else ""
        server = getattr(error, "server_message", None)
        said = f" ({one_line(server)})" if server else ""
        if _instance_of(error, errors, "RepositoryNotFoundError") or status == 404:
            advice = "check the repo id, and that your token may access it (`hf auth login`, or --token)"
        elif status in (401, 403):
            advice = "log in with `hf auth login` (or pass --token) with a token that has write access to the repo"
        elif status is not None and status >= 500:
            advice = "the Hub failed; try again later"
        else:
            advice = "check the repo id, the arguments and your token"
        return f"the Hub answered HTTP {status}{where}{said}; {advice}"
    for module in ("httpx2", "httpx"):
        if _instance_of(error, module, "TransportError"):
            return (
                f"cannot reach the Hub at {_hub_endpoint()} ({type(error).__name__}: {one_line(error) or 'no detail'}); "
                "check the network, HF_ENDPOINT and proxy settings, or try again later"
            )
    return None


def describe(error: BaseException) -> str | None:
    """The one-line message of a known (user-facing) error, or None when `error` looks like a bug."""
    if isinstance(error, CliError):
        return one_line(error)
    hub = _describe_hub(error)
    if hub is not None:
        return hub
    if type(error).__name__ == "SafetensorError":
        return (
            f"cannot read a .safetensors weights file: it is truncated or corrupt ({one_line(error)}); "
            "save the model again, or download it again"
        )
    if isinstance(error, OSError):
        if error.filename is not None and error.strerror:
            advice = {
                FileNotFoundError: "check the path",
                PermissionError: "check the permissions, or choose another path",
                IsADirectoryError: "give a file, not a folder",
                NotADirectoryError: "give a folder, not a file",
                FileExistsError: "remove it or choose another path",
            }.get(type(error), "check the path")
            return f"{error.filename}: {error.strerror}; {advice}"
        return one_line(error) or type(error).__name__
    if isinstance(error, (ValueError, TypeError, RuntimeError, FloatingPointError)) and _raised_by_hf_jepa(error):
        return one_line(error)
    return None


def yaml_error_message(path: str, error: Exception) -> str:
    """`FILE:LINE:COLUMN: invalid YAML (problem); ...` for a `yaml.YAMLError` raised while reading `path`."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
    problem = getattr(error, "problem", None) or error
    return f"{where}: invalid YAML ({one_line(problem)}); fix the file (a mapping of settings, e.g. `max_steps: 100`)"


def check_variants(family_name: str, reproduce: Callable, variants: Sequence[str]) -> None:
    """Each --variant must be a row of the reproduction's table (its module's `VARIANTS`, when it lists them)."""
    if "variants" not in inspect.signature(reproduce).parameters:
        raise CliError(f"--variant: the {family_name} reproduction has no variants to choose from; drop --variant")
    known = getattr(sys.modules.get(reproduce.__module__), "VARIANTS", None)
    for name in [] if known is None else variants:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CliError(
                f"--variant {name!r}: no such row in the {family_name} reproduction{hint}; choose from "
                f"{', '.join(map(repr, known))} (quote names with spaces)"
            )


def _refuse_classifier_folder(folder: str) -> None:
    """A `CliError` for a folder holding one of hf-jepa's fine-tuning heads: the commands that load a model read
    the JEPA model's folder (AutoModel would try to load the head's weights into the JEPA model and fail strictly)."""
    import json

    import hf_jepa

    from .saving import HEAD_TASKS

    config = Path(folder) / "config.json"
    if not config.is_file():
        return
    try:
        architectures = json.loads(config.read_text()).get("architectures") or []
    except (ValueError, AttributeError):
        return  # the loader reports a broken config.json
    tasks = {
        name: HEAD_TASKS[auto_class]
        for name in architectures
        if name in hf_jepa.__all__
        and (auto_class := getattr(getattr(hf_jepa, name), "_auto_class", None)) in HEAD_TASKS
    }
    if tasks:
        (head, task), *_ = tasks.items()
        raise CliError(
            f"{folder}: holds a {head}, a classifier fine-tuned from a JEPA model; this command reads the JEPA "
            f"model's folder. Run the classifier with transformers' pipeline({task!r}), or give the JEPA folder "
            "it was loaded from"
        )


def load_model(folder: str):
    """`AutoModel.from_pretrained(folder)` for `hf-jepa eval`, without transformers' load report and progress bar (the
    strict loader raises on any mismatch); a truncated or corrupt weights file is a `CliError` naming the file."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    _refuse_classifier_folder(folder)
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        return AutoModel.from_pretrained(folder)
    except Exception as error:
        if type(error).__name__ != "SafetensorError":
            raise
        files = ", ".join(str(p) for p in sorted(Path(folder).glob("*.safetensors"))) or folder
        raise CliError(
            f"{files}: the weights are truncated or corrupt ({one_line(error)}); save the model again, "
            "or download it again"
        ) from error
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def report(error: BaseException, debug: bool = False, stream: TextIO | None = None) -> int:
    """Print `error` as the taxonomy above says and return the exit status."""
    stream = sys.stderr if stream is None else stream
    if isinstance(error, KeyboardInterrupt):
        if debug:
            traceback.print_exception(error, file=stream)
        print("hf-jepa: interrupted", file=stream)
        return EXIT_INTERRUPTED
    message = describe(error)
    if message is None:
        traceback.print_exception(error, file=stream)
        print(
            f"hf-jepa: internal error: {type(error).__name__}: {one_line(error)} (a bug in hf-jepa or a library it "
            "uses: please report it with the traceback above)",
            file=stream,
        )
        return EXIT_INTERNAL
    if debug:
        traceback.print_exception(error, file=stream)
    print(f"hf-jepa: error: {message}", file=stream)
    return EXIT_USER
