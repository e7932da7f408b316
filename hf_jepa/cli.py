"""The ``hf-jepa`` command line: train, evaluate, reproduce and push JEPA models.

    hf-jepa train bro-jepa|epm-jepa|t-jepa|i-jepa|jepa-reasoner|jepa-mono-talker|jepa-dual-talker|coupled-lm|coconut
        [--config FILE.yaml] [--set key=value ...] --output-dir DIR
    hf-jepa eval DIR [--data PATH] [--json]
    hf-jepa reproduce bro-jepa [--data PATH] [--output-dir DIR] [--quick] [--variant NAME ...]
    hf-jepa reproduce epm-jepa [--data PATH] [--output-dir DIR] [--quick] [--set preset=full seeds=[0,1,2] ...]
    hf-jepa reproduce t-jepa [--data TEXT] [--output-dir DIR] [--quick] [--set mnist=PATH seeds=[0,1,2,3,4] ...]
    hf-jepa reproduce jepa-reasoner [--output-dir DIR] [--quick] [--set tasks=[cfg] steps_scale=2 seed=1 ...]
    hf-jepa push DIR REPO_ID [--private]

Settings (YAML keys and ``--set`` names) are routed by name to the family's model config, the shared
`TrainingArguments` or the family's data arguments; a ``model.``, ``train.`` or ``data.`` prefix picks the target
explicitly. Values are read with YAML rules (``--set lr=1e-3 cnn_channels=[8,16] data=embedded``). Families plug in
through :data:`FAMILIES`; nothing below is family-specific.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence


logger = logging.getLogger("hf_jepa.cli")

__all__ = ["FAMILIES", "Family", "TrainSetup", "build_train_setup", "format_metrics", "main", "parse_overrides"]


def _load(path: str) -> Any:
    """`"package.module:attr"` -> the attribute (imported lazily, so `hf-jepa --help` stays fast)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Family:
    """How the CLI drives one JEPA family. Every entry is a lazy ``"module:attribute"`` reference."""

    name: str
    model_type: str  # `config.model_type`, used by `eval` to find the family of a saved model
    config_class: str
    data_args_class: str
    recipe_class: str  # called as recipe_class(config, data_args, seed=...)
    presets: Mapping[str, str | None]  # preset name -> config classmethod name (None: the class defaults)
    default_preset: str
    reproduce: str | None = None  # reproduce(data=, output_dir=, quick=) -> list[dict]
    format_rows: str | None = None  # format_results_table(rows) -> str
    result_rows: str | None = None  # result_rows(metrics) -> [(name, value)] for the printed table
    training_defaults: str | None = None  # dict of TrainingArguments values this family trains with by default

    def load_config_class(self):
        return _load(self.config_class)

    def load_data_args_class(self):
        return _load(self.data_args_class)

    def make_recipe(self, config, data_args, seed: int = 0):
        return _load(self.recipe_class)(config, data_args, seed=seed)

    def make_config(self, preset: str | None, **overrides):
        preset = self.default_preset if preset is None else str(preset).replace("-", "_")
        if preset not in self.presets:
            raise ValueError(f"unknown preset {preset!r} for {self.name}; choose from {sorted(self.presets)}")
        config_class = self.load_config_class()
        method = self.presets[preset]
        return getattr(config_class, method)(**overrides) if method else config_class(**overrides)


