"""`model.save_pretrained` and `model.push_to_hub` of every family write the complete folder where hf_jepa is
installed (hf_jepa.saving, installed on the exported classes at import): card, tokenizer or image processor, pipeline
code with `custom_pipelines`, eval results, decoding defaults - while the weights are the source's; a derived card and
no results once they changed; the loopback Hub gets our card, never transformers' default one, and the pushed repo
runs its pipelines without hf_jepa, where the remote-code model saves like any remote-code model."""

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_without_hf_jepa
from huggingface_hub import ModelCard
from PIL import Image
from transformers import AutoModel, AutoTokenizer, pipeline

from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER
from hf_jepa.recipes import load_families
from hf_jepa.testing.harness import train_quickly
from hf_jepa.testing.hub_server import use_loopback_hub

TRAINED = ("t-jepa", "i-jepa", "bro-jepa", "epm-jepa", "jepa-reasoner", "coupled-lm", "coconut")
# Every folder and the standard task that runs on it (a Talker alone has none; its pair is the generating model).
STANDARD_TASK = {
    "t-jepa": "feature-extraction",
    "i-jepa": "image-feature-extraction",
    "bro-jepa": "image-feature-extraction",
    "epm-jepa": "image-feature-extraction",
    "jepa-reasoner": "feature-extraction",
    "coupled-lm": "text-generation",
    "coconut": "text-generation",
    "jepa-mono-talker": None,
    "jepa-mono-talker/pair": "text-generation",
}
WEIGHTS_AND_CONFIG = {"model.safetensors", "config.json"}
# Files that describe the trained weights: carried only while the weights are the source's.
RECORDS = ("README.md", "eval_results.json", "training_args.json", "training_log.jsonl", "*.png", "diagnostics.jsonl")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Every family trained for one tiny step through the shared trainer: {name: (folder, the returned model)}."""
    root = tmp_path_factory.mktemp("trained")
    families = load_families()
    out = {}
    for name in TRAINED:
        family = families[name]
        recipe = family.make_recipe(family.make_config("tiny"), family.data_args_class())
        result = train_quickly(recipe, root / name, max_steps=1, per_device_batch_size=4)
        out[name] = (root / name, result.model)
    talker = families["jepa-mono-talker"]
    data_args = talker.data_args_class(reasoner=str(root / "jepa-reasoner"))
    result = train_quickly(talker.make_recipe(talker.make_config("tiny"), data_args), root / "talker", max_steps=1)
    out["jepa-mono-talker"] = (root / "talker", result.model)
    out["jepa-mono-talker/pair"] = (root / "talker" / "pair", None)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


def _image(side: int) -> Image.Image:
    pixels = np.zeros((side, side), dtype=np.uint8)
    pixels[side // 4 : side // 2, side // 3 : 3 * side // 4] = 200
    return Image.fromarray(pixels, mode="L").convert("RGB")


def _run_task(task: str, folder: Path):
    """The standard pipeline `task` from `folder` on a fixed image or three in-vocabulary words."""
    if task == "image-feature-extraction":
        config = json.loads((folder / "config.json").read_text())
        given = _image(config.get("image_size") or config["backbone_config"]["image_size"])
    else:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        words = [w for w in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))) if not w.startswith("[")]
        given = " ".join(words[:3])
    return pipeline(task, model=str(folder))(given)


def _same_weights(first: Path, second: Path) -> bool:
    one, two = _tensors(first / "model.safetensors"), _tensors(second / "model.safetensors")
    return one.keys() == two.keys() and all(one[k].dtype == two[k].dtype and torch.equal(one[k], two[k]) for k in one)


def test_every_exported_model_saves_the_complete_folder_and_keeps_strict_loading(trained, tmp_path):
    """The policy is installed on every exported model class; their own strict from_pretrained still runs under it,
    and the explicit `save_folder` does what `save_pretrained` does."""
    from transformers import PreTrainedModel

    import hf_jepa
    from hf_jepa.saving import push_folder, save_folder

    exported = [getattr(hf_jepa, name) for name in hf_jepa.__all__ if name[0].isupper()]
    models = [value for value in exported if isinstance(value, type) and issubclass(value, PreTrainedModel)]
    # 4 families' models, the reasoner, 2 Talkers, the pair, 2 coupled baselines, the 4 fine-tuning heads
    assert sorted(model.__name__ for model in models) == [
        "BroJepaForImageClassification",
        "BroJepaModel",
        "CoconutLM",
        "CoupledTransformerLM",
        "DualTalkerModel",
        "EpmJepaForImageClassification",
        "EpmJepaModel",
        "IJepaForImageClassification",
        "IJepaModel",
        "JepaReasonerModel",
        "JepaReasonerWithTalker",
        "MonoTalkerModel",
        "TJepaForSequenceClassification",
        "TJepaModel",
    ]
    for model_class in models:
        assert model_class.save_pretrained is save_folder and model_class.push_to_hub is push_folder, model_class
    folder = trained["bro-jepa"][0]
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    tensors = _tensors(broken / "model.safetensors")
    from safetensors.torch import save_file

    save_file({k: v for k, v in tensors.items() if k != sorted(tensors)[0]}, broken / "model.safetensors")
    with pytest.raises(Exception, match="(?i)missing"):
        AutoModel.from_pretrained(broken)
    save_folder(AutoModel.from_pretrained(folder), tmp_path / "explicit")
    source, explicit = _files(folder), _files(tmp_path / "explicit")
    assert sorted(explicit) == sorted(source) and all(
        explicit[p] == source[p] for p in set(source) - WEIGHTS_AND_CONFIG
    )
    assert _same_weights(folder, tmp_path / "explicit")


@pytest.mark.parametrize("name", sorted(STANDARD_TASK))
def test_resaved_folder_is_complete_and_runs(trained, name, tmp_path):
    folder = trained[name][0]
    AutoModel.from_pretrained(folder).save_pretrained(tmp_path / "other")
    source, other = _files(folder), _files(tmp_path / "other")
    assert sorted(other) == sorted(source)  # card, results, figures, tokenizer/processor, pipeline code, subfolders
    for path in set(source) - WEIGHTS_AND_CONFIG:
        assert other[path] == source[path], path
    assert _same_weights(folder, tmp_path / "other")
    assert json.loads(other["config.json"]).get("custom_pipelines") == json.loads(source["config.json"]).get(
        "custom_pipelines"
    )
    task = STANDARD_TASK[name]
    if task is not None:
        assert _run_task(task, tmp_path / "other") == _run_task(task, folder)


@pytest.mark.parametrize("name", sorted(STANDARD_TASK))
def test_changed_weights_give_a_derived_card_and_no_results(trained, name, tmp_path):
    folder = trained[name][0]
    model = AutoModel.from_pretrained(folder)
    with torch.no_grad():
        next(p for p in model.parameters() if p.requires_grad).add_(0.5)
    model.save_pretrained(tmp_path / "other")
    other = _files(tmp_path / "other")
    for path in _files(folder):
        if any(Path(path).match(pattern) for pattern in RECORDS if pattern != "README.md") or "/" in path:
            assert path not in other, path  # eval results, figures, training records, pair/ and adapter subfolders
    kept = [
        p
        for p in _files(folder)
        if "/" not in p and p.endswith((".py", "tokenizer.json", "preprocessor_config.json", "generation_config.json"))
    ]
    assert kept and all(p in other for p in kept)  # code, tokenizer or processor, decoding defaults
    card = ModelCard(other["README.md"].decode())
    source = ModelCard.load(folder / "README.md").data
    assert "model-index" not in card.data.to_dict() and card.data.base_model is None  # a local path is no Hub id
    assert (card.data.tags, card.data.pipeline_tag) == (source.tags, source.pipeline_tag)
    assert f"local folder named `{folder.name}`" in card.text and "differ from it" in card.text


def test_the_model_the_trainer_returns_saves_its_folder(trained, tmp_path):
    """The trainer points the returned model at its output folder: its config, built in memory, has no
    custom_pipelines, which the save takes from the folder's config.json."""
    folder, model = trained["t-jepa"]
    assert model.name_or_path == str(folder.resolve())
    model.save_pretrained(tmp_path / "other")
    source, other = _files(folder), _files(tmp_path / "other")
    assert sorted(other) == sorted(source)
    assert all(other[p] == source[p] for p in set(source) - WEIGHTS_AND_CONFIG)
    assert json.loads(other["config.json"])["custom_pipelines"] == json.loads(source["config.json"])["custom_pipelines"]


