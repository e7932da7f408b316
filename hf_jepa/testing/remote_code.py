"""Running saved folders where hf_jepa is NOT importable, as a `trust_remote_code` user runs them.

`run_without_hf_jepa(code, cwd=...)` runs a script in a Python that cannot import hf_jepa (the suite's conftest and
its tests call it). `run_remote_plan(plan, cwd=...)` is the family tester's one subprocess per family: for every saved
folder of the plan it loads the config, each Auto class the folder declares, the image processor and the pipelines
with `trust_remote_code=True`, calls the model's methods, and returns what came out (plain tensors and Python values,
so nothing of the remote modules needs importing to read it).
"""

from __future__ import annotations

import os
import pickle
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]

# Prepended to every `run_without_hf_jepa` script: the venv's site-packages are put back on sys.path by hand (without
# their .pth files, so the editable install stays off), and the script stops at once if hf_jepa is importable anyway.
_WITHOUT_HF_JEPA_PREAMBLE = """
import sys
sys.path.extend({site_dirs!r})
assert {repo!r} not in [p.rstrip("/") for p in sys.path] and "" not in sys.path, sys.path
try:
    import hf_jepa
except ImportError:
    pass
else:
    raise SystemExit("hf_jepa is importable in the subprocess: " + hf_jepa.__file__)
"""


def run_without_hf_jepa(
    code: str, *, cwd: Path, extra_env: dict | None = None, timeout: int = 120
) -> subprocess.CompletedProcess:
    """Run `code` in `python -I -S -c` where hf_jepa is NOT importable (what a trust_remote_code user sees).

    `-I -S`: no PYTHON* variables, no cwd on sys.path and no site-packages .pth files (so neither the editable install
    nor the repo is importable); the preamble adds the venv's site-packages back and fails loudly if `import hf_jepa`
    still works. The environment: PYTHONPATH dropped, HF hub cache and modules cache under `cwd`, HF_HUB_OFFLINE=1
    and OMP_NUM_THREADS equal to this process's torch thread count (CPU kernels then reduce in the same order, so
    outputs are bit-equal). `extra_env` goes on top (e.g. `LoopbackHub.env(...)`, which turns the hub back online)."""
    cwd = Path(cwd)
    preamble = _WITHOUT_HF_JEPA_PREAMBLE.format(site_dirs=list(site.getsitepackages()), repo=str(REPO_ROOT))
    script = textwrap.dedent(preamble) + textwrap.dedent(code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        {
            "HF_HUB_CACHE": str(cwd / "hf-cache"),
            "HF_MODULES_CACHE": str(cwd / "hf-modules"),
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": str(torch.get_num_threads()),
        }
    )
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


# The subprocess's side of `run_remote_plan` (no hf_jepa; `hf_jepa.testing.outputs.plain` repeated on purpose, the
# script cannot import it).
_PLAN_SCRIPT = """
import pickle
import torch
import transformers
from transformers import AutoConfig, AutoImageProcessor, pipeline

def plain(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if hasattr(value, "items") and callable(value.items):
        return {{key: plain(item) for key, item in value.items()}}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value

def where(obj):
    return (type(obj).__module__, type(obj).__name__)

def targets_state(model):
    pairs = model.ema_pairs() if hasattr(model, "ema_pairs") else []
    return {{"frozen": all(not p.requires_grad for _, target in pairs for p in target.parameters()),
            "eval": all(not target.training for _, target in pairs)}}

with open({plan!r}, "rb") as handle:
    plan = pickle.load(handle)
results = {{}}
for name, item in plan.items():
    out = {{}}
    config = AutoConfig.from_pretrained(item["folder"], trust_remote_code=True)
    out["config"] = where(config)
    out["sub_configs"] = {{k: where(v) for k, v in vars(config).items() if isinstance(v, transformers.PretrainedConfig)}}
    out["classes"] = {{}}
    for auto_name in item["auto_classes"]:
        model = getattr(transformers, auto_name).from_pretrained(item["folder"], trust_remote_code=True).eval()
        out["classes"][auto_name] = where(model)
    out["state_dict"] = {{k: v.clone() for k, v in model.state_dict().items()}}
    out["targets"] = targets_state(model)
    model.train()
    out["targets_after_train"] = targets_state(model)
    model.eval()
    out["calls"] = {{}}
    for label, (method, kwargs) in item["calls"].items():
        torch.manual_seed(0)
        with torch.no_grad():
            out["calls"][label] = plain(getattr(model, method)(**kwargs))
    if item["processor"] is not None:
        processor = AutoImageProcessor.from_pretrained(item["folder"], trust_remote_code=True)
        out["processor"] = where(processor)
        out["processed"] = plain(processor(**item["processor"]))
    out["pipelines"] = {{}}
    for task, spec in item["pipelines"].items():
        pipe = pipeline(model=spec["folder"], trust_remote_code=True)
        outputs, buffers = [], []
        for args, kwargs in spec["calls"]:
            outputs.append(plain(pipe(*args, **kwargs)))
            buffers.append({{k: v.clone() for k, v in pipe.model.named_buffers()}})
        processor = getattr(pipe, "image_processor", None)
        out["pipelines"][task] = {{
            "task": pipe.task,
            "classes": [where(pipe), where(pipe.model)],
            "image_processor": None if processor is None else where(processor),
            "outputs": outputs,
            "buffers": buffers,
        }}
    results[name] = out
with open({result!r}, "wb") as handle:
    pickle.dump(results, handle)
print("ok")
"""


def run_remote_plan(
    plan: dict[str, dict], *, cwd: Path, extra_env: dict | None = None, timeout: int = 300
) -> dict[str, dict]:
    """Run `plan` in one subprocess without hf_jepa and return its results, per plan entry.

    An entry: `folder` (a saved model folder, or a Hub repo id with `extra_env` pointing at that Hub), `auto_classes` (transformers Auto class names to load it with; the
    last one's model is called), `calls` ({label: (method name, kwargs)}, each run under `torch.no_grad()` after
    `torch.manual_seed(0)`), `processor` (kwargs for the folder's image processor, or None) and `pipelines` ({task:
    {"folder": a folder written by `pipe.save_pretrained`, "calls": [(args, kwargs), ...]}}). A result: `config`,
    `sub_configs`, `classes` ({auto name: (module, class name)}), `state_dict`, `targets` / `targets_after_train`
    (the EMA targets frozen / in eval mode), `calls`, `processor` / `processed` and `pipelines` ({task: task, classes,
    image_processor (the pipeline's `(module, class name)`, None without one), outputs, buffers (the pipeline
    model's named buffers after each call, e.g. run-time state a call writes)})."""
    cwd = Path(cwd)
    plan_path, result_path = cwd / "remote-plan.pkl", cwd / "remote-result.pkl"
    with open(plan_path, "wb") as handle:
        pickle.dump(plan, handle)
    out = run_without_hf_jepa(
        _PLAN_SCRIPT.format(plan=str(plan_path), result=str(result_path)), cwd=cwd, extra_env=extra_env, timeout=timeout
    )
    if out.returncode != 0:
        raise AssertionError(f"the remote-code subprocess failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    with open(result_path, "rb") as handle:
        return pickle.load(handle)


__all__ = ["run_remote_plan", "run_without_hf_jepa"]