FAMILIES: dict[str, Family] = {
    "bro-jepa": Family(
        name="bro-jepa",
        model_type="bro_jepa",
        config_class="hf_jepa.modeling.bro_jepa:BroJepaConfig",
        data_args_class="hf_jepa.trainers.bro_jepa:BroJepaDataArguments",
        recipe_class="hf_jepa.trainers.bro_jepa:BroJepaRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": None},
        default_preset="cpu_fast",
        reproduce="hf_jepa.trainers.bro_jepa:reproduce_bro_jepa",
        format_rows="hf_jepa.trainers.bro_jepa:format_results_table",
        result_rows="hf_jepa.hub:bro_jepa_result_rows",
        training_defaults="hf_jepa.trainers.bro_jepa:TRAINING_DEFAULTS",
    ),
    "epm-jepa": Family(
        name="epm-jepa",
        model_type="epm_jepa",
        config_class="hf_jepa.modeling.epm_jepa:EpmJepaConfig",
        data_args_class="hf_jepa.trainers.epm_jepa:EpmJepaDataArguments",
        recipe_class="hf_jepa.trainers.epm_jepa:EpmJepaRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": None},
        default_preset="cpu_fast",
        reproduce="hf_jepa.trainers.epm_jepa:reproduce_epm_jepa",
        format_rows="hf_jepa.trainers.epm_jepa:format_results_table",
        result_rows="hf_jepa.hub:epm_jepa_result_rows",
        training_defaults="hf_jepa.trainers.epm_jepa:TRAINING_DEFAULTS",
    ),
    "t-jepa": Family(
        name="t-jepa",
        model_type="t_jepa",
        config_class="hf_jepa.modeling.t_jepa:TJepaConfig",
        data_args_class="hf_jepa.trainers.t_jepa:TJepaDataArguments",
        recipe_class="hf_jepa.trainers.t_jepa:TJepaRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": None},
        default_preset="cpu_fast",
        reproduce="hf_jepa.trainers.t_jepa:reproduce_t_jepa",
        format_rows="hf_jepa.trainers.t_jepa:format_t_jepa_tables",
        result_rows="hf_jepa.hub:t_jepa_result_rows",
        training_defaults="hf_jepa.trainers.t_jepa:TRAINING_DEFAULTS",
    ),
    "i-jepa": Family(
        name="i-jepa",
        model_type="i_jepa",
        config_class="hf_jepa.modeling.i_jepa:IJepaConfig",
        data_args_class="hf_jepa.trainers.t_jepa:IJepaDataArguments",
        recipe_class="hf_jepa.trainers.t_jepa:IJepaRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": None},
        default_preset="cpu_fast",
        result_rows="hf_jepa.hub:i_jepa_result_rows",
        training_defaults="hf_jepa.trainers.t_jepa:I_JEPA_TRAINING_DEFAULTS",
    ),
    # JEPA-Reasoner: the reasoner, each Talker (trained on a frozen reasoner: --set reasoner=DIR) and the two coupled
    # baselines are separate families, each with its own config class; `reproduce jepa-reasoner` runs them all.
    "jepa-reasoner": Family(
        name="jepa-reasoner",
        model_type="jepa_reasoner",
        config_class="hf_jepa.modeling.jepa_reasoner:JepaReasonerConfig",
        data_args_class="hf_jepa.trainers.jepa_reasoner:JepaReasonerDataArguments",
        recipe_class="hf_jepa.trainers.jepa_reasoner:JepaReasonerRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": "paper_0_9b"},
        default_preset="cpu_fast",
        reproduce="hf_jepa.trainers.jepa_reasoner:reproduce_jepa_reasoner",
        format_rows="hf_jepa.trainers.jepa_reasoner:format_jepa_reasoner_tables",
        result_rows="hf_jepa.hub:jepa_reasoner_result_rows",
        training_defaults="hf_jepa.trainers.jepa_reasoner:TRAINING_DEFAULTS",
    ),
    "jepa-mono-talker": Family(
        name="jepa-mono-talker",
        model_type="jepa_mono_talker",
        config_class="hf_jepa.modeling.jepa_reasoner:MonoTalkerConfig",
        data_args_class="hf_jepa.trainers.jepa_reasoner:JepaReasonerDataArguments",
        recipe_class="hf_jepa.trainers.jepa_reasoner:TalkerRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": "paper_198m"},
        default_preset="cpu_fast",
        result_rows="hf_jepa.hub:jepa_reasoner_result_rows",
        training_defaults="hf_jepa.trainers.jepa_reasoner:TRAINING_DEFAULTS",
    ),
    "jepa-dual-talker": Family(
        name="jepa-dual-talker",
        model_type="jepa_dual_talker",
        config_class="hf_jepa.modeling.jepa_reasoner:DualTalkerConfig",
        data_args_class="hf_jepa.trainers.jepa_reasoner:JepaReasonerDataArguments",
        recipe_class="hf_jepa.trainers.jepa_reasoner:TalkerRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": "paper_198m"},
        default_preset="cpu_fast",
        result_rows="hf_jepa.hub:jepa_reasoner_result_rows",
        training_defaults="hf_jepa.trainers.jepa_reasoner:TRAINING_DEFAULTS",
    ),
    "coupled-lm": Family(
        name="coupled-lm",
        model_type="jepa_coupled_lm",
        config_class="hf_jepa.modeling.jepa_reasoner:CoupledTransformerConfig",
        data_args_class="hf_jepa.trainers.jepa_reasoner:JepaReasonerDataArguments",
        recipe_class="hf_jepa.trainers.jepa_reasoner:CoupledRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": None},
        default_preset="cpu_fast",
        result_rows="hf_jepa.hub:jepa_reasoner_result_rows",
        training_defaults="hf_jepa.trainers.jepa_reasoner:TRAINING_DEFAULTS",
    ),
    "coconut": Family(
        name="coconut",
        model_type="jepa_coconut",
        config_class="hf_jepa.modeling.jepa_reasoner:CoconutConfig",
        data_args_class="hf_jepa.trainers.jepa_reasoner:JepaReasonerDataArguments",
        recipe_class="hf_jepa.trainers.jepa_reasoner:CoconutRecipe",
        presets={"tiny": "tiny", "cpu_fast": "cpu_fast", "full": None},
        default_preset="cpu_fast",
        result_rows="hf_jepa.hub:jepa_reasoner_result_rows",
        training_defaults="hf_jepa.trainers.jepa_reasoner:TRAINING_DEFAULTS",
    ),
}