def test_a_source_gone_warns_and_saves_weights_and_config(trained, tmp_path, caplog):
    shutil.copytree(trained["bro-jepa"][0], tmp_path / "gone")
    model = AutoModel.from_pretrained(tmp_path / "gone")
    shutil.rmtree(tmp_path / "gone")
    with caplog.at_level(logging.WARNING):
        model.save_pretrained(tmp_path / "other")
    assert "cannot be read now" in caplog.text
    assert {"README.md", "preprocessor_config.json", "eval_results.json"}.isdisjoint(_files(tmp_path / "other"))


PUSHED = """
import json
from pathlib import Path
import numpy as np
from PIL import Image
from transformers import AutoModel, pipeline
pixels = np.zeros((28, 28), dtype=np.uint8)
pixels[7:14, 9:21] = 200
image = Image.fromarray(pixels, mode="L").convert("RGB")
features = pipeline("image-feature-extraction", model="org/bro", trust_remote_code=True)
custom = pipeline("modular-arithmetic", model="org/bro", trust_remote_code=True)
# without hf_jepa the remote-code model saves like any remote-code model: weights, config and its code
model = AutoModel.from_pretrained("org/bro", trust_remote_code=True)
model.save_pretrained("resaved")
resaved = sorted(p.relative_to("resaved").as_posix() for p in Path("resaved").rglob("*") if p.is_file())
print(json.dumps({"features": features(image), "custom": type(custom).__module__, "model": type(model).__module__,
                  "resaved": resaved}))
"""


