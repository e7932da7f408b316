"""`hf-jepa space DIR --output SPACE_DIR` and `hf-jepa push-space SPACE_DIR REPO`: a model's app as a Hugging Face
Space (Gradio SDK).

The folder runs as is with `python app.py` (loopback, port 7860; a Space sets GRADIO_SERVER_NAME itself). It holds:
- `app.py`: builds the family's app on the model;
- `model/`: a copy of the saved folder (left out when DIR is a Hub id: the Space loads that repo, named in `models:`);
- `hf_jepa/`: the source of the hf-jepa that wrote it, so the Space needs no package index that has hf-jepa;
- `requirements.txt`: hf-jepa's dependencies pinned to the versions installed here, torch from the CPU wheel index
  (a CPU Space would otherwise download a multi-GB CUDA build);
- `README.md`: the Space card, with its metadata (`sdk: gradio`, `sdk_version`, `app_file`, `models`).
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import metadata
from pathlib import Path

from ..hub import RUN_STATE, upload_in_one_commit
from .registry import app_module, family_of_model_type

__all__ = ["push_space", "space_requirements", "write_space"]

# hf_jepa's data packages (model and dataset card templates, training configs).
DATA_PACKAGES = ("model_cards", "dataset_cards", "configs")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Packages the apps import beyond hf-jepa's own requirements (the `spaces` extra).
APP_REQUIREMENTS = ("gradio", "matplotlib")
APP_PY = '''"""{title}: a Space written by `hf-jepa space` (hf-jepa {version}). Run it with `python app.py`."""

import os
from pathlib import Path

from hf_jepa.spaces import build_app, launch

HERE = Path(__file__).resolve().parent
MODEL = {model}

app = build_app("{family}", model=MODEL)

if __name__ == "__main__":
    # Loopback unless the host sets GRADIO_SERVER_NAME (a Hugging Face Space sets 0.0.0.0).
    launch(app, host=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), port=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
'''


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def space_requirements() -> list[str]:
    """requirements.txt lines: hf-jepa's runtime requirements and the apps', pinned to the installed versions."""
    wanted = []
    for requirement in metadata.requires("hf-jepa") or []:
        if "extra ==" in requirement:
            continue
        wanted.append(re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0])
    lines = [f"--extra-index-url {TORCH_CPU_INDEX}"]
    for name in dict.fromkeys([*wanted, *APP_REQUIREMENTS]):
        version = _installed(name)
        if version is None:
            raise RuntimeError(f"{name} is not installed: install hf-jepa's `spaces` extra before writing a Space")
        if name == "torch":
            version = version.split("+")[0]  # the CPU index names its wheels without the local tag
        lines.append(f"{name}=={version}")
    return lines


def _space_card(title: str, family: str, model_id: str | None, folder: Path | None) -> str:
    sdk_version = _installed("gradio")
    models = f"models:\n- {model_id}\n" if model_id else ""
    card_source = (
        f"the model [`{model_id}`](https://huggingface.co/{model_id})"
        if model_id
        else f"the saved folder `{folder.name}` (copied into `model/`)"
    )
    return (
        "---\n"
        f"title: {json.dumps(title)}\n"
        "emoji: 🧭\n"
        "colorFrom: indigo\n"
        "colorTo: gray\n"
        "sdk: gradio\n"
        f"sdk_version: {sdk_version}\n"
        "app_file: app.py\n"
        'python_version: "3.11"\n'
        f"{models}"
        "license: apache-2.0\n"
        "tags:\n- hf-jepa\n- jepa\n"
        "---\n\n"
        f"# {title}\n\n"
        f"The hf-jepa {family} app (hf-jepa {_installed('hf-jepa')}) serving {card_source}. Run it locally with "
        "`pip install -r requirements.txt && python app.py`; it listens on 127.0.0.1:7860. The numbers it shows are the "
        "model's own outputs on what you enter; the model's card has its evaluation.\n"
    )


def write_space(model: str, output: str | Path, family: str | None = None) -> Path:
    """Write the Space folder of `model` (a saved folder or a Hub id) into `output` (new or empty); returns it."""
    output = Path(output)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"--output {str(output)!r} is not empty: give a new or empty folder")
    local = Path(model)
    model_id = None
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ValueError(f"{model!r} holds no config.json: give a folder hf-jepa train wrote, or a Hub id")
        config = json.loads((local / "config.json").read_text())
    else:
        from huggingface_hub import hf_hub_download

        model_id = model
        config = json.loads(Path(hf_hub_download(model, "config.json")).read_text())
    found = family_of_model_type(config.get("model_type"))
    family = family or found
    if family is None:
        raise ValueError(f"no app serves {config.get('model_type')!r} models; give --family with one that does")
    module = app_module(family)
    if config.get("model_type") not in module.MODEL_TYPES:
        raise ValueError(f"the {family} app does not serve {config.get('model_type')!r} models")
    output.mkdir(parents=True, exist_ok=True)
    if model_id is None:
        shutil.copytree(local, output / "model", ignore=shutil.ignore_patterns(*RUN_STATE, "__pycache__"))
    import hf_jepa

    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(hf_jepa.__file__).parent, output / "hf_jepa", ignore=skip)
    # The data packages live outside hf_jepa/ in a source checkout (pyproject's package-dir): copy them where a wheel
    # puts them, so the vendored copy renders cards and finds its configs as the installed package does.
    package_dir = Path(hf_jepa.__file__).resolve().parent
    for data_package in DATA_PACKAGES:
        target, source = output / "hf_jepa" / data_package, package_dir.parent / data_package
        if not target.exists() and source.is_dir():
            shutil.copytree(source, target, ignore=skip)
    model_line = 'str(HERE / "model")' if model_id is None else json.dumps(model_id)
    version = _installed("hf-jepa")
    (output / "app.py").write_text(APP_PY.format(title=module.TITLE, version=version, model=model_line, family=family))
    (output / "requirements.txt").write_text("\n".join(space_requirements()) + "\n")
    (output / "README.md").write_text(_space_card(module.TITLE, family, model_id, None if model_id else local))
    return output


def push_space(space_dir: str | Path, repo_id: str, token=None, private: bool | None = None) -> str:
    """Upload a Space folder (`write_space`) to the Space repo `repo_id` (created with the Gradio SDK) in one commit;
    returns the repo URL."""
    folder = Path(space_dir)
    if not (folder / "app.py").is_file() or not (folder / "README.md").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a Space folder (no app.py and README.md): run hf-jepa space")
    repo_url, _ = upload_in_one_commit(
        folder,
        repo_id,
        token=token,
        private=private,
        commit_message="Upload hf-jepa Space",
        repo_type="space",
        space_sdk="gradio",
    )
    return str(repo_url)
