"""`hf-jepa probe MODEL --data ...`: linear, kNN and attentive probes on the frozen features of a saved hf-jepa folder
or a transformers encoder (hf_jepa.probing), with the learned-vs-untrained rows; prints a markdown table (or JSON),
writes probe_results.json and the card's model-index. Importing this module imports no torch."""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import shutil
from pathlib import Path

from .cli_errors import CliError

logger = logging.getLogger("hf_jepa.cli")

__all__ = ["add_probe_commands"]


def _settings(overrides):
    from .cli_settings import coerce, parse_overrides, type_annotations
    from .probing.runner import ProbeSettings
    from .settings import dataclass_defaults

    fields, annotations = dataclass_defaults(ProbeSettings), type_annotations(ProbeSettings)
    values = {}
    for key, value in parse_overrides(overrides).items():
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CliError(f"probe --set {key}: no such probe setting{hint}; valid: {sorted(fields)}")
        values[key] = coerce(key, value, fields[key], annotations.get(key, ""))
    try:
        return ProbeSettings(**values)
    except (TypeError, ValueError) as error:
        raise CliError(f"probe --set: {' '.join(str(error).split())}") from error


def _check_model(reference: str) -> Path | None:
    """The local folder `reference` names (None for a Hub id); a CliError for a missing folder or one without a
    saved model."""
    from .recipes._checks import _REPO_ID

    path = Path(reference).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CliError(f"MODEL {reference!r}: this folder has no config.json, so it holds no saved model")
        return path
    if path.exists():
        raise CliError(f"MODEL {reference!r} is a file; give a saved model folder or a Hub model id")
    if reference.startswith((".", "/", "~")) or not _REPO_ID.fullmatch(reference):
        raise CliError(f"MODEL {reference!r} does not exist; give a saved model folder or a Hub model id")
    return None


def _training_seed(folder: Path | None) -> int | None:
    """The seed the folder was trained with (its training_args.json), None when it records none."""
    file = folder / "training_args.json" if folder else None
    if file is None or not file.is_file():
        return None
    try:
        seed = json.loads(file.read_text(encoding="utf-8")).get("seed")
    except (OSError, ValueError, AttributeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _data(args, encoder, settings):
    from .probing.data import load_probe_data

    columns = (
        f"an image column (--set image_column=, now {settings.image_column!r})"
        if encoder.kind == "image"
        else f"a text column (--set text_column=, now {settings.text_column!r})"
    )
    try:
        return load_probe_data(
            args.data,
            encoder.kind,
            train_examples=settings.train_examples,
            test_examples=settings.test_examples,
            seed=settings.seed,
            image_column=settings.image_column,
            text_column=settings.text_column,
            label_column=settings.label_column,
            image_size=encoder.image_size,
            num_channels=encoder.num_channels if encoder.kind == "image" else 1,
        )
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        raise CliError(
            f"--data {args.data!r}: {' '.join(str(error).split())}; MODEL is {encoder.description}: give "
            f"{encoder.kind} data with {columns} and a label column (--set label_column=, now "
            f"{settings.label_column!r})"
        ) from error


def cmd_probe(args: argparse.Namespace) -> int:
    from .probing.runner import parse_probes
    from .progress import no_progress_bars

    try:
        probes = parse_probes(args.probes)
    except ValueError as error:
        raise CliError(f"{error}; choose from linear, knn, attentive (comma-separated)") from error
    settings = _settings(args.overrides or [])
    folder = _check_model(args.model)
    if args.output_dir is None and folder is None:
        raise CliError(f"--output-dir is required: MODEL {args.model!r} is a Hub id, not a folder to write into")
    output = Path(args.output_dir) if args.output_dir else folder
    with no_progress_bars(args.no_progress):
        return _probe(args, probes, settings, folder, output)


def _probe(args, probes, settings, folder: Path | None, output: Path) -> int:
    from .cards.probes import write_probe_card
    from .probing.encoders import load_encoder
    from .probing.runner import RESULTS_FILE, results_table, run_probes

    try:
        encoder = load_encoder(args.model, device=settings.device)
    except ValueError as error:
        raise CliError(" ".join(str(error).split())) from error
    data = _data(args, encoder, settings)
    results = run_probes(encoder, data, probes, settings, untrained_seed=_training_seed(folder))
    table = results_table(results)
    output.mkdir(parents=True, exist_ok=True)
    (output / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    card = None
    if not args.no_card:
        if folder is not None and output.resolve() != folder.resolve() and (folder / "README.md").is_file():
            if not (output / "README.md").exists():  # the model's own card, copied: the model folder is left as it is
                shutil.copyfile(folder / "README.md", output / "README.md")
        card = write_probe_card(output, results, table, model_name=Path(args.model).name)
    print(json.dumps(results, indent=2) if args.json else table)
    logger.info("Wrote %s%s", output / RESULTS_FILE, f" and the model-index of {card}" if card else "")
    return 0


def add_probe_commands(sub) -> tuple[argparse.ArgumentParser, ...]:
    """Add `probe` to the `hf-jepa` subparsers `sub`; returns its parser."""
    probe = sub.add_parser(
        "probe",
        help="linear, kNN and attentive probes on a model's frozen features, beside its untrained twin",
        description="Probe the frozen features of MODEL (an hf-jepa folder: bro-jepa, epm-jepa, i-jepa, t-jepa; or a "
        "transformers vision or text encoder, folder or Hub id) on labelled data, and the same config freshly "
        "initialised. Prints a markdown table, writes probe_results.json and adds the results to the card's "
        "model-index (README.md) in MODEL, or in --output-dir.",
    )
    probe.add_argument("model", metavar="MODEL", help="a saved model folder or a transformers Hub id")
    probe.add_argument(
        "--data",
        help="labelled data: images (a folder, a datasets folder or Hub id, 'embedded' digits, 'hub' MNIST; default "
        "$HF_JEPA_MNIST, the Hub, else the embedded digits) or text (a folder or CSV/JSON(L) file with text and label "
        "columns; default the embedded topic classes)",
    )
    probe.add_argument(
        "--probes", default="linear,knn,attentive", help="comma-separated: linear, knn, attentive (default: all)"
    )
    probe.add_argument(
        "--set",
        dest="overrides",
        nargs="+",
        action="extend",
        metavar="KEY=VALUE",
        default=[],
        help="probe settings, e.g. --set train_examples=1000 knn_k=10 attentive_steps=200 device=cpu",
    )
    probe.add_argument("--output-dir", help="where probe_results.json and the card go (default: MODEL's folder)")
    probe.add_argument("--no-card", action="store_true", help="do not touch README.md")
    probe.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    probe.add_argument("--no-progress", action="store_true", help="no progress bars")
    probe.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    probe.set_defaults(handler=cmd_probe)
    return (probe,)
