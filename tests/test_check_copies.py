"""utils/check_copies.py and utils/check_modeling_imports.py on small packages built in tmp_path."""

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

UTILS = Path(__file__).resolve().parents[1] / "utils"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, UTILS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


check_copies = _load("check_copies")
check_modeling_imports = _load("check_modeling_imports")

SOURCE = '''
import torch


def vicreg_loss(latent: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """Variance hinge of the BroJepa latents."""
    std = torch.sqrt(latent.var(dim=0) + eps)
    return torch.relu(1.0 - std).mean()


class BroJepaModel:
    @staticmethod
    def _freeze_target(module):
        """Keep the bro_jepa target encoder out of the optimiser."""
        for parameter in module.parameters():
            parameter.requires_grad_(False)
'''


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture
def package(tmp_path):
    """`pkg/` with a source module `pkg/modeling/bro/modeling_bro.py`; copies go in `pkg/modeling/epm/`."""
    root = tmp_path / "pkg"
    _write(root / "__init__.py", "")
    _write(root / "modeling" / "bro" / "modeling_bro.py", SOURCE)
    return root


def _copy_file(package, body: str) -> Path:
    return _write(package / "modeling" / "epm" / "modeling_epm.py", "import torch\n\n\n" + textwrap.dedent(body))


def _run(package, capsys, *extra):
    code = check_copies.main([str(package), *extra])
    return code, capsys.readouterr().out


VICREG_COPY = '''
# Copied from pkg.modeling.bro.modeling_bro.vicreg_loss
def vicreg_loss(latent: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """Variance hinge of the BroJepa latents."""
    std = torch.sqrt(latent.var(dim=0) + eps)
    return torch.relu(1.0 - std).mean()
'''


def test_identical_copy_passes(package, capsys):
    _copy_file(package, VICREG_COPY)
    assert _run(package, capsys) == (0, "")


def test_trailing_whitespace_is_ignored(package, capsys):
    _copy_file(package, VICREG_COPY.replace("+ eps)", "+ eps)   "))
    assert _run(package, capsys) == (0, "")


def test_changed_copy_fails_naming_file_and_line(package, capsys):
    path = _copy_file(package, VICREG_COPY.replace("1.0 - std", "2.0 - std"))
    code, out = _run(package, capsys)
    assert code == 1
    # The marker is on line 5: "import torch", two blank lines, the blank line opening VICREG_COPY.
    assert out.splitlines() == [
        f"{path}:5: copy of pkg.modeling.bro.modeling_bro.vicreg_loss differs from its source",
    ]


def test_decorators_and_docstrings_are_compared(package, capsys):
    _copy_file(package, VICREG_COPY.replace("Variance hinge", "The variance hinge"))
    assert _run(package, capsys)[0] == 1


def test_replacements_are_applied_to_the_source(package, capsys):
    renamed = VICREG_COPY.replace("BroJepa latents", "EpmJepa latents").replace(
        "vicreg_loss\n", "vicreg_loss with BroJepa->EpmJepa\n", 1
    )
    path = _copy_file(package, renamed)
    assert _run(package, capsys) == (0, "")
    # Without the replacement the same copy differs.
    path.write_text(path.read_text().replace(" with BroJepa->EpmJepa", ""))
    assert _run(package, capsys)[0] == 1


def test_several_replacements_apply_in_order(package, capsys):
    copy = '''
    class EpmJepaModel:
        # Copied from pkg.modeling.bro.modeling_bro.BroJepaModel._freeze_target with BroJepa->EpmJepa, bro_jepa->epm_jepa
        @staticmethod
        def _freeze_target(module):
            """Keep the epm_jepa target encoder out of the optimiser."""
            for parameter in module.parameters():
                parameter.requires_grad_(False)
    '''
    _copy_file(package, copy)
    assert _run(package, capsys) == (0, "")


def test_fix_restores_the_copy(package, capsys):
    good = _copy_file(package, VICREG_COPY).read_text()
    path = _copy_file(package, VICREG_COPY.replace("1.0 - std", "2.0 - std") + "\n\ndef after():\n    return 1\n")
    code, out = _run(package, capsys, "--fix")
    assert code == 0
    assert "rewrote the copy of pkg.modeling.bro.modeling_bro.vicreg_loss" in out
    assert path.read_text() == good + "\n\ndef after():\n    return 1\n"
    assert _run(package, capsys) == (0, "")


def test_fix_keeps_replacements_and_indentation(package, capsys):
    copy = '''
    class EpmJepaModel:
        # Copied from pkg.modeling.bro.modeling_bro.BroJepaModel._freeze_target with bro_jepa->epm_jepa
        @staticmethod
        def _freeze_target(module):
            """Keep the epm_jepa target encoder out of the optimiser."""
            for parameter in module.parameters():
                parameter.requires_grad_(False)

        def other(self):
            return 2
    '''
    copy = textwrap.dedent(copy)
    good = _copy_file(package, copy).read_text()
    path = _copy_file(package, copy.replace("(False)", "(True)").replace("    @staticmethod\n", ""))
    assert _run(package, capsys)[0] == 1
    assert _run(package, capsys, "--fix")[0] == 0
    assert path.read_text() == good