class CliError(ValueError):
    """A user error: printed without a traceback, exit status 2."""


# ---------------------------------------------------------------------------------------------------- settings


def _parse_value(text: str) -> Any:
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    # YAML 1.2 booleans only: `mixed_precision=no` is the string "no", not YAML 1.1's False.
    if isinstance(value, bool) and text.strip().lower() not in ("true", "false"):
        return text.strip()
    return value


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b=[1, 2]"]`` -> ``{"a": 1, "b": [1, 2]}`` (values read as YAML)."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set expects key=value, got {item!r}")
        overrides[key.strip()] = _parse_value(value)
    return overrides


def _annotations(cls) -> dict[str, str]:
    """Field name -> annotation text, from `__init__` parameters and dataclass fields."""
    out: dict[str, str] = {}
    if dataclasses.is_dataclass(cls):
        out.update({f.name: str(f.type) for f in dataclasses.fields(cls)})
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.annotation is not inspect.Parameter.empty:
            out[p.name] = str(p.annotation)
    return out


def _coerce(key: str, value: Any, default: Any, annotation: str = "") -> Any:
    """Fix what YAML reads differently from what the field holds: `1e-3` (a string for YAML 1.1) for a float,
    an int for a float field. Other values pass unchanged (the target classes validate them)."""
    if value is None or isinstance(value, bool) or isinstance(default, bool):
        return value
    wants_float = isinstance(default, float) or (default is None and "float" in annotation)
    wants_int = (isinstance(default, int) or (default is None and "int" in annotation)) and not wants_float
    if wants_float and isinstance(value, (int, str)):
        try:
            return float(value)
        except ValueError:
            if isinstance(default, float) or "str" not in annotation:
                raise CliError(f"{key} expects a number, got {value!r}") from None
    if wants_int and isinstance(value, str):
        try:
            as_float = float(value)
        except ValueError:
            if "str" in annotation:
                return value
            raise CliError(f"{key} expects an integer, got {value!r}") from None
        if as_float.is_integer():
            return int(as_float)
        raise CliError(f"{key} expects an integer, got {value!r}")
    return value


