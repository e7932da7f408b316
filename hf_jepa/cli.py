"""The ``hf-jepa`` command line: train, evaluate, reproduce and push JEPA models.

    hf-jepa train bro-jepa|epm-jepa|t-jepa|i-jepa|jepa-reasoner|jepa-mono-talker|jepa-dual-talker|coupled-lm|coconut
        [--config FILE.yaml] [--set key=value ...] --output-dir DIR
    hf-jepa eval DIR [--data PATH] [--set key=value ...] [--json] [--no-progress]
    hf-jepa reproduce bro-jepa [--data PATH] [--output-dir DIR] [--quick] [--variant NAME ...]
    hf-jepa reproduce epm-jepa [--data PATH] [--output-dir DIR] [--quick] [--set preset=full seeds=[0,1,2] ...]
    hf-jepa reproduce t-jepa [--data TEXT] [--output-dir DIR] [--quick] [--set mnist=PATH seeds=[0,1,2,3,4] ...]
    hf-jepa reproduce jepa-reasoner [--output-dir DIR] [--quick] [--set tasks=[cfg] steps_scale=2 seed=1 ...]
    hf-jepa reproduce jepa-reasoner --data gsm8k --set protocol=gsm8k preset=full shots=[5,8]
    hf-jepa push DIR REPO_ID [--private] [--revision BRANCH] [--create-pr]
    hf-jepa push-dataset KIND REPO_ID [--set key=value ...] [--private] [--revision REV] [--token TOKEN]
    hf-jepa configs [list] | configs path [NAME] | configs copy DIR [--force]

A user error (a bad argument, setting or file, a corrupt model folder, a Hub that cannot be reached) prints one line
``hf-jepa: error: ...`` and exits with status 2; ``--debug`` prints the traceback too. Anything else is a bug: its
traceback and one ``hf-jepa: internal error`` line, status 1. See `hf_jepa.cli_errors` and docs/reliability.md.

Settings (YAML keys and ``--set`` names) are routed by name to the family's model config, the shared
`TrainingArguments` or the family's data arguments; a ``model.``, ``train.`` or ``data.`` prefix picks the target
explicitly. Values are read with YAML rules (``--set lr=1e-3 cnn_channels=[8,16] data=embedded``). Families plug in
through the `FAMILIES` each `hf_jepa.recipes` module exports, reproductions through `hf_jepa.reproductions`;
nothing here is family-specific, and nothing heavy (torch, transformers) is imported before a command runs.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .recipes.family import Family


from .cli_convert import add_convert_commands
from .cli_errors import CliError, OneLineParser, check_variants, load_model, report
from .cli_export import add_export_commands
from .cli_probe import add_probe_commands
from .cli_settings import (
    TrainSetup,
    build_train_setup,
    coerce,
    families,
    family_by_name,
    parse_overrides,
    read_yaml,
    type_annotations,
)
from .cli_spaces import add_space_commands
from .version import __version__

logger = logging.getLogger("hf_jepa.cli")

__all__ = ["CliError", "TrainSetup", "build_train_setup", "families", "format_metrics", "main", "parse_overrides"]


# ---------------------------------------------------------------------------------------------------- output


def _format_number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def format_metrics(metrics: Mapping[str, Any], family: Family | None = None) -> str:
    """A markdown table of `metrics`: the family's summary rows when it has them (else every scalar metric), then the
    family's extra table (e.g. BRo-JEPA's per-operation accuracies)."""
    rows = list(family.result_rows(metrics)) if family is not None and family.result_rows else []
    if not rows:
        rows = [(k, _format_number(v)) for k, v in metrics.items() if not isinstance(v, dict)]
    text = "\n".join(["| Metric | Value |", "|---|---|", *[f"| {name} | {value} |" for name, value in rows]])
    if family is not None and family.extra_table is not None:
        extra = family.extra_table(metrics)
        text += f"\n\n{extra}" if extra else ""
    return text


def _json_default(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


# ---------------------------------------------------------------------------------------------------- commands


def cmd_train(args: argparse.Namespace) -> int:
    from .trainers.trainer import JepaTrainer

    settings: dict[str, Any] = {}
    if args.config:
        settings.update(read_yaml(args.config))
    settings.update(parse_overrides(args.overrides or []))
    if args.output_dir:
        settings = {
            k: v for k, v in settings.items() if k not in ("output_dir", "train.output_dir", "training.output_dir")
        }
        settings["output_dir"] = args.output_dir
    if args.overwrite:  # the trainer clears a non-empty output folder only when asked
        settings["overwrite_output_dir"] = True
    if not any(k in settings for k in ("output_dir", "train.output_dir", "training.output_dir")):
        raise CliError("--output-dir is required (or an output_dir setting)")
    setup = build_train_setup(args.family, settings)
    logger.info("%s preset %s; settings routed: %s", setup.family.name, setup.preset, setup.routed or "none")
    recipe = setup.family.make_recipe(setup.config, setup.data_args, seed=setup.training_args.seed)
    result = JepaTrainer(recipe, setup.training_args).train()
    if result.metrics:  # only the main process has them
        print(format_metrics(result.metrics, setup.family))
        if setup.training_args.save_model:
            print(f"\nSaved to {setup.training_args.output_dir}")
    return 0


def _saved_config(folder: str) -> dict[str, Any]:
    """The config.json of the model saved in `folder`, read as JSON (nothing is loaded yet)."""
    from .recipes._saved import read_json_mapping

    config = Path(folder, "config.json")
    if not config.is_file():
        what = "is not a saved model folder (no config.json)" if Path(folder).is_dir() else "does not exist"
        raise CliError(f"{folder!r} {what}; give a saved model folder (the --output-dir of hf-jepa train)")
    try:
        return read_json_mapping(config, "config", "save it again")
    except ValueError as error:
        raise CliError(str(error)) from error


def _saved_family(folder: str) -> Family:
    """The family that evaluates the model saved in `folder` (by its config's model_type, see `Family.handles`)."""
    config = _saved_config(folder)
    for family in families().values():
        if family.handles(config):
            return family
    known = ", ".join(f"{f.model_type} ({name})" for name, f in families().items())
    raise CliError(
        f"{folder!r} holds a model of type {config.get('model_type')!r}, which hf-jepa eval does not know; "
        f"it knows {known}"
    )


def _eval_data_args(family: Family, folder: str, data: str | None, overrides: Sequence[str]):
    """The data arguments `hf-jepa eval` evaluates with: the settings the folder was trained with (its
    data_args.json; defaults for a folder without one) minus the family's training-only ones, the folder's own
    tokenizer, then `--data` and `--set` on top."""
    from .recipes._saved import read_data_settings
    from .settings import dataclass_defaults

    data_fields = dataclass_defaults(family.data_args_class)
    annotations = type_annotations(family.data_args_class)
    try:
        saved = read_data_settings(folder)
    except ValueError as error:
        raise CliError(str(error)) from error
    data_kwargs = {k: v for k, v in saved.items() if k in data_fields and k not in family.training_only_settings}
    if data is not None and "data" in data_fields:
        data_kwargs["data"] = data
    if "tokenizer" in data_fields and Path(folder, "tokenizer_config.json").is_file():
        data_kwargs["tokenizer"] = folder  # the vocabulary the model was trained with
    for key, value in parse_overrides(overrides).items():
        if key not in data_fields:
            close = difflib.get_close_matches(key, data_fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CliError(
                f"eval --set {key}: no such data setting{hint} for {family.name}; valid: {sorted(data_fields)}"
            )
        data_kwargs[key] = coerce(key, value, data_fields[key], annotations.get(key, ""))
    try:  # the data arguments are checked before the model is loaded
        return family.data_args_class(**data_kwargs)
    except (TypeError, ValueError) as error:
        saved_note = f" (on top of the data settings saved in {folder})" if saved else ""
        raise CliError(f"eval --set: {' '.join(str(error).split())}{saved_note}") from error


def cmd_eval(args: argparse.Namespace) -> int:
    import hf_jepa  # noqa: F401  (registers the configs and models with the Auto classes)

    from .progress import no_progress_bars

    with no_progress_bars(args.no_progress):
        return _evaluate(args)


def _evaluate(args: argparse.Namespace) -> int:
    family = _saved_family(args.model_dir)
    data_args = _eval_data_args(family, args.model_dir, args.data, args.overrides or [])
    model = load_model(args.model_dir)
    model.eval()
    try:  # a recipe refuses a model that does not fit the data (a vocabulary, a missing reasoner): one line
        recipe = family.recipe_for_saved(model, data_args, args.model_dir)
    except ValueError as error:
        raise CliError(f"eval {args.model_dir}: {' '.join(str(error).split())}") from error
    metrics = recipe.evaluate(model, args.output_dir)
    if args.json:
        print(json.dumps(metrics, indent=2, default=_json_default))
    else:
        print(format_metrics(metrics, family))
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .reproductions import load_reproductions

    family = family_by_name(args.family)
    reproductions = load_reproductions()
    if family.name not in reproductions:
        raise CliError(f"{family.name} has no reproduction; families with one: {sorted(reproductions)}")
    reproduce = reproductions[family.name]
    accepted = inspect.signature(reproduce).parameters
    extra = parse_overrides(args.overrides or [])
    if args.variant:
        check_variants(family.name, reproduce, args.variant)
        extra["variants"] = args.variant
    data = args.data
    if "data" in extra:  # `--set data=X` is the same option as `--data X`
        if args.data is not None:
            raise CliError("give the data once: --data or --set data=, not both")
        data = extra.pop("data")
    unknown = sorted(set(extra) - set(accepted) - {"data", "output_dir", "quick"})
    if unknown:
        options = sorted(set(accepted) - {"data", "output_dir", "quick"})
        raise CliError(f"{family.name} reproduction does not take {unknown}; its options: {options}")
    for key, value in extra.items():
        default = accepted[key].default
        if isinstance(default, tuple) and isinstance(value, (list, int)):
            extra[key] = tuple(value) if isinstance(value, list) else (value,)
        elif default is not inspect.Parameter.empty:
            extra[key] = coerce(key, value, default, str(accepted[key].annotation))
    from .progress import no_progress_bars

    with no_progress_bars(args.no_progress):
        result = reproduce(data=data, output_dir=args.output_dir, quick=args.quick, **extra)
    print(result.table)
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from .cli_errors import describe
    from .hub import push_to_hub

    try:
        url = push_to_hub(
            args.model_dir,
            args.repo_id,
            token=args.token,
            private=args.private,
            commit_message=args.commit_message,
            revision=args.revision,
            create_pr=args.create_pr,
        )
    except Exception as error:
        message = describe(error)
        if message is None:
            raise
        raise CliError(
            f"push of {args.model_dir} to {args.repo_id} failed: {message} (the local folder is unchanged)"
        ) from error
    print(url)
    return 0


def cmd_push_dataset(args: argparse.Namespace) -> int:
    """Generate a dataset kind with the generator's parameters (`--set`), render its card and push both."""
    from .cli_errors import describe
    from .data.sharing import DATASET_KINDS, push_dataset
    from .settings import dataclass_defaults

    if args.kind not in DATASET_KINDS:
        close = difflib.get_close_matches(args.kind, DATASET_KINDS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise CliError(f"unknown dataset kind {args.kind!r}{hint}; choose one of: {', '.join(DATASET_KINDS)}")
    parameters_class = DATASET_KINDS[args.kind]
    defaults, annotations, values = dataclass_defaults(parameters_class), type_annotations(parameters_class), {}
    for key, value in parse_overrides(args.overrides or []).items():
        if key not in defaults:
            close = difflib.get_close_matches(key, defaults, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CliError(f"unknown setting {key!r} for {args.kind}{hint}; valid keys: {', '.join(sorted(defaults))}")
        values[key] = coerce(key, value, defaults[key], annotations.get(key, ""))
    options = dict(token=args.token, private=args.private, revision=args.revision, commit_message=args.commit_message)
    try:  # a bad parameter value is reported before the Hub is contacted (the dataclass checks it)
        url = push_dataset(args.kind, args.repo_id, parameters_class(**values), **options)
    except Exception as error:
        if (message := describe(error)) is None:
            raise
        raise CliError(f"push-dataset {args.kind} to {args.repo_id} failed: {message}") from error
    print(url)
    return 0


def cmd_configs(args: argparse.Namespace) -> int:
    """List the shipped configs, print one's installed path, or copy them all for editing (`hf_jepa.configs_access`)."""
    from . import configs_access

    action = args.configs_action or "list"
    try:
        if action == "list":
            print("\n".join(configs_access.list_configs()))
        elif action == "path":
            print(configs_access.config_path(args.name))
        else:
            written = configs_access.copy_configs(args.directory, force=args.force)
            print(f"copied {len(written)} configs to {Path(args.directory).resolve()}")
    except (configs_access.UnknownConfigError, configs_access.ConfigExistsError, NotADirectoryError) as error:
        raise CliError(f"configs {action}: {error} (see 'hf-jepa configs')") from error
    return 0


def _preset_values(family: Family) -> dict[str, Any]:
    """Each model setting of `family` -> its value in the family's default preset (what a run without `preset=` gets;
    the class defaults are often the paper's full size). A sub-config shows as its class name."""
    from transformers import PretrainedConfig

    from .settings import config_fields

    config = family.make_config()
    values = {}
    for name, default in config_fields(family.config_class).items():
        value = getattr(config, name, default)
        values[name] = f"<{type(value).__name__} of the preset>" if isinstance(value, PretrainedConfig) else value
    return values


class _TrainHelp(argparse.Action):
    """`hf-jepa train --help`, and with a family (`hf-jepa train bro-jepa --help`) every key `--set` and YAML accept,
    with the family's default and the one-line description from the class docstrings."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        if getattr(namespace, "family", None):
            from .settings import dataclass_defaults, settings_table
            from .trainers.arguments import TrainingArguments

            family = families()[namespace.family]
            train_defaults = {**dataclass_defaults(TrainingArguments), **family.training_defaults}
            print(f"\nSettings of {family.name} (preset {family.default_preset} unless `preset=` says otherwise):")
            print(
                settings_table(
                    {
                        "model": (family.config_class, _preset_values(family)),
                        "train": (TrainingArguments, train_defaults),
                        "data": (family.data_args_class, dataclass_defaults(family.data_args_class)),
                    }
                )
            )
        parser.exit()


class _FamilyNames:
    """`choices` of the family arguments, read from the registry only when argparse checks a value: `hf-jepa --help`
    then loads no recipe (and no torch)."""

    def __contains__(self, name) -> bool:
        return name in families()

    def __iter__(self):
        return iter(sorted(families()))


def _add_set_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """`--set KEY=VALUE ...` (repeatable, YAML values), collected in `overrides`."""
    parser.add_argument(
        "--set", dest="overrides", nargs="+", action="extend", metavar="KEY=VALUE", default=[], help=help
    )


def build_parser() -> argparse.ArgumentParser:
    family_names = _FamilyNames()
    parser = OneLineParser(prog="hf-jepa", description="Train, evaluate, reproduce and share JEPA models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--debug", action="store_true", help="on an error, print the full traceback too")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{train,eval,reproduce,push,push-dataset,demo,space,push-space,probe,convert,configs}",
    )

    train = sub.add_parser(
        "train",
        add_help=False,
        help="train a model",
        description=(
            "Train a family's model. Settings come from --config (YAML, flat or with model:/train:/data: sections) and "
            "--set key=value (YAML values); each key goes to the model config, the training arguments or the data "
            "arguments, by name. `preset` (tiny | cpu_fast | full) picks the base model config."
        ),
    )
    train.add_argument("family", choices=family_names, metavar="FAMILY", help="one of: %(choices)s")
    train.add_argument(
        "-h", "--help", action=_TrainHelp, nargs=0, help="show this help; after FAMILY, also every setting it takes"
    )
    train.add_argument("--config", help="YAML file of settings")
    _add_set_argument(train, "override settings, e.g. --set preset=tiny max_steps=100 latent_dim=32")
    train.add_argument("--output-dir", help="where the model, metrics and card are written")
    train.add_argument(
        "--overwrite", action="store_true", help="clear a non-empty output folder first (sets overwrite_output_dir)"
    )
    train.set_defaults(handler=cmd_train)

    evaluate = sub.add_parser("eval", help="evaluate a saved model on the test split")
    evaluate.add_argument("model_dir")
    evaluate.add_argument(
        "--data",
        help="data source: a local folder, 'hub' or 'embedded' (default: $HF_JEPA_MNIST, else the Hub, "
        "else the embedded digits)",
    )
    _add_set_argument(
        evaluate,
        "data settings of the model's family on top of those it was trained with (data_args.json), "
        "e.g. --set eval_images=500",
    )
    evaluate.add_argument("--no-progress", action="store_true", help="no progress bars")
    evaluate.add_argument("--output-dir", help="also write figures (latent PCA) here")
    evaluate.add_argument("--json", action="store_true", help="print the metrics as JSON")
    evaluate.set_defaults(handler=cmd_eval)

    reproduce = sub.add_parser("reproduce", help="rerun a paper's experiments and print the results table")
    reproduce.add_argument(
        "family",
        choices=family_names,
        metavar="FAMILY",
        help="a family with a reproduction (bro-jepa, epm-jepa, t-jepa, jepa-reasoner)",
    )
    reproduce.add_argument("--data", help="data source: a local folder, 'hub' or 'embedded'")
    reproduce.add_argument("--output-dir", help="where each run is saved")
    reproduce.add_argument("--quick", action="store_true", help="short runs (smoke test of the whole table)")
    reproduce.add_argument(
        "--variant",
        action="append",
        metavar="NAME",
        help="rerun only this row (repeatable); the other rows of the saved table are kept",
    )
    _add_set_argument(reproduce, "options of the family's reproduction, e.g. --set preset=full seeds=[0,1,2,3,4]")
    reproduce.add_argument("--no-progress", action="store_true", help="no progress bars")
    reproduce.set_defaults(handler=cmd_reproduce)

    push = sub.add_parser("push", help="upload a saved model folder to the Hugging Face Hub")
    push.add_argument("model_dir")
    push.add_argument("repo_id")
    push.add_argument("--private", action="store_true")
    push.add_argument("--token", help="Hub token (default: the logged-in one / $HF_TOKEN)")
    push.add_argument("--commit-message", default="Upload hf-jepa model")
    push.add_argument("--revision", help="branch to commit to (created from main when missing; default main)")
    push.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing")
    push.set_defaults(handler=cmd_push)

    push_dataset = sub.add_parser(
        "push-dataset",
        help="generate a synthetic dataset and upload it with its card to the Hub (local files untouched)",
        description="KIND: moving-mnist-gravity, ambiguity-corpus, reasoning-tree-search, reasoning-cfg, "
        "reasoning-arithmetic; --set takes the generator's parameters (defaults: the recipe's).",
    )
    push_dataset.add_argument("kind", metavar="KIND")
    push_dataset.add_argument("repo_id", metavar="REPO_ID")
    _add_set_argument(push_dataset, "generator parameters, e.g. --set seed=1 train_sequences=512")
    push_dataset.add_argument("--private", action="store_true")
    push_dataset.add_argument("--revision", help="branch to push to (created from main when missing)")
    push_dataset.add_argument("--token", help="Hub token (default: the logged-in one / $HF_TOKEN)")
    push_dataset.add_argument("--commit-message")
    push_dataset.set_defaults(handler=cmd_push_dataset)

    demo, space, push_space = add_space_commands(sub)
    add_export_commands(sub)
    convert = add_convert_commands(sub)
    add_probe_commands(sub)

    configs = sub.add_parser(
        "configs",
        help="list, locate or copy the shipped training and Accelerate launch configs",
        description="Without an action: list the configs (names relative to the configs folder). 'path [NAME]' prints "
        'the installed absolute path (e.g. accelerate launch --config_file "$(hf-jepa configs path '
        "accelerate/cpu_2proc.yaml)\" ...); 'copy DIR' copies them all to DIR for editing.",
    )
    configs_actions = configs.add_subparsers(dest="configs_action", metavar="{list,path,copy}")
    configs_list = configs_actions.add_parser("list", help="list the configs (the default)")
    configs_path = configs_actions.add_parser("path", help="print the absolute path of a config, or of their folder")
    configs_path.add_argument("name", nargs="?", metavar="NAME", help="e.g. accelerate/cpu_2proc.yaml")
    configs_copy = configs_actions.add_parser("copy", help="copy every config to DIR, keeping the layout")
    configs_copy.add_argument("directory", metavar="DIR")
    configs_copy.add_argument("--force", action="store_true", help="overwrite files that already exist")
    configs.set_defaults(handler=cmd_configs, needs_models=False)
    configs_commands = (configs, configs_list, configs_path, configs_copy)
    for command in (
        train,
        evaluate,
        reproduce,
        push,
        push_dataset,
        demo,
        space,
        push_space,
        convert,
        *configs_commands,
    ):  # `train ... --debug` works too
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        if getattr(args, "needs_models", True):  # `hf-jepa configs` reads files only: no torch
            from . import register_auto_classes

            register_auto_classes()  # the `hf-jepa` process skipped it at import, to keep --help free of torch
        return handler(args)
    except (Exception, KeyboardInterrupt) as error:  # one line + status 2, or a traceback + status 1 (cli_errors)
        raise SystemExit(report(error, debug=args.debug)) from None


if __name__ == "__main__":
    sys.exit(main())
