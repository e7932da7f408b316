"""One recipe module per family: how it builds its model, draws a batch, evaluates, and what goes on its card.

Every module here exports `FAMILIES` (a tuple of `Family`); `load_families()` collects them, so a new family plugs into
the CLI by adding a module (see CONTRIBUTING.md). Modules are imported on demand: `import hf_jepa.recipes` is cheap.
"""

from __future__ import annotations

import importlib
import pkgutil

from .family import PRESETS, Family


def family_modules() -> list[str]:
    """Names of the recipe modules (every public module of this package but `family`)."""
    return sorted(
        info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_") and info.name != "family"
    )


def load_families() -> dict[str, Family]:
    """Family name -> `Family`, from the `FAMILIES` of every recipe module (in module order)."""
    families: dict[str, Family] = {}
    for module_name in family_modules():
        module = importlib.import_module(f"{__name__}.{module_name}")
        for family in getattr(module, "FAMILIES", ()):
            if family.name in families:
                raise RuntimeError(f"family {family.name!r} is exported by two recipe modules")
            families[family.name] = family
    return families


__all__ = ["PRESETS", "Family", "family_modules", "load_families"]