@dataclass
class TrainSetup:
    """Everything `hf-jepa train` builds before training."""

    family: Family
    preset: str
    config: Any
    training_args: Any
    data_args: Any
    routed: dict[str, str] = field(default_factory=dict)  # key -> "model" | "train" | "data"


_TARGET_PREFIXES = {"model": "model", "config": "model", "train": "train", "training": "train", "data": "data"}


def build_train_setup(family_name: str, settings: Mapping[str, Any]) -> TrainSetup:
    """Route flat `settings` (YAML file merged with --set) to the config, TrainingArguments and data arguments.

    Raises `CliError` for an unknown family, preset or key (the message lists the valid keys) and for a key that two
    targets share without a ``model.``/``train.``/``data.`` prefix."""
    from .hub import config_fields, dataclass_defaults
    from .trainers.trainer import TrainingArguments

    if family_name not in FAMILIES:
        raise CliError(f"unknown family {family_name!r}; available: {sorted(FAMILIES)}")
    family = FAMILIES[family_name]
    targets = {
        "model": config_fields(family.load_config_class()),
        "train": dataclass_defaults(TrainingArguments),
        "data": dataclass_defaults(family.load_data_args_class()),
    }
    annotations = {
        "model": _annotations(family.load_config_class()),
        "train": _annotations(TrainingArguments),
        "data": _annotations(family.load_data_args_class()),
    }
    settings = dict(settings)
    preset = settings.pop("preset", None)
    values: dict[str, dict[str, Any]] = {name: {} for name in targets}
    routed: dict[str, str] = {}
    for raw_key, value in settings.items():
        key = str(raw_key).replace("-", "_")
        prefix, dot, rest = key.partition(".")
        if dot and prefix in _TARGET_PREFIXES:
            target = _TARGET_PREFIXES[prefix]
            if rest not in targets[target]:
                raise CliError(_unknown_key_message(raw_key, targets, family, only=target))
            key, matches = rest, [target]
        else:
            matches = [name for name, names in targets.items() if key in names]
        if not matches:
            raise CliError(_unknown_key_message(raw_key, targets, family))
        if len(matches) > 1:
            raise CliError(f"setting {raw_key!r} exists in {matches}: write e.g. {matches[0]}.{key}=...")
        target = matches[0]
        values[target][key] = _coerce(key, value, targets[target][key], annotations[target].get(key, ""))
        routed[key] = target
    try:
        config = family.make_config(preset, **values["model"])
        defaults = _load(family.training_defaults) if family.training_defaults else {}
        training_args = TrainingArguments(**{**defaults, **values["train"]})
        data_args = family.load_data_args_class()(**values["data"])
    except (TypeError, ValueError) as error:
        raise CliError(str(error)) from error
    preset_name = family.default_preset if preset is None else str(preset).replace("-", "_")
    return TrainSetup(family, preset_name, config, training_args, data_args, routed)


def _unknown_key_message(key: str, targets: Mapping[str, Mapping[str, Any]], family: Family,
                         only: str | None = None) -> str:
    labels = {"model": "model config", "train": "training", "data": "data"}
    lines = [f"unknown setting {key!r}. Valid keys:"]
    for name, names in targets.items():
        if only is None or name == only:
            lines.append(f"  {labels[name]} ({name}.): {', '.join(sorted(names))}")
    if only is None:
        lines.append(f"  preset: {' | '.join(family.presets)} (default {family.default_preset})")
    return "\n".join(lines)


def _read_yaml(path: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"cannot read config file {path!r}: {error}") from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(f"config file {path!r} must hold a mapping of settings, got {type(data).__name__}")
    flat: dict[str, Any] = {}
    for key, value in data.items():  # sections `model:`, `train:`, `data:` (mappings) become prefixed keys
        if key in _TARGET_PREFIXES and isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


# ---------------------------------------------------------------------------------------------------- output