def test_fix_handles_several_copies_in_one_file(package, capsys):
    copy = VICREG_COPY + "\n\n" + VICREG_COPY.replace("def vicreg_loss", "def vicreg_loss_again")
    # The second copy is named differently, so its fixed form is the source's name: only check both are rewritten.
    path = _copy_file(package, copy.replace("1.0 - std", "3.0 - std"))
    assert _run(package, capsys, "--fix")[0] == 0
    assert "3.0" not in path.read_text()
    assert path.read_text().count("def vicreg_loss(") == 2


def test_method_copy(package, capsys):
    copy = '''
    class EpmJepaModel:
        """A different class around a copied method."""

        # Copied from pkg.modeling.bro.modeling_bro.BroJepaModel._freeze_target
        @staticmethod
        def _freeze_target(module):
            """Keep the bro_jepa target encoder out of the optimiser."""
            for parameter in module.parameters():
                parameter.requires_grad_(False)
    '''
    path = _copy_file(package, copy)
    assert _run(package, capsys) == (0, "")
    path.write_text(path.read_text().replace("    @staticmethod\n", ""))  # the decorator is part of the copy
    code, out = _run(package, capsys)
    assert code == 1
    assert (
        out == f"{path}:8: copy of pkg.modeling.bro.modeling_bro.BroJepaModel._freeze_target differs from its source\n"
    )


def test_class_copy(package, capsys):
    copy = SOURCE.split("\n\n\n")[-1]
    _copy_file(package, "# Copied from pkg.modeling.bro.modeling_bro.BroJepaModel\n" + copy)
    assert _run(package, capsys) == (0, "")


@pytest.mark.parametrize(
    "name, message",
    [
        ("pkg.modeling.bro.modeling_bro.vicreg_los", "no vicreg_los in pkg.modeling.bro.modeling_bro"),
        (
            "pkg.modeling.bro.modeling_bro.BroJepaModel.missing",
            "no BroJepaModel.missing in pkg.modeling.bro.modeling_bro",
        ),
        ("pkg.modeling.gone.modeling_gone.vicreg_loss", "no modeling.gone.modeling_gone.vicreg_loss in pkg"),
        ("pkg.modeling.bro.gone.vicreg_loss", "no modeling.bro.gone.vicreg_loss in pkg"),
        ("other.modeling.bro.modeling_bro.vicreg_loss", "is outside the package pkg"),
    ],
)
def test_missing_source_is_reported(package, capsys, name, message):
    path = _copy_file(package, VICREG_COPY.replace("pkg.modeling.bro.modeling_bro.vicreg_loss", name))
    code, out = _run(package, capsys)
    assert code == 1
    assert out.startswith(f"{path}:5: source {name}")
    assert message in out
    assert _run(package, capsys, "--fix")[0] == 1  # nothing to fix it from


def test_marker_must_sit_directly_above_a_definition(package, capsys):
    path = _copy_file(package, VICREG_COPY.replace("vicreg_loss\ndef", "vicreg_loss\n\ndef"))
    code, out = _run(package, capsys)
    assert code == 1
    assert out == f"{path}:5: 'Copied from' marker is not directly above a def or class\n"


def test_malformed_replacement_is_reported(package, capsys):
    _copy_file(package, VICREG_COPY.replace("vicreg_loss\n", "vicreg_loss with BroJepa=EpmJepa\n", 1))
    code, out = _run(package, capsys)
    assert code == 1
    assert "malformed replacement 'BroJepa=EpmJepa'" in out


def test_copy_of_a_copy_and_source_in_a_package_init(package, capsys):
    _write(package / "shared" / "__init__.py", "def helper():\n    return 1\n")
    _copy_file(package, "# Copied from pkg.shared.helper\ndef helper():\n    return 1\n")
    _write(
        package / "modeling" / "third" / "modeling_third.py",
        "# Copied from pkg.modeling.epm.modeling_epm.helper\ndef helper():\n    return 1\n",
    )
    assert _run(package, capsys) == (0, "")


def test_missing_package_dir(tmp_path, capsys):
    assert check_copies.main([str(tmp_path / "nowhere")]) == 2


# ------------------------------------------------------------------------------------------- modeling imports


def test_modeling_imports_allowed(package, capsys):
    _copy_file(
        package,
        """
        import math
        import torch.nn.functional as F
        from transformers import PreTrainedModel
        from peft import LoraConfig
        from . import configuration_epm
        from .configuration_epm import EpmConfig


        def load():
            import numpy as np
            from safetensors.torch import load_file
        """,
    )
    assert check_modeling_imports.main([str(package)]) == 0


def test_modeling_imports_outside_the_folder_are_reported(package, capsys):
    path = _copy_file(
        package,
        """
        from ..bro.modeling_bro import vicreg_loss
        import pkg.data


        def build():
            from hf_jepa.metrics import effective_rank
            import accelerate
        """,
    )
    # Files outside modeling/<family>/ are not concerned.
    _write(package / "trainer.py", "import accelerate\nfrom .modeling.bro import modeling_bro\n")
    assert check_modeling_imports.main([str(package)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in lines] == [f"{path}:5", f"{path}:6", f"{path}:10", f"{path}:11"]
    assert "imports ..bro.modeling_bro, outside its modeling folder" in lines[0]
    assert "imports pkg.data;" in lines[1]
    assert "imports hf_jepa.metrics;" in lines[2]
    assert "imports accelerate;" in lines[3]
