"""What JEPA-Reasoner folders hold keeps loading now that the family's code is split into files by role.

- Config dicts: tests/fixtures/jepa_reasoner_config_dicts.json holds `to_dict()` (without `transformers_version`) of
  every config's defaults and presets as the single-file configuration wrote them (one block of fields per config,
  before `JepaBlockStackConfig`). Today's configs give the same dicts, and build the same config back from them.
- `auto_map`: a folder saved before the split names `modeling_jepa_reasoner.<Class>` for every model; saved again
  today, each entry names the file that defines the class in the new folder (a stale entry would break loading it
  with trust_remote_code where hf_jepa is not installed).
"""

import json
from pathlib import Path

import pytest
from transformers import AutoModel

from hf_jepa.modeling.jepa_reasoner import (
    CoconutConfig,
    CoupledTransformerConfig,
    DualTalkerConfig,
    JepaReasonerConfig,
    JepaReasonerWithTalkerConfig,
    JepaTalkerConfig,
    MonoTalkerConfig,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
SAVED_DICTS = json.loads((FIXTURES / "jepa_reasoner_config_dicts.json").read_text())
CONFIG_CLASSES = {
    cls.__name__: cls
    for cls in (
        JepaReasonerConfig,
        JepaTalkerConfig,
        MonoTalkerConfig,
        DualTalkerConfig,
        CoupledTransformerConfig,
        CoconutConfig,
        JepaReasonerWithTalkerConfig,
    )
}
# Saved by the last version with the reasoner family in one modeling file.
PREVIOUS = FIXTURES / "previous_version" / "c27143d"


def _without_version(config_dict: dict) -> dict:
    config_dict = {k: v for k, v in config_dict.items() if k != "transformers_version"}
    for sub in ("reasoner_config", "talker_config"):
        if sub in config_dict:
            config_dict[sub] = _without_version(config_dict[sub])
    return config_dict


def _config(key: str):
    """`JepaReasonerConfig.tiny` -> `JepaReasonerConfig.tiny()`; `....tiny.dual` -> `tiny(talker_type="dual")`."""
    class_name, preset, *variant = key.split(".")
    cls = CONFIG_CLASSES[class_name]
    kwargs = {"talker_type": "dual"} if variant == ["dual"] else {}
    return cls, cls() if preset == "default" else getattr(cls, preset)(**kwargs)


def test_fixture_covers_every_config_and_preset():
    assert {key.split(".")[0] for key in SAVED_DICTS} == set(CONFIG_CLASSES)
    assert {key for key in SAVED_DICTS if key.startswith("MonoTalkerConfig.")} == {
        f"MonoTalkerConfig.{preset}" for preset in ("default", "tiny", "cpu_fast", "full")
    }


@pytest.mark.parametrize("key", sorted(SAVED_DICTS))
def test_config_dicts_saved_before_the_split_round_trip(key):
    cls, config = _config(key)
    saved = SAVED_DICTS[key]
    # The same defaults and presets: every saved key, no more, the same values.
    assert _without_version(json.loads(json.dumps(config.to_dict()))) == saved
    # A saved dict builds the same config back (what from_pretrained does with config.json).
    again = cls.from_dict(saved)
    assert type(again) is cls
    assert _without_version(json.loads(json.dumps(again.to_dict()))) == saved


@pytest.mark.parametrize(
    "name", ["jepa-reasoner", "jepa-mono-talker", "jepa-mono-talker/pair", "coupled-lm", "coconut"]
)
def test_resaving_a_folder_from_before_the_split_points_auto_map_at_the_new_files(tmp_path, name):
    old_map = json.loads((PREVIOUS / name / "config.json").read_text())["auto_map"]
    assert all(
        value.startswith(("configuration_jepa_reasoner.", "modeling_jepa_reasoner")) for value in old_map.values()
    )
    AutoModel.from_pretrained(PREVIOUS / name).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert set(auto_map) == set(old_map)
    for reference in auto_map.values():
        module, class_name = reference.split(".")
        source = tmp_path / f"{module}.py"
        assert source.is_file() and f"\nclass {class_name}(" in source.read_text(), reference
