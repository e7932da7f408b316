"""The wheel: what it ships (every module, the evaluate modules, the card templates, the configs, the LICENSE), that
its build gives no warning, and `hf-jepa configs`. The full install-and-use check is `make wheel-check`
(utils/check_wheel.sh)."""

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from hf_jepa import __version__, configs_access
from hf_jepa.cli import main

ROOT = Path(__file__).resolve().parent.parent
# pip's notes about its own index configuration, not the build's
PIP_NOTES = ("WARNING: Location '", "new release of pip")


def _source_files() -> list[Path]:
    """The files a build sees: tracked and untracked, not ignored (what utils/check_wheel.sh copies too)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [Path(name) for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from a copy of the source tree (the build's build/ and egg-info stay out of the checkout), with
    the build log: about 2 s without build isolation (the test environment's setuptools, when recent enough)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    work = tmp_path_factory.mktemp("wheel")
    for name in _source_files():
        (work / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, work / "src" / name)
    command = [sys.executable, "-m", "pip", "wheel", str(work / "src"), "--no-deps", "-w", str(work / "dist")]
    try:
        if Version(importlib.metadata.version("setuptools")) >= Version("77"):
            command.append("--no-build-isolation")  # offline and fast; else pip fetches setuptools>=77
    except importlib.metadata.PackageNotFoundError:
        pass
    build = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (path,) = (work / "dist").glob("hf_jepa-*.whl")
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        dist_info = next(name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        license_text = archive.read(f"{dist_info}/licenses/LICENSE").decode()
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    return {
        "names": names,
        "metadata": metadata,
        "license": license_text,
        "entry_points": entry_points,
        "log": build.stdout + build.stderr,
    }


def test_build_log_has_no_warning(wheel):
    warnings = [
        line for line in wheel["log"].splitlines() if "warn" in line.lower() and not any(n in line for n in PIP_NOTES)
    ]
    assert warnings == []


def test_wheel_ships_every_module_template_and_config(wheel):
    names = wheel["names"]
    source = _source_files()
    modules = {name.as_posix() for name in source if name.parts[0] == "hf_jepa" and name.suffix == ".py"}
    assert modules - names == set()  # every subpackage, namespace folders included
    assert "hf_jepa/metrics/evaluate_modules/modular_arithmetic_accuracy/modular_arithmetic_accuracy.py" in names
    for folder, suffix in (("model_cards", ".md"), ("dataset_cards", ".md"), ("configs", ".yaml")):
        shipped = {f"hf_jepa/{name.as_posix()}" for name in source if name.parts[0] == folder and name.suffix == suffix}
        assert shipped and shipped - names == set(), folder
    assert {"hf_jepa/configs/accelerate/cpu_2proc.yaml", "hf_jepa/configs/bro-jepa/cpu-quick.yaml"} <= names
    # Nothing but the package and its metadata (no tests/, benchmarks/, reports/ at the top level of site-packages)
    assert {name.split("/")[0] for name in names} == {
        "hf_jepa",
        next(n for n in names if ".dist-info/" in n).split("/")[0],
    }


def test_wheel_metadata_license_and_console_script(wheel):
    assert "License-Expression: Apache-2.0" in wheel["metadata"]
    assert "License-File: LICENSE" in wheel["metadata"]
    assert wheel["license"] == (ROOT / "LICENSE").read_text()
    assert "Apache License" in wheel["license"] and "APPENDIX: How to apply the Apache License" in wheel["license"]
    assert "hf-jepa = hf_jepa.cli:main" in wheel["entry_points"]


def test_configs_lists_and_locates_every_config(capsys):
    assert main(["configs"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == configs_access.list_configs()
    assert "accelerate/cpu_2proc.yaml" in listed and "bro-jepa/cpu-quick.yaml" in listed
    assert main(["configs", "path", "accelerate/cpu_2proc.yaml"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_absolute() and path.is_file() and path.name == "cpu_2proc.yaml"
    assert configs_access.config_path("configs/accelerate/cpu_2proc.yaml") == path  # the README's repository paths
    assert main(["configs", "path"]) == 0
    assert Path(capsys.readouterr().out.strip()) == path.parent.parent


def test_configs_path_of_an_unknown_name_is_one_line_naming_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["configs", "path", "accelerate/cpu2.yaml"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("hf-jepa: error: configs path: no config 'accelerate/cpu2.yaml'")
    assert "did you mean 'accelerate/cpu_2proc.yaml'?" in line
    assert all(name in line for name in configs_access.list_configs())


def test_configs_copy_refuses_to_overwrite_unless_forced(tmp_path, capsys):
    assert main(["configs", "copy", str(tmp_path / "mine")]) == 0
    copied = sorted(path.relative_to(tmp_path / "mine").as_posix() for path in (tmp_path / "mine").rglob("*.yaml"))
    assert copied == configs_access.list_configs()
    edited = tmp_path / "mine" / "accelerate" / "cpu_2proc.yaml"
    edited.write_text("edited: true\n")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["configs", "copy", str(tmp_path / "mine")])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "would be overwritten" in line and "--force" in line
    assert edited.read_text() == "edited: true\n"  # nothing written
    assert main(["configs", "copy", str(tmp_path / "mine"), "--force"]) == 0
    assert edited.read_text() == configs_access.config_path("accelerate/cpu_2proc.yaml").read_text()


def test_configs_and_version_answer_without_importing_torch():
    code = (
        "import sys; sys.argv = ['hf-jepa']\n"
        "from hf_jepa.cli import main\n"
        "assert main(['configs', 'path', 'accelerate/cpu_2proc.yaml']) == 0\n"
        "try:\n    main(['--version'])\nexcept SystemExit as exit:\n    assert exit.code == 0\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["False", "False"]
    assert f"hf-jepa {__version__}\n" in result.stdout
