"""Keep every family's modeling folder self-contained, so `trust_remote_code` export works.

`save_pretrained` copies a family's modeling files next to the weights; they are then loaded where hf_jepa may not be
installed. So a file under `<package>/modeling/<family>/` may import only torch, transformers, peft, numpy (and
safetensors and huggingface_hub, which transformers requires), the standard library and its own folder (`from .x import y`). Not allowed:
`from ..x import y` (leaves the folder; breaks `save_pretrained`) and `import hf_jepa...` (breaks loading without the
package). Imports inside functions count.

usage: python utils/check_modeling_imports.py [PACKAGE_DIR]   (default: hf_jepa)
Exit status 1 with one line per offending import (`path:line: ...`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

# safetensors and huggingface_hub are hard requirements of transformers, so they are present wherever the exported
# files can load.
ALLOWED_THIRD_PARTY = frozenset({"torch", "transformers", "peft", "numpy", "safetensors", "huggingface_hub"})
ALLOWED = ALLOWED_THIRD_PARTY | frozenset(sys.stdlib_module_names) | {"__future__"}


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def check_file(path: Path) -> list[str]:
    """The offending imports of one modeling file, as `path:line: message` lines."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as error:
        return [f"{_display(path)}:{error.lineno}: cannot parse: {error.msg}"]
    problems = []
    for node in sorted(ast.walk(tree), key=lambda n: getattr(n, "lineno", 0)):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level > 1:
                shown = "." * node.level + (node.module or "")
                problems.append(f"{_display(path)}:{node.lineno}: imports {shown}, outside its modeling folder")
            continue
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            if module.split(".")[0] not in ALLOWED:
                problems.append(
                    f"{_display(path)}:{node.lineno}: imports {module}; a modeling folder may import only "
                    f"{', '.join(sorted(ALLOWED_THIRD_PARTY))}, the standard library and its own folder"
                )
    return problems


def check_modeling_imports(package_dir: Path) -> list[str]:
    """Every offending import under `package_dir/modeling/<family>/`."""
    problems = []
    for family in sorted(p for p in (package_dir / "modeling").glob("*") if p.is_dir()):
        for path in sorted(family.rglob("*.py")):
            problems.extend(check_file(path))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package_dir", nargs="?", default="hf_jepa", help="the package to check (default: hf_jepa)")
    args = parser.parse_args(argv)
    package_dir = Path(args.package_dir).resolve()
    if not package_dir.is_dir():
        print(f"{args.package_dir}: no such package directory", file=sys.stderr)
        return 2
    problems = check_modeling_imports(package_dir)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
