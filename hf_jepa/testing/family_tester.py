"""`FamilyTester`: the contracts every hf-jepa model family keeps, written once (as transformers' `ModelTesterMixin`).

A family's test class subclasses it and says what the family is; the tester then provides the common tests:

    class TestXJepaFamily(FamilyTester):
        config_class = XJepaConfig
        model_classes = (XJepaModel,)
        processor_class = XJepaImageProcessor          # saved beside the weights (optional)
        pipeline_tasks = ("x-task",)                   # run on every variant's saved folder
        variants = {"jepa": {}, "baseline": {"objective": "supervised"}}   # tiny(**overrides) each, or Variant(...)
        invalid_configs = [({"latent_dim": 0}, "latent_dim")]             # (overrides, field)
        mismatched_configs = [{"objective": "supervised"}]                 # from_pretrained(folder, **kwargs) refuses
        full_sizes = {"jepa": {"total": 123_456, "trainable": 61_728}}     # the full preset on the meta device
        hub_variants = ("jepa",)                       # also pushed to a loopback Hub and run from there

        def inputs(self, name): ...                    # forward kwargs of variant `name` (tensors)
        def bad_inputs(self): ...                      # [BadInput(argument, value, error, match), ...]
        def pipeline_calls(self, name, task): ...      # [(args, kwargs), ...] for pipe(*args, **kwargs)

Common tests (`test_*` below): config validation (`ValueError` matching `ConfigClass.field`, also from a saved dict)
and round trips (to_dict / from_dict / JSON / save_pretrained, every `__init__` argument saved); the saved folder (its
code and `auto_map`, every Auto class it declares); save/load bit-exact (every tensor, buffer and output of
`calls(name)`; EMA targets frozen and in eval mode); strict loading (a dropped, extra, reshaped or truncated tensor and
the family's `mismatched_configs` raise; nothing is silently initialised); remote code without hf_jepa (one subprocess
per test class runs every variant's folder, its image processor and its pipelines with `trust_remote_code=True`: the
same classes by name, bit-equal weights and outputs; `hub_variants` also from a loopback Hub repo); bad inputs (the error names the argument and changes nothing);
parameter counts (the family's formula on tiny models; the full preset built on the meta device against its documented
size); pipelines (each task on the saved folder gives what it gives on the in-memory model).

Each variant's model is built, made to look trained (`make_trained_looking`) and saved once per test class (the
class-scoped `family` fixture, a `SavedFamily`); tests load from that folder. Family-specific tests that need the
folder are methods of the subclass taking `family` (and `variant`, parametrized over the variants' names).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoConfig, pipeline

from .family_setup import BadInput, SavedFamily, Variant, as_variant, ema_targets, rewrite_weights, weights_file
from .outputs import assert_same, assert_state_dicts_equal, plain
from .remote_code import run_remote_plan

__all__ = ["BadInput", "FamilyTester", "SavedFamily", "Variant"]

_LOADING_PROBLEMS = ("missing_keys", "unexpected_keys", "mismatched_keys")
# Set by loading, not saved choices: the source path, the version, and the dtype transformers records on (sub-)configs.
_VOLATILE_CONFIG_KEYS = ("_name_or_path", "transformers_version", "dtype")


def _comparable(config_dict: dict) -> dict:
    return {
        k: _comparable(v) if isinstance(v, dict) else v
        for k, v in config_dict.items()
        if k not in _VOLATILE_CONFIG_KEYS
    }


class FamilyTester:
    """Subclass in a `Test...` class and set what the family is (see the module docstring); every `test_*` method
    below then runs for it. Hooks with defaults: `tiny_config`, `full_config`, `make_model`, `make_trained_looking`,
    `save_companions`, `calls`, `processor_inputs`, `parameter_count`."""

    # ------------------------------------------------------------------ what a family sets
    config_class: type | None = None  # the family's (first) config class; `invalid_configs` entries default to it
    model_classes: tuple[type, ...] = ()  # the exported model classes; the first is a variant's default
    processor_class: type | None = None  # image processor saved beside the weights (`save_companions`)
    pipeline_tasks: tuple[str, ...] = ()  # tasks run on each variant's folder (a Variant may name its own)
    variants: Mapping[str, Mapping | Variant] = {"default": {}}  # name -> tiny(**overrides) or a Variant
    remote_code_variants: tuple[str, ...] | None = None  # variants run without hf_jepa; None: all of them
    hub_variants: tuple[str, ...] = ()  # also pushed to a loopback Hub and run from there without hf_jepa
    # (overrides, field) or (config class, overrides, field): `tiny(**overrides)` raises ValueError naming the field
    invalid_configs: list[tuple] = []
    # kwargs, or (variant, kwargs): `from_pretrained(folder of that variant (default: the first), **kwargs)` asks for a
    # config whose weights differ from the folder's (config overrides, or `config=`)
    mismatched_configs: list[dict | tuple[str, dict]] = []
    # variant -> {"total": n, "trainable": n}: the full preset's documented sizes (an int, or a (low, high) range)
    full_sizes: Mapping[str, Mapping[str, int | tuple[int, int]]] = {}
    load_atol: float = 0.0  # outputs of the loaded vs the in-memory model (0: bit for bit)
    pipeline_atol: float = 0.0  # pipeline outputs on the folder vs on the in-memory model
    seed: int = 0

    # ------------------------------------------------------------------ hooks
    def inputs(self, name: str) -> dict:
        """Keyword arguments of `model(**inputs)` for variant `name` (tensors; they are pickled for the subprocess)."""
        raise NotImplementedError(f"{type(self).__name__} must define inputs(name)")

    def calls(self, name: str) -> dict[str, tuple[str, dict]]:
        """{label: (method, kwargs)}: what the save/load and remote-code tests call and compare; default: forward."""
        return {"forward": ("__call__", self.inputs(name))}

    def bad_inputs(self) -> list[BadInput]:
        """The calls the model must refuse, each naming its argument (built anew for every test)."""
        return []

    def pipeline_calls(self, name: str, task: str) -> list[tuple[tuple, dict]]:
        """[(args, kwargs), ...]: `pipe(*args, **kwargs)` calls run in order on one pipeline of `task`."""
        raise NotImplementedError(f"{type(self).__name__} must define pipeline_calls(name, task)")

    def processor_inputs(self, name: str) -> dict | None:
        """Keyword arguments of the saved image processor's `__call__` (compared with remote code), or None."""
        return None

    def parameter_count(self, config) -> int | None:
        """The family's exact parameter count of a model built from `config` (checked on every variant's tiny model
        and its full preset on the meta device), or None when the family has no formula."""
        return None

    def variant(self, name: str) -> Variant:
        return as_variant(self.variants[name])

    def model_class(self, name: str) -> type:
        return self.variant(name).model_class or self.model_classes[0]

    def tasks(self, name: str) -> tuple[str, ...]:
        tasks = self.variant(name).tasks
        return self.pipeline_tasks if tasks is None else tasks

    def tiny_config(self, name: str):
        return self.model_class(name).config_class.tiny(**self.variant(name).overrides)

    def full_config(self, name: str):
        return self.model_class(name).config_class.full(**self.variant(name).overrides)

    def make_model(self, name: str):
        """Variant `name`'s tiny model, made to look trained: seeded, built, `make_trained_looking`."""
        config = self.tiny_config(name)
        torch.manual_seed(self.seed)
        model = self.model_class(name)(config)
        self.make_trained_looking(name, model)
        return model.eval()

    @torch.no_grad()
    def make_trained_looking(self, name: str, model) -> None:
        """Move what training moves, so a load that rebuilt it instead of reading it would show: by default every EMA
        target drifts off its online module. Families add their own (statistics, prototypes, adapters...)."""
        for target in ema_targets(model):
            for parameter in target.parameters():
                parameter.add_(0.01 * torch.randn_like(parameter))

    def save_companions(self, name: str, folder: Path) -> None:
        """Save what the pipelines need beside the weights (default: `processor_class()`); tokenizers override."""
        if self.processor_class is not None:
            self.processor_class().save_pretrained(folder)

    # ------------------------------------------------------------------ parametrization and fixtures
    def __init_subclass__(cls, **kwargs):
        """A common test with nothing to check for this family (no formula, no sizes, no tasks...) is left out of its
        class (set to None, so pytest does not collect it) instead of showing up as skipped. A family may do the same
        with a test that does not apply to it (`test_x = None`, with a comment saying why)."""
        super().__init_subclass__(**kwargs)
        unused = {
            "test_config_rejects_invalid_values": not cls.invalid_configs,
            "test_strict_loading_refuses_a_mismatched_config": not cls.mismatched_configs,
            "test_remote_code_without_hf_jepa": cls.remote_code_variants == (),
            "test_remote_code_from_the_hub": not cls.hub_variants,
            "test_bad_inputs_name_the_argument": cls.bad_inputs is FamilyTester.bad_inputs,
            "test_parameter_count_matches_the_formula": cls.parameter_count is FamilyTester.parameter_count,
            "test_full_preset_size_on_the_meta_device": not cls.full_sizes,
            "test_pipeline_runs_on_the_saved_folder": not any(
                cls.pipeline_tasks if as_variant(spec).tasks is None else as_variant(spec).tasks
                for spec in cls.variants.values()
            ),
        }
        for test_name, nothing_to_check in unused.items():
            if nothing_to_check and test_name not in cls.__dict__:
                setattr(cls, test_name, None)

    def pytest_generate_tests(self, metafunc):
        names = list(self.variants)
        by_fixture = {
            "variant": (names, names),
            "remote_variant": (list(self.remote_code_variants or names),) * 2,
            "hub_variant": (list(self.hub_variants),) * 2,
            "sized_variant": (list(self.full_sizes),) * 2,
            "task_variant": (
                [(name, task) for name in names for task in self.tasks(name)],
                [f"{name}-{task}" for name in names for task in self.tasks(name)],
            ),
            "invalid_config": (self._invalid_configs(), [case[2] for case in self._invalid_configs()]),
            "bad_input": (
                list(range(len(self.bad_inputs()))),
                [f"{i}-{case.argument}" for i, case in enumerate(self.bad_inputs())],
            ),
            "mismatched_config": (
                self._mismatched_configs(),
                [f"{n}-{i}" for i, (n, _) in enumerate(self._mismatched_configs())],
            ),
        }
        for fixture, (values, ids) in by_fixture.items():
            if fixture in metafunc.fixturenames:
                metafunc.parametrize(fixture, values, ids=ids)

    @pytest.fixture(scope="class")
    @classmethod
    def family(cls, tmp_path_factory) -> SavedFamily:
        return SavedFamily(cls(), tmp_path_factory.mktemp(cls.__name__))

    @pytest.fixture(scope="class")
    @classmethod
    def remote_results(cls, family, tmp_path_factory) -> dict:
        """One subprocess without hf_jepa for the class: every remote-code variant's folder, and each `hub_variants`
        folder pushed to a loopback Hub and loaded by repo id (entry `"<name>@hub"`)."""
        names = cls.remote_code_variants or list(cls.variants)
        plan = {name: family.remote_plan(name) for name in names}
        cwd = tmp_path_factory.mktemp(f"{cls.__name__}-remote")
        if not cls.hub_variants:
            return run_remote_plan(plan, cwd=cwd)
        from ..hub import push_to_hub
        from .hub_server import LoopbackHub, use_loopback_hub

        with LoopbackHub() as hub:
            with use_loopback_hub(hub, cache_dir=cwd / "push-cache"):
                for name in cls.hub_variants:
                    push_to_hub(family.folder(name), cls._repo_id(name))
            plan |= {f"{name}@hub": family.remote_plan(name, repo_id=cls._repo_id(name)) for name in cls.hub_variants}
            return run_remote_plan(plan, cwd=cwd, extra_env=hub.env(cwd / "hub-cache"))

    @classmethod
    def _repo_id(cls, name: str) -> str:
        return f"org/{cls.__name__.lower()}-{name}".replace("_", "-")

    def _mismatched_configs(self) -> list[tuple[str, dict]]:
        first = next(iter(self.variants))
        return [case if isinstance(case, tuple) else (first, case) for case in self.mismatched_configs]

    def _invalid_configs(self) -> list[tuple]:
        return [case if len(case) == 3 else (self.config_class, *case) for case in self.invalid_configs]

    def _run(self, model, method: str, kwargs: dict):
        torch.manual_seed(0)
        with torch.no_grad():
            return plain(getattr(model, method)(**kwargs))

    # ------------------------------------------------------------------ config
    def test_config_rejects_invalid_values(self, invalid_config):
        config_class, overrides, name = invalid_config
        pattern = rf"\b{re.escape(config_class.__name__)}\.{re.escape(name)}\b"
        with pytest.raises(ValueError, match=pattern):
            config_class.tiny(**overrides)
        # The same values in a saved config dict (a config.json edited by hand) are refused on loading too; a value
        # of a sub-config (a backbone's field) goes where config.json keeps it.
        saved = config_class.tiny().to_dict()
        for key, value in overrides.items():
            nested = [v for v in saved.values() if isinstance(v, dict) and key in v]
            (nested[0] if key not in saved and nested else saved)[key] = value
        with pytest.raises(ValueError, match=pattern):
            config_class.from_dict(saved)

    def test_config_round_trips(self, variant, tmp_path):
        for config in (self.tiny_config(variant), type(self.tiny_config(variant))()):
            as_dict = _comparable(config.to_dict())
            assert _comparable(type(config).from_dict(config.to_dict()).to_dict()) == as_dict
            assert _comparable(type(config).from_dict(json.loads(config.to_json_string())).to_dict()) == as_dict
        config = self.tiny_config(variant)
        config.save_pretrained(tmp_path)
        loaded = AutoConfig.from_pretrained(tmp_path)
        assert type(loaded) is type(config)
        assert _comparable(loaded.to_dict()) == _comparable(config.to_dict())
        # Every constructor argument is a saved field (one that is not would be lost by save / load).
        parameters = inspect.signature(type(config).__init__).parameters.values()
        arguments = [
            p.name for p in parameters if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        unsaved = [name for name in arguments if name not in config.to_dict()]
        assert not unsaved, f"{type(config).__name__} arguments missing from config.json: {unsaved}"

    # ------------------------------------------------------------------ the saved folder
    def test_saved_folder_holds_its_code(self, variant, family):
        folder, model_class = family.folder(variant), self.model_class(variant)
        auto_map = family.auto_map(variant)
        assert auto_map["AutoConfig"].endswith(f".{model_class.config_class.__name__}"), auto_map
        assert auto_map.get("AutoModel", "").endswith(f".{model_class.__name__}"), auto_map
        maps = [auto_map]
        if (folder / "preprocessor_config.json").exists():
            maps.append(json.loads((folder / "preprocessor_config.json").read_text())["auto_map"])
        for mapping in maps:
            for auto_name, reference in mapping.items():
                module, class_name = reference.split("--")[-1].rsplit(".", 1)
                source = folder / f"{module}.py"
                assert source.exists(), (auto_name, reference)
                assert re.search(rf"^class {class_name}\b", source.read_text(), re.M), (auto_name, reference)
        for source in folder.glob("*.py"):  # the exported code imports its own folder only, never hf_jepa
            text = source.read_text()
            assert not re.search(r"^\s*(from|import) hf_jepa\b", text, re.M), source.name
            for module in re.findall(r"^\s*from \.(\w+) import", text, re.M):
                assert (folder / f"{module}.py").exists(), (source.name, module)
        # Where hf_jepa is installed, its registered classes serve the folder (no remote code runs).
        for auto_name in auto_map:
            if auto_name != "AutoConfig":
                assert type(getattr(transformers, auto_name).from_pretrained(folder)) is model_class, auto_name
        if len(maps) > 1:
            assert type(transformers.AutoImageProcessor.from_pretrained(folder)) is self.processor_class

    def test_save_load_is_bit_exact(self, variant, family):
        model = family.model(variant)
        loaded, info = family.load(variant, output_loading_info=True)
        assert type(loaded) is type(model) and not loaded.training
        assert not any(info[key] for key in _LOADING_PROBLEMS), info
        assert _comparable(loaded.config.to_dict()) == _comparable(model.config.to_dict())
        assert_state_dicts_equal(model.state_dict(), loaded.state_dict(), "state_dict")
        # Buffers left out of the weights (position tables, run-time state) are rebuilt as at construction.
        expected_buffers, loaded_buffers = dict(model.named_buffers()), dict(loaded.named_buffers())
        assert_state_dicts_equal(expected_buffers, loaded_buffers, "buffers")
        # Every tensor in PyTorch's own 64-byte-aligned memory, not left in the memory-mapped file (whose alignment
        # would change the CPU kernels' summation order, so the outputs below would differ in the last bits).
        misaligned = [
            name for name, tensor in (*loaded.named_parameters(), *loaded.named_buffers()) if tensor.data_ptr() % 64
        ]
        assert not misaligned, f"loaded tensors outside aligned memory: {misaligned[:5]}"
        self.assert_targets_frozen(loaded)
        loaded.train()
        self.assert_targets_frozen(loaded)
        loaded.eval()
        for label, (method, kwargs) in self.calls(variant).items():
            assert_same(self._run(model, method, kwargs), self._run(loaded, method, kwargs), label, self.load_atol)

    def assert_targets_frozen(self, model) -> None:
        """Every EMA target out of the optimiser and in eval mode, its online module trainable."""
        for online, target in getattr(model, "ema_pairs", list)():
            assert not target.training and all(not module.training for module in target.modules())
            assert not any(p.requires_grad for p in target.parameters())
            assert all(p.requires_grad for p in online.parameters())

    # ------------------------------------------------------------------ strict loading
    def test_strict_loading_refuses_missing_extra_and_reshaped_weights(self, variant, family, tmp_path):
        model_class = self.model_class(variant)
        saved = load_file(str(weights_file(family.folder(variant))))
        # One tensor dropped from every top-level module (two dotted levels deep): each must be reported missing.
        dropped = sorted({".".join(key.split(".")[:2]): key for key in sorted(saved)}.values())
        missing = family.copy_folder(variant, tmp_path / "missing")
        rewrite_weights(missing, lambda tensors: [tensors.pop(key) for key in dropped])
        with pytest.raises(ValueError, match="does not match the config") as error:
            model_class.from_pretrained(missing)
        assert dropped[0] in str(error.value)
        loose, info = model_class.from_pretrained(missing, strict=False, output_loading_info=True)
        assert set(dropped) <= set(info["missing_keys"]), info
        self.assert_targets_frozen(loose)

        extra = family.copy_folder(variant, tmp_path / "extra")
        rewrite_weights(extra, lambda tensors: tensors.update({"not_a_module.weight": torch.zeros(3)}))
        with pytest.raises(ValueError, match=r"does not match the config .*not_a_module\.weight"):
            model_class.from_pretrained(extra)

        key = next(k for k, v in sorted(saved.items()) if v.is_floating_point() and v.ndim)
        reshaped = family.copy_folder(variant, tmp_path / "reshaped")
        rewrite_weights(reshaped, lambda tensors: tensors.update({key: torch.zeros(tensors[key].numel() + 1)}))
        with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):  # transformers' own check
            model_class.from_pretrained(reshaped)
        with pytest.raises(ValueError, match=rf"mismatched keys: \[.*{re.escape(key)}"):  # ours, when told to go on
            model_class.from_pretrained(reshaped, ignore_mismatched_sizes=True)

    def test_strict_loading_refuses_a_mismatched_config(self, mismatched_config, family):
        name, kwargs = mismatched_config
        model_class, folder = self.model_class(name), family.folder(name)
        config = kwargs.get("config") or model_class.config_class.from_pretrained(folder, **kwargs)
        with torch.device("meta"):
            expected = set(model_class(config).state_dict())
        saved = set(load_file(str(weights_file(folder))))
        differences = sorted(expected ^ saved)
        assert differences, f"{kwargs} builds the same weights: not a mismatch"
        with pytest.raises(ValueError, match="does not match the config") as error:
            model_class.from_pretrained(folder, **kwargs)
        assert differences[0] in str(error.value)
        _, info = model_class.from_pretrained(folder, strict=False, output_loading_info=True, **kwargs)
        assert set(info["missing_keys"]) | set(info["unexpected_keys"]) == set(differences)

    def test_truncated_weights_raise(self, family, tmp_path):
        name = next(iter(self.variants))
        data = weights_file(family.folder(name)).read_bytes()
        for keep in (4, 1000, len(data) // 2, -8):
            folder = family.copy_folder(name, tmp_path / f"keep{keep}")
            weights_file(folder).write_bytes(data[:keep])
            with pytest.raises(Exception, match="Error while deserializing header") as error:
                self.model_class(name).from_pretrained(folder)
            assert type(error.value).__name__ == "SafetensorError", keep

    # ------------------------------------------------------------------ remote code without hf_jepa
    def test_remote_code_without_hf_jepa(self, remote_variant, family, remote_results):
        self._check_remote(remote_variant, remote_results[remote_variant], family)

    def test_remote_code_from_the_hub(self, hub_variant, family, remote_results):
        """The folder pushed to a (loopback) Hub: without hf_jepa its code is downloaded with the weights and gives the
        same classes, weights and outputs."""
        self._check_remote(hub_variant, remote_results[f"{hub_variant}@hub"], family, pipelines=False)

    def _check_remote(self, name: str, result: dict, family: SavedFamily, pipelines: bool = True) -> None:
        folder, model_class = family.folder(name), self.model_class(name)
        remote_module = "transformers_modules."
        assert result["config"] == (result["config"][0], model_class.config_class.__name__)
        assert result["config"][0].startswith(remote_module), result["config"]
        local_config = model_class.config_class.from_pretrained(folder)
        local_subs = {k: type(v) for k, v in vars(local_config).items() if isinstance(v, transformers.PretrainedConfig)}
        assert {k: v[1] for k, v in result["sub_configs"].items()} == {k: v.__name__ for k, v in local_subs.items()}
        for key, (module, _) in result["sub_configs"].items():  # the family's own sub-configs come from the folder
            assert module.startswith(remote_module) or not local_subs[key].__module__.startswith("hf_jepa"), key
        assert set(result["classes"]) == set(family.auto_map(name)) - {"AutoConfig"}
        for auto_name, (module, class_name) in result["classes"].items():
            assert module.startswith(remote_module) and class_name == model_class.__name__, (auto_name, module)
        loaded = family.load(name).eval()
        assert_state_dicts_equal(loaded.state_dict(), result["state_dict"], "remote state_dict")
        if hasattr(loaded, "ema_pairs") and loaded.ema_pairs():
            assert result["targets"] == result["targets_after_train"] == {"frozen": True, "eval": True}
        for label, (method, kwargs) in self.calls(name).items():
            assert_same(self._run(loaded, method, kwargs), result["calls"][label], f"remote {label}")
        if result.get("processor") is not None:
            local = transformers.AutoImageProcessor.from_pretrained(folder)
            assert result["processor"][0].startswith(remote_module)
            assert result["processor"][1] == type(local).__name__
            assert_same(plain(local(**self.processor_inputs(name))), result["processed"], "remote processor")
        assert set(result["pipelines"]) == (set(self.tasks(name)) if pipelines else set())
        for task, remote in result["pipelines"].items():
            pipe_folder = family.pipe_folder(name, task)
            saved_config = json.loads((pipe_folder / "config.json").read_text())
            module = saved_config["custom_pipelines"][task]["impl"].rsplit(".", 1)[0]
            assert (pipe_folder / f"{module}.py").exists()
            local_pipe = pipeline(task, model=str(pipe_folder))
            assert remote["task"] == task
            assert [class_name for _, class_name in remote["classes"]] == [
                type(local_pipe).__name__,
                model_class.__name__,
            ]
            assert all(module.startswith(remote_module) for module, _ in remote["classes"]), remote["classes"]
            expected = [plain(local_pipe(*args, **kwargs)) for args, kwargs in self.pipeline_calls(name, task)]
            assert_same(expected, remote["outputs"], f"remote {task} pipeline")

    # ------------------------------------------------------------------ bad inputs
    def test_bad_inputs_name_the_argument(self, bad_input, family):
        case = self.bad_inputs()[bad_input]
        name = case.variant or next(iter(self.variants))
        model = copy.deepcopy(family.model(name)).eval()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        with pytest.raises(case.error, match=case.match) as error:
            if case.call is not None:
                case.call(model)
            else:
                kwargs = dict(case.inputs) if case.inputs is not None else self.inputs(name)
                if case.inputs is None:
                    kwargs[case.argument] = case.value
                kwargs = {k: v for k, v in kwargs.items() if v is not None}
                getattr(model, case.method)(**kwargs)
        assert re.search(rf"\b{re.escape(case.argument)}\b", str(error.value)), (case.argument, str(error.value))
        assert_state_dicts_equal(before, model.state_dict(), "state after a refused call")

    # ------------------------------------------------------------------ sizes
    def test_parameter_count_matches_the_formula(self, variant, family):
        model = family.model(variant)
        assert model.num_parameters() == self.parameter_count(model.config)

    def test_full_preset_size_on_the_meta_device(self, sized_variant):
        config = self.full_config(sized_variant)
        with torch.device("meta"):
            model = self.model_class(sized_variant)(config)
        assert all(p.is_meta for p in model.parameters())
        sizes = {
            "total": sum(p.numel() for p in model.parameters()),
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        }
        frozen = sum(p.numel() for target in ema_targets(model) for p in target.parameters())
        assert sizes["trainable"] == sizes["total"] - frozen  # only the EMA targets are frozen
        formula = self.parameter_count(config)
        assert formula is None or sizes["total"] == formula
        for kind, expected in self.full_sizes[sized_variant].items():
            if isinstance(expected, tuple):
                assert expected[0] <= sizes[kind] <= expected[1], (kind, sizes[kind], expected)
            else:
                assert sizes[kind] == expected, (kind, sizes[kind], expected)

    # ------------------------------------------------------------------ pipelines
    def test_pipeline_runs_on_the_saved_folder(self, task_variant, family):
        name, task = task_variant
        pipe = pipeline(task, model=str(family.folder(name)))
        assert type(pipe.model) is self.model_class(name) and not pipe.model.training
        if self.processor_class is not None and pipe.image_processor is not None:  # the folder's, or the default
            assert type(pipe.image_processor) is self.processor_class
        components = {"tokenizer": pipe.tokenizer, "image_processor": pipe.image_processor}
        in_memory = pipeline(task, model=copy.deepcopy(family.model(name)), **components)
        for args, kwargs in self.pipeline_calls(name, task):
            expected = plain(in_memory(*args, **kwargs))
            assert_same(expected, plain(pipe(*args, **kwargs)), f"{task} pipeline", self.pipeline_atol)
