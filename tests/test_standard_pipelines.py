"""Standard transformers tasks on the folders the trainers write, with hf_jepa installed and without it
(trust_remote_code): feature-extraction (T-JEPA, the reasoner), image-feature-extraction (I-JEPA, BRo, EPM frames),
text-generation (the reasoner+Talker pair, the coupled LM, COCONUT); a Talker alone has none. Also: generation and
tokenizer defaults saved with the reasoning family, `custom_pipelines` written by the trainer, and Hub round trips
(`hf-jepa push --revision`, `--create-pr`) loaded back without hf_jepa."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_in_terminal, run_without_hf_jepa
from PIL import Image
from transformers import AutoModel, AutoTokenizer, pipeline

from hf_jepa.recipes import load_families
from hf_jepa.testing.harness import train_quickly

FEATURE_TASK = {
    "t-jepa": "feature-extraction",
    "jepa-reasoner": "feature-extraction",
    "i-jepa": "image-feature-extraction",
    "bro-jepa": "image-feature-extraction",
    "epm-jepa": "image-feature-extraction",
}
GENERATION_FOLDERS = ("jepa-mono-talker/pair", "coupled-lm", "coconut")
TEXT = "3 7 1"


def _digit(side: int) -> Image.Image:
    """A deterministic grey image (a bright square on black)."""
    pixels = np.zeros((side, side), dtype=np.uint8)
    pixels[side // 4 : side // 2, side // 3 : 3 * side // 4] = 200
    pixels[side // 2, :] = 90
    return Image.fromarray(pixels, mode="L")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Every family trained for one tiny step through the shared trainer (the save path `hf-jepa train` uses)."""
    root = tmp_path_factory.mktemp("trained")
    families = load_families()
    out = {}
    for name in ("t-jepa", "i-jepa", "bro-jepa", "epm-jepa", "jepa-reasoner", "coupled-lm", "coconut"):
        family = families[name]
        data_args = family.data_args_class()
        recipe = family.make_recipe(family.make_config("tiny"), data_args)
        train_quickly(recipe, root / name, max_steps=1, per_device_batch_size=4)
        out[name] = root / name
    talker = families["jepa-mono-talker"]
    data_args = talker.data_args_class(reasoner=str(out["jepa-reasoner"]))
    train_quickly(talker.make_recipe(talker.make_config("tiny"), data_args), root / "talker", max_steps=1)
    out["jepa-mono-talker"] = root / "talker"
    out["jepa-mono-talker/pair"] = root / "talker" / "pair"
    return out