def _format_number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def format_metrics(metrics: Mapping[str, Any], family: Family | None = None) -> str:
    """A markdown table of `metrics`: the family's summary rows when it has them, then per-op accuracies."""
    rows: list[tuple[str, str]] = []
    if family is not None and family.result_rows:
        rows = list(_load(family.result_rows)(metrics))
    if not rows:
        rows = [(k, _format_number(v)) for k, v in metrics.items() if not isinstance(v, dict)]
    lines = ["| Metric | Value |", "|---|---|", *[f"| {name} | {value} |" for name, value in rows]]
    direct = metrics.get("accuracy_per_operation") or {}
    rolled = metrics.get("rollout_accuracy_per_operation") or {}
    if direct:
        ops = sorted({int(k) for k in direct} | {int(k) for k in rolled})
        direct = {int(k): v for k, v in direct.items()}
        rolled = {int(k): v for k, v in rolled.items()}

        def pct(value):
            return f"{100 * value:.2f}%" if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"

        lines += ["", "| k | direct | rollout |", "|---|---|---|"]
        lines += [f"| {k:+d} | {pct(direct.get(k))} | {pct(rolled.get(k))} |" for k in ops]
    return "\n".join(lines)


def _json_default(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


# ---------------------------------------------------------------------------------------------------- commands


def _family_arg(name: str) -> Family:
    if name not in FAMILIES:
        raise CliError(f"unknown family {name!r}; available: {sorted(FAMILIES)}")
    return FAMILIES[name]


def cmd_train(args: argparse.Namespace) -> int:
    from .trainers.trainer import JepaTrainer

    settings: dict[str, Any] = {}
    if args.config:
        settings.update(_read_yaml(args.config))
    settings.update(parse_overrides(args.overrides or []))
    if args.output_dir:
        settings = {k: v for k, v in settings.items() if k not in ("output_dir", "train.output_dir", "training.output_dir")}
        settings["output_dir"] = args.output_dir
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


def _family_of_model_type(model_type: str) -> Family:
    for family in FAMILIES.values():
        if family.model_type == model_type:
            return family
    raise CliError(f"no hf-jepa family handles model_type {model_type!r}; known: {[f.model_type for f in FAMILIES.values()]}")


def cmd_eval(args: argparse.Namespace) -> int:
    import hf_jepa  # noqa: F401  (registers the configs and models with the Auto classes)
    from transformers import AutoModel

    from .hub import dataclass_defaults

    if not Path(args.model_dir, "config.json").is_file():
        raise CliError(f"{args.model_dir!r} is not a saved model folder (no config.json)")
    model = AutoModel.from_pretrained(args.model_dir)
    model.eval()
    family = _family_of_model_type(model.config.model_type)
    data_fields = dataclass_defaults(family.load_data_args_class())
    data_kwargs = {"data": args.data} if "data" in data_fields else {}
    if args.eval_images is not None and "eval_images" in data_fields:
        data_kwargs["eval_images"] = args.eval_images
    if "tokenizer" in data_fields and Path(args.model_dir, "tokenizer_config.json").is_file():
        data_kwargs["tokenizer"] = args.model_dir  # the vocabulary the model was trained with
    data_args = family.load_data_args_class()(**data_kwargs)
    recipe = family.make_recipe(model.config, data_args, seed=0)
    metrics = recipe.evaluate(model, args.output_dir)
    if args.json:
        print(json.dumps(metrics, indent=2, default=_json_default))
    else:
        print(format_metrics(metrics, family))
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    family = _family_arg(args.family)
    if not family.reproduce:
        raise CliError(f"{family.name} has no reproduction recipe")
    try:
        reproduce = _load(family.reproduce)
        format_table = _load(family.format_rows) if family.format_rows else None
    except (ImportError, AttributeError) as error:
        raise CliError(
            f"the {family.name} reproduction is not available in this version of hf-jepa "
            f"({family.reproduce} / {family.format_rows}: {error})"
        ) from error
    accepted = inspect.signature(reproduce).parameters
    extra = parse_overrides(args.overrides or [])
    if args.variant:
        extra["variants"] = args.variant
    unknown = sorted(set(extra) - set(accepted) - {"data", "output_dir", "quick"})
    if unknown:
        options = sorted(set(accepted) - {"data", "output_dir", "quick"})
        raise CliError(f"{family.name} reproduction does not take {unknown}; its options: {options}")
    for key, value in extra.items():
        default = accepted[key].default
        if isinstance(default, tuple) and isinstance(value, (list, int)):
            extra[key] = tuple(value) if isinstance(value, list) else (value,)
        elif default is not inspect.Parameter.empty:
            extra[key] = _coerce(key, value, default, str(accepted[key].annotation))
    rows = reproduce(data=args.data, output_dir=args.output_dir, quick=args.quick, **extra)
    print(format_table(rows) if format_table else json.dumps(rows, indent=2, default=_json_default))
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from .hub import push_to_hub

    url = push_to_hub(args.model_dir, args.repo_id, token=args.token, private=args.private,
                      commit_message=args.commit_message)
    print(url)
    return 0


def build_parser() -> argparse.ArgumentParser:
    families = sorted(FAMILIES)
    parser = argparse.ArgumentParser(prog="hf-jepa", description="Train, evaluate, reproduce and share JEPA models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{train,eval,reproduce,push}")

    train = sub.add_parser("train", help="train a model", description=(
        "Train a family's model. Settings come from --config (YAML, flat or with model:/train:/data: sections) and "
        "--set key=value (YAML values); each key goes to the model config, the training arguments or the data "
        "arguments, by name. `preset` (tiny | cpu_fast | full) picks the base model config."))
    train.add_argument("family", choices=families)
    train.add_argument("--config", help="YAML file of settings")
    train.add_argument("--set", dest="overrides", nargs="+", action="extend", metavar="KEY=VALUE", default=[],
                       help="override settings, e.g. --set preset=tiny max_steps=100 latent_dim=32")
    train.add_argument("--output-dir", help="where the model, metrics and card are written")
    train.set_defaults(handler=cmd_train)

    evaluate = sub.add_parser("eval", help="evaluate a saved model on the test split")
    evaluate.add_argument("model_dir")
    evaluate.add_argument("--data", help="data source: a local folder, 'hub' or 'embedded' (default: $HF_JEPA_MNIST, else the Hub, "
                          "else the embedded digits)")
    evaluate.add_argument("--eval-images", type=int, help="evaluate on the first N test images only")
    evaluate.add_argument("--output-dir", help="also write figures (latent PCA) here")
    evaluate.add_argument("--json", action="store_true", help="print the metrics as JSON")
    evaluate.set_defaults(handler=cmd_eval)

    reproduce = sub.add_parser("reproduce", help="rerun a paper's experiments and print the results table")
    reproduce.add_argument("family", choices=families)
    reproduce.add_argument("--data", help="data source: a local folder, 'hub' or 'embedded'")
    reproduce.add_argument("--output-dir", help="where each run is saved")
    reproduce.add_argument("--quick", action="store_true", help="short runs (smoke test of the whole table)")
    reproduce.add_argument("--variant", action="append", metavar="NAME",
                           help="rerun only this row (repeatable); the other rows of the saved table are kept")
    reproduce.add_argument("--set", dest="overrides", nargs="+", action="extend", metavar="KEY=VALUE", default=[],
                           help="options of the family's reproduction, e.g. --set preset=full seeds=[0,1,2,3,4]")
    reproduce.set_defaults(handler=cmd_reproduce)

    push = sub.add_parser("push", help="upload a saved model folder to the Hugging Face Hub")
    push.add_argument("model_dir")
    push.add_argument("repo_id")
    push.add_argument("--private", action="store_true")
    push.add_argument("--token", help="Hub token (default: the logged-in one / $HF_TOKEN)")
    push.add_argument("--commit-message", default="Upload hf-jepa model")
    push.set_defaults(handler=cmd_push)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CliError as error:
        parser.error(str(error))  # prints usage + message, exits with status 2
    except FileNotFoundError as error:
        print(f"hf-jepa: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