def test_push_to_hub_uploads_the_complete_folder(trained, hub, tmp_path):
    folder = trained["bro-jepa"][0]
    source = _files(folder)
    card = source["README.md"].replace(MODEL_ID_PLACEHOLDER.encode(), b"org/bro")
    with use_loopback_hub(hub, cache_dir=tmp_path / "cache"):
        model = AutoModel.from_pretrained(folder)
        commit = model.push_to_hub("org/bro", commit_message="complete folder")
        pr = model.push_to_hub("org/bro", revision="dev", create_pr=True, tags=["extra-tag"])
        # a model loaded from the Hub: the unchanged save carries the pushed card, a changed one names it as base_model
        pulled = AutoModel.from_pretrained("org/bro")
        pulled.save_pretrained(tmp_path / "same")
        with torch.no_grad():
            next(pulled.parameters()).add_(0.5)
        pulled.save_pretrained(tmp_path / "changed", push_to_hub=True, repo_id="org/bro-finetuned")
    pushed = hub.files("org/bro")
    assert commit.commit_url and sorted(set(pushed) - {".gitattributes"}) == sorted(source)  # the Hub adds one
    assert pushed["README.md"] == card and MODEL_ID_PLACEHOLDER.encode() in source["README.md"]
    assert all(pushed[p] == source[p] for p in set(source) - WEIGHTS_AND_CONFIG - {"README.md"})
    assert pushed["model.safetensors"] == source["model.safetensors"] and _same_weights(folder, tmp_path / "same")
    assert pr.pr_url and pr.pr_url.endswith("/discussions/1")
    pr_files = hub.files("org/bro", revision="refs/pr/1")
    assert "extra-tag" in ModelCard(pr_files["README.md"].decode()).data.tags and "eval_results.json" in pr_files
    assert _files(tmp_path / "same")["README.md"] == card
    derived = ModelCard(hub.files("org/bro-finetuned")["README.md"].decode()).data
    assert (derived.base_model, derived.base_model_relation) == ("org/bro", "finetune")
    assert "eval_results.json" not in hub.files("org/bro-finetuned")
    assert _files(tmp_path / "changed")["README.md"] == hub.files("org/bro-finetuned")["README.md"]

    out = run_without_hf_jepa(PUSHED, cwd=tmp_path, extra_env=hub.env(tmp_path / "sub-cache"), timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    remote = json.loads(out.stdout.strip().splitlines()[-1])
    local = pipeline("image-feature-extraction", model=str(folder))(_image(28))
    np.testing.assert_allclose(np.asarray(remote["features"]), np.asarray(local), rtol=1e-5, atol=1e-6)
    assert remote["custom"].startswith("transformers_modules."), remote["custom"]
    assert remote["model"].startswith("transformers_modules."), remote["model"]
    model_code = {"configuration_bro_jepa.py", "modeling_bro_jepa.py"}
    assert set(remote["resaved"]) == WEIGHTS_AND_CONFIG | model_code, remote["resaved"]


def test_a_folder_from_an_older_version_does_not_carry_code_the_new_save_replaced(trained, tmp_path):
    """The source's modeling file imports a helper this version no longer writes (as the hub mixins of c27143d): the
    resave writes its own modeling file, so the old helper is not carried; the pipeline code still is."""
    old = tmp_path / "old"
    shutil.copytree(trained["bro-jepa"][0], old)
    (old / "hub_mixin_bro_jepa.py").write_text("class JepaHubMixin:\n    pass\n")
    modeling = old / "modeling_bro_jepa.py"
    modeling.write_text("from .hub_mixin_bro_jepa import JepaHubMixin  # noqa: F401\n" + modeling.read_text())
    AutoModel.from_pretrained(old).save_pretrained(tmp_path / "resaved")
    names = {path.name for path in (tmp_path / "resaved").iterdir()}
    assert "hub_mixin_bro_jepa.py" not in names
    assert {"modular_arithmetic.py", "base.py", "image_processing_bro_jepa.py", "modeling_bro_jepa.py"} <= names
    assert "hub_mixin" not in (tmp_path / "resaved" / "modeling_bro_jepa.py").read_text()
