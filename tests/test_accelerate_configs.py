"""The accelerate launch configs in configs/accelerate/: every file parses with accelerate's own loader and describes
what its comment says, and the CPU config really starts two cooperating processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.utils import DistributedType

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "accelerate"
EXPECTED = {  # file -> (distributed type, processes, machines)
    "cpu_2proc.yaml": (DistributedType.MULTI_GPU, 2, 1),
    "multi_gpu_ddp.yaml": (DistributedType.MULTI_GPU, 8, 1),
    "fsdp2.yaml": (DistributedType.FSDP, 8, 1),
    "fsdp2_2nodes.yaml": (DistributedType.FSDP, 16, 2),
    "deepspeed_zero2.yaml": (DistributedType.DEEPSPEED, 8, 1),
    "deepspeed_zero3.yaml": (DistributedType.DEEPSPEED, 8, 1),
}


def test_every_config_is_listed_and_parses():
    assert {path.name for path in CONFIGS.glob("*.yaml")} == set(EXPECTED)
    for name, (kind, processes, machines) in EXPECTED.items():
        config = load_config_from_file(str(CONFIGS / name))
        assert (config.distributed_type, config.num_processes, config.num_machines) == (kind, processes, machines)
        if kind == DistributedType.FSDP:
            fsdp = config.fsdp_config
            assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_state_dict_type"] == "SHARDED_STATE_DICT"
            # no class list: accelerate wraps each model's `_no_split_modules`, one file for every family
            assert fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
            assert "fsdp_transformer_layer_cls_to_wrap" not in fsdp
        if kind == DistributedType.DEEPSPEED:
            assert config.deepspeed_config["zero_stage"] == (3 if "zero3" in name else 2)


def test_cpu_config_trains_on_two_cooperating_processes(tmp_path):
    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists():
        pytest.skip(f"the accelerate launcher is not installed beside {sys.executable}")
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    command = [
        str(accelerate),
        "launch",
        "--config_file",
        str(CONFIGS / "cpu_2proc.yaml"),
        "-m",
        "hf_jepa.cli",
        "train",
        "bro-jepa",
        "--set",
        "preset=tiny",
        "max_steps=2",
        "data=embedded",
        "plot=false",
        "disable_progress_bar=true",
        "--output-dir",
        str(tmp_path / "run"),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert metrics["num_processes"] == 2  # one process group of two, not two lone ranks