def _prompt(folder: Path) -> str:
    """Three in-vocabulary words of the folder's tokenizer (the reasoning vocabularies have no digits)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    words = [w for w in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))) if not w.startswith("[")]
    return " ".join(words[:3])


def _expected_features(name: str, folder: Path):
    """What the model itself gives for the pipeline's input: the encoder's (B=1) last hidden state, as a list."""
    model = AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        if name in ("t-jepa", "jepa-reasoner"):
            tokenizer = AutoTokenizer.from_pretrained(folder)
            text = TEXT if name == "t-jepa" else _prompt(folder)
            enc = tokenizer(text, return_tensors="pt")
            if name == "t-jepa":
                hidden = model.encode(enc["input_ids"], enc["attention_mask"])
            else:
                hidden = model.generate_latents(enc["input_ids"], enc["attention_mask"])
        else:
            side = model.config.image_size if name != "i-jepa" else model.config.backbone_config.image_size
            grey = torch.from_numpy(np.asarray(_digit(side), dtype=np.float32))[None, None] / 255.0
            if name == "epm-jepa":
                hidden = model.encode(grey[:, None])  # (1, 1 frame, latent) = (1, 1, latent)
            else:
                mean = torch.tensor(model.config.pixel_mean).view(1, -1, 1, 1)
                std = torch.tensor(model.config.pixel_std).view(1, -1, 1, 1)
                hidden = model.encode((grey - mean) / std)
                hidden = hidden[:, None] if hidden.ndim == 2 else hidden
    return hidden.tolist()


def _pipeline_input(name: str, folder: Path):
    if name == "t-jepa":
        return TEXT
    if name == "jepa-reasoner":
        return _prompt(folder)
    config = json.loads((folder / "config.json").read_text())
    side = config.get("image_size") or config["backbone_config"]["image_size"]
    return _digit(side).convert("RGB")  # what a user's photo is; the pipeline converts to RGB anyway


@pytest.mark.parametrize("name", sorted(FEATURE_TASK))
def test_feature_pipelines_match_the_encoder(folders, name):
    folder = folders[name]
    extract = pipeline(FEATURE_TASK[name], model=str(folder))
    got = extract(_pipeline_input(name, folder))
    np.testing.assert_allclose(np.asarray(got), np.asarray(_expected_features(name, folder)), rtol=1e-5, atol=1e-6)


def test_i_jepa_and_epm_folders_hold_their_image_processor(folders):
    from hf_jepa import EpmJepaImageProcessor, IJepaImageProcessor

    i_pipe = pipeline("image-feature-extraction", model=str(folders["i-jepa"]))
    assert type(i_pipe.image_processor) is IJepaImageProcessor
    assert list(i_pipe.image_processor.image_mean) == [0.1307] and i_pipe.image_processor.size.height == 28
    e_pipe = pipeline("image-feature-extraction", model=str(folders["epm-jepa"]))
    assert type(e_pipe.image_processor) is EpmJepaImageProcessor
    pixels = e_pipe.image_processor(_digit(64).convert("RGB"), return_tensors="pt")["pixel_values"]
    # grey 200 on black, rescaled to [0, 1] without normalisation: the RGB round trip is bit-exact
    assert pixels.shape == (1, 1, 64, 64) and torch.equal(pixels[0, 0, 16, 30], torch.tensor(200 / 255.0))
    pooled = e_pipe(_digit(64), pool=True)
    assert np.asarray(pooled).shape == (1, json.loads((folders["epm-jepa"] / "config.json").read_text())["latent_dim"])


def _expected_generation(name: str, folder: Path, prompt: str) -> str:
    model = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    config = model.generation_config
    with torch.no_grad():
        if name == "jepa-mono-talker/pair":
            tokens, _ = model.generate(ids, max_new_tokens=config.max_new_tokens, do_sample=False)
        elif name == "coconut":
            tokens = model.generate(prompt_ids=ids, max_new_tokens=config.max_new_tokens, do_sample=False)[:, 1:]
        else:
            tokens = model.generate(ids, max_new_tokens=config.max_new_tokens, do_sample=False)[:, ids.shape[1] :]
    # TextGenerationPipeline's convention: the prompt as given, then the new tokens decoded
    return prompt + tokenizer.decode(tokens[0], skip_special_tokens=True)


@pytest.mark.parametrize("name", GENERATION_FOLDERS)
def test_text_generation_matches_generate(folders, name):
    folder = folders[name]
    prompt = _prompt(folder)
    generate = pipeline("text-generation", model=str(folder))
    got = generate(prompt)[0]["generated_text"]
    assert got.startswith(prompt) and len(got) > len(prompt)
    assert got == _expected_generation(name, folder, prompt)
    # The continuation reads after its prompt: one space, then whole vocabulary words (not "n2n21").
    continuation = got[len(prompt) :]
    assert continuation.startswith(" ") and not continuation.startswith("  "), repr(got)
    vocabulary = set(AutoTokenizer.from_pretrained(folder).get_vocab())
    assert set(got.split()) <= vocabulary, repr(got)


def test_text_generation_names_an_empty_prompt(folders):
    generate = pipeline("text-generation", model=str(folders["jepa-mono-talker/pair"]))
    with pytest.raises(ValueError, match="the prompt is empty"):
        generate("")


def test_pair_saves_decoding_defaults_and_tokenizers_know_the_positions(folders):
    pair = json.loads((folders["jepa-mono-talker/pair"] / "generation_config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(folders["jepa-mono-talker/pair"])
    assert pair["do_sample"] is False and pair["num_beams"] == 1 and pair["max_new_tokens"] >= 2
    assert (pair["eos_token_id"], pair["pad_token_id"], pair["bos_token_id"]) == (
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        tokenizer.bos_token_id,
    )
    config = json.loads((folders["jepa-mono-talker/pair"] / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_jepa_talker.JepaReasonerWithTalker"
    for name, positions in (
        ("t-jepa", lambda c: c["backbone_config"]["max_position_embeddings"]),
        ("jepa-reasoner", lambda c: c["max_position_embeddings"]),
        ("coupled-lm", lambda c: c["max_position_embeddings"]),
        ("jepa-mono-talker/pair", lambda c: c["reasoner_config"]["max_position_embeddings"]),
    ):
        config = json.loads((folders[name] / "config.json").read_text())
        tokenizer = AutoTokenizer.from_pretrained(folders[name])
        assert tokenizer.model_max_length == positions(config) == 64, name  # the tiny presets' position tables


def test_talker_alone_has_no_standard_task(folders):
    with pytest.raises(ValueError, match="A Talker is a component"):
        pipeline("text-generation", model=str(folders["jepa-mono-talker"]))(_prompt(folders["jepa-mono-talker"]))


def test_trainer_folders_declare_their_custom_pipelines(folders):
    expected = {
        "bro-jepa": ("modular-arithmetic", "modular_arithmetic.py"),
        "epm-jepa": ("latent-world-model", "latent_world_model.py"),
        "t-jepa": ("jepa-feature-extraction", "feature_extraction.py"),
        "i-jepa": ("jepa-feature-extraction", "feature_extraction.py"),
        "jepa-mono-talker/pair": ("latent-reasoning", "latent_reasoning.py"),
    }
    for name, (task, code) in expected.items():
        config = json.loads((folders[name] / "config.json").read_text())
        assert list(config["custom_pipelines"]) == [task], name
        assert (folders[name] / code).is_file() and (folders[name] / "base.py").is_file(), name
    for name in ("jepa-reasoner", "coupled-lm", "coconut", "jepa-mono-talker"):
        assert "custom_pipelines" not in json.loads((folders[name] / "config.json").read_text()), name


CUSTOM_TASK = {
    "bro-jepa": "modular-arithmetic",
    "epm-jepa": "latent-world-model",
    "t-jepa": "jepa-feature-extraction",
    "i-jepa": "jepa-feature-extraction",
    "jepa-mono-talker/pair": "latent-reasoning",
}

IN_A_TERMINAL = """
import json
import numpy as np
from PIL import Image
import hf_jepa
from transformers import pipeline
cases = json.loads({cases!r})
for name, task, folder, given in cases:
    pipe = pipeline(task, model=folder)  # no trust_remote_code: hf_jepa is installed
    assert type(pipe.model).__module__.startswith("hf_jepa."), (name, task, type(pipe.model).__module__)
    assert type(pipe).__module__.startswith(("hf_jepa.", "transformers.pipelines")), (name, task, type(pipe))
    if "image" in given:
        side = given["image"]
        pixels = np.zeros((side, side), dtype=np.uint8)
        pixels[side // 4 : side // 2, side // 3 : 3 * side // 4] = 200
        frame = Image.fromarray(pixels, mode="L")
        result = pipe([frame] * given["frames"]) if given.get("frames") else pipe(frame, **given.get("kwargs", {{}}))
    else:
        result = pipe(given["text"])
    print("ran", name, task, type(result).__name__, flush=True)
print("all ran")
"""


def _terminal_cases(folders) -> list:
    """Every standard task (`_cases`) and every hf-jepa task a trainer folder declares."""
    cases = _cases(folders)
    for name, task in sorted(CUSTOM_TASK.items()):
        config = json.loads((folders[name] / "config.json").read_text())
        if name in ("t-jepa", "jepa-mono-talker/pair"):
            given = {"text": TEXT if name == "t-jepa" else _prompt(folders[name])}
        else:
            side = config.get("image_size") or config["backbone_config"]["image_size"]
            given = {"image": side}
            if name == "bro-jepa":
                given["kwargs"] = {"operation": 1}
            if name == "epm-jepa":
                given["frames"] = int(config["context_length"]) + 1
        cases.append([name, task, str(folders[name]), given])
    return cases


def test_no_pipeline_asks_to_run_custom_code_in_a_terminal(folders, tmp_path):
    """With hf_jepa imported, every standard and hf-jepa pipeline on every trainer folder loads the installed classes
    and asks nothing. Run on a pseudo-terminal: transformers asks its "run the custom code? [y/N]" question (and
    blocks ~15 s) only when stdin is a terminal, which a plain subprocess or pytest's closed stdin never is."""
    cases = _terminal_cases(folders)
    status, printed = run_in_terminal(IN_A_TERMINAL.format(cases=json.dumps(cases)), cwd=tmp_path)
    assert "custom code" not in printed and "[y/N]" not in printed, printed[-3000:]
    assert status == 0 and "all ran" in printed, printed[-3000:]
    assert printed.count("\nran ") + printed.startswith("ran ") == len(cases), printed[-3000:]


def test_the_terminal_harness_sees_a_prompt(folders, tmp_path):
    """The check above could pass vacuously if the pseudo-terminal hid the question: a remote-code load of the same
    folder without trust_remote_code, where hf_jepa is not imported, does ask it there."""
    code = f"""
    import sys
    sys.modules["hf_jepa"] = None  # as where hf_jepa is not installed
    from transformers import AutoModel
    try:
        AutoModel.from_pretrained({str(folders["bro-jepa"])!r})
    except ValueError as error:
        print("refused:", str(error)[:60])
    """
    status, printed = run_in_terminal(code, cwd=tmp_path, timeout=60)
    assert "Do you wish to run the custom code? [y/N]" in printed, printed[-2000:]


WITHOUT_HF_JEPA = """
import json, sys
import numpy as np
from PIL import Image
from transformers import pipeline
cases = json.loads({cases!r})
out = {{}}
for name, task, folder, given in cases:
    pipe = pipeline(task, model=folder, trust_remote_code=True)
    assert type(pipe.model).__module__.startswith("transformers_modules."), type(pipe.model).__module__
    if given.get("image"):
        pixels = np.zeros((given["image"], given["image"]), dtype=np.uint8)
        side = given["image"]
        pixels[side // 4 : side // 2, side // 3 : 3 * side // 4] = 200
        pixels[side // 2, :] = 90
        given = Image.fromarray(pixels, mode="L").convert("RGB")
    else:
        given = given["text"]
    result = pipe(given)
    out[name] = result[0]["generated_text"] if task == "text-generation" else result
print(json.dumps(out))
"""


def _cases(folders) -> list:
    cases = []
    for name, task in sorted(FEATURE_TASK.items()):
        given = _pipeline_input(name, folders[name])
        given = {"text": given} if isinstance(given, str) else {"image": given.size[0]}
        cases.append([name, task, str(folders[name]), given])
    for name in GENERATION_FOLDERS:
        cases.append([name, "text-generation", str(folders[name]), {"text": _prompt(folders[name])}])
    return cases


def test_standard_pipelines_without_hf_jepa(folders, tmp_path):
    cases = _cases(folders)
    out = run_without_hf_jepa(WITHOUT_HF_JEPA.format(cases=json.dumps(cases)), cwd=tmp_path, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    remote = json.loads(out.stdout.strip().splitlines()[-1])
    for name in FEATURE_TASK:
        expected = np.asarray(_expected_features(name, folders[name]))
        np.testing.assert_allclose(np.asarray(remote[name]), expected, rtol=1e-5, atol=1e-6, err_msg=name)
    for name in GENERATION_FOLDERS:
        prompt = _prompt(folders[name])
        assert remote[name] == _expected_generation(name, folders[name], prompt), name


PUSHED = """
import json
import numpy as np
from PIL import Image
from transformers import pipeline
pixels = np.zeros((28, 28), dtype=np.uint8)
pixels[7:14, 9:21] = 200
pixels[14, :] = 90
image = Image.fromarray(pixels, mode="L")
out = {}
for revision in ("dev", "refs/pr/1"):
    features = pipeline("image-feature-extraction", model="org/bro", revision=revision, trust_remote_code=True)
    custom = pipeline("modular-arithmetic", model="org/bro", revision=revision, trust_remote_code=True)
    out[revision] = {"features": features(image), "custom": type(custom).__module__}
print(json.dumps(out))
"""


def test_push_revision_and_pull_request_round_trip_without_hf_jepa(folders, hub, tmp_path, capsys):
    from hf_jepa.cli import main
    from hf_jepa.testing.hub_server import use_loopback_hub

    folder = folders["bro-jepa"]
    with use_loopback_hub(hub, cache_dir=tmp_path / "cache"):
        # The pull request first: a push identical to its base is a no-op commit (no PR), on the real Hub too.
        assert main(["push", str(folder), "org/bro", "--create-pr"]) == 0
        assert main(["push", str(folder), "org/bro"]) == 0
        assert main(["push", str(folder), "org/bro", "--revision", "dev"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[0].endswith("/org/bro/discussions/1") and printed[1].endswith("/org/bro")
    assert set(hub.files("org/bro", revision="main")) != set()  # main got its own commit
    for revision in ("main", "dev", "refs/pr/1"):
        files = hub.files("org/bro", revision=revision)
        assert files["model.safetensors"] == (folder / "model.safetensors").read_bytes()
        assert {"preprocessor_config.json", "modular_arithmetic.py", "base.py", "eval_results.json"} <= set(files)
        assert "custom_pipelines" in json.loads(files["config.json"])
    out = run_without_hf_jepa(PUSHED, cwd=tmp_path, extra_env=hub.env(tmp_path / "sub-cache"), timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    remote = json.loads(out.stdout.strip().splitlines()[-1])
    expected = _expected_features("bro-jepa", folder)
    for revision in ("dev", "refs/pr/1"):
        np.testing.assert_allclose(np.asarray(remote[revision]["features"]), np.asarray(expected), rtol=1e-5, atol=1e-6)
        assert remote[revision]["custom"].startswith("transformers_modules."), remote[revision]["custom"]
