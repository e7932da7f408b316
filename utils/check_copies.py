"""Keep the code copied between model families identical to its source.

Each family's modeling folder (`hf_jepa/modeling/<family>/`) must be self-contained for `trust_remote_code` export, so
shared pieces are copied on purpose. A copy is marked by a comment line directly above its `def` / `class` (above its
decorators, if any):

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.vicreg_loss
    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel._freeze_target with BroJepa->EpmJepa
    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaPreTrainedModel with BroJepa->EpmJepa,bro_jepa->epm_jepa

The source is a function, a class or a method (`Class.method`) named by its dotted path. The `with A->B,C->D`
replacements are applied, in order, to the source text before comparing. The whole segment is compared (decorators,
docstring, comments inside), ignoring only trailing whitespace; the source is re-indented to the copy's indentation.

usage: python utils/check_copies.py [PACKAGE_DIR] [--fix]
    PACKAGE_DIR   the package to check (default: hf_jepa); dotted names resolve from its parent directory.
    --fix         rewrite every differing copy from its source.
Exit status 1 with one line per problem (`path:line: ...`) when a copy differs (without --fix) or cannot be checked.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^(?P<indent>\s*)#\s*Copied from\s+(?P<name>[\w.]+)(?:\s+with\s+(?P<replacements>.+?))?\s*$")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class Copy:
    """One marked copy: where it is and what it should be equal to."""

    path: Path
    marker_line: int  # 1-based line of the "# Copied from" comment
    start: int  # 1-based first line of the copy (first decorator or def/class line)
    end: int  # 1-based last line of the copy
    name: str  # dotted name of the source
    replacements: list[tuple[str, str]]


class CheckError(Exception):
    """A marker that cannot be checked (bad syntax, source not found...)."""


def _display(path: Path) -> str:
    """`path` relative to the working directory when it lies under it (the form editors and CI logs link)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _segment_start(node: ast.AST) -> int:
    return min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])


def _definitions_by_start(tree: ast.AST) -> dict[int, ast.AST]:
    return {_segment_start(node): node for node in ast.walk(tree) if isinstance(node, _DEFINITIONS)}


def parse_replacements(text: str | None) -> list[tuple[str, str]]:
    """`"A->B, c->d"` -> `[("A", "B"), ("c", "d")]`; raises `CheckError` on a malformed pair."""
    if not text:
        return []
    pairs = []
    for item in text.split(","):
        old, sep, new = item.strip().partition("->")
        if not sep or not old.strip():
            raise CheckError(f"malformed replacement {item.strip()!r} (expected OLD->NEW)")
        pairs.append((old.strip(), new.strip()))
    return pairs


def find_copies(path: Path) -> tuple[list[Copy], list[str]]:
    """The marked copies in one file, and the problems found reading the markers."""
    text = path.read_text()
    lines = text.splitlines()
    copies, problems = [], []
    marker_lines = [(i + 1, m) for i, line in enumerate(lines) if (m := MARKER.match(line))]
    if not marker_lines:
        return copies, problems
    try:
        by_start = _definitions_by_start(ast.parse(text, filename=str(path)))
    except SyntaxError as error:
        return copies, [f"{_display(path)}:{error.lineno}: cannot parse: {error.msg}"]
    for line_no, match in marker_lines:
        node = by_start.get(line_no + 1)
        if node is None:
            problems.append(f"{_display(path)}:{line_no}: 'Copied from' marker is not directly above a def or class")
            continue
        try:
            replacements = parse_replacements(match["replacements"])
        except CheckError as error:
            problems.append(f"{_display(path)}:{line_no}: {error}")
            continue
        copies.append(Copy(path, line_no, line_no + 1, node.end_lineno, match["name"], replacements))
    return copies, problems


def _module_file(package_dir: Path, parts: list[str]) -> Path | None:
    base = package_dir.parent.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _find_object(tree: ast.AST, names: list[str]) -> ast.AST | None:
    body = tree.body
    node = None
    for name in names:
        node = next((n for n in body if isinstance(n, _DEFINITIONS) and n.name == name), None)
        if node is None:
            return None
        body = node.body
    return node


def source_segment(package_dir: Path, dotted: str) -> str:
    """The source text (decorators included, dedented) of `package.module.Object[.method]`; raises `CheckError`."""
    parts = dotted.split(".")
    if parts[0] != package_dir.name:
        raise CheckError(f"source {dotted} is outside the package {package_dir.name}")
    # The longest prefix that is a module wins; the rest is the object path inside it.
    for split in range(len(parts) - 1, 0, -1):
        module = _module_file(package_dir, parts[:split])
        if module is None:
            continue
        text = module.read_text()
        try:
            node = _find_object(ast.parse(text, filename=str(module)), parts[split:])
        except SyntaxError as error:
            raise CheckError(f"source module {module} cannot be parsed: {error.msg}") from error
        if node is None:
            raise CheckError(f"source {dotted} not found: no {'.'.join(parts[split:])} in {'.'.join(parts[:split])}")
        lines = text.splitlines()[_segment_start(node) - 1 : node.end_lineno]
        return textwrap.dedent("\n".join(lines) + "\n")
    raise CheckError(f"source {dotted} not found: no such module")


def expected_text(package_dir: Path, copy: Copy, copy_lines: list[str]) -> str:
    """What the copy's lines should read: the source with the replacements, at the copy's indentation."""
    text = source_segment(package_dir, copy.name)
    for old, new in copy.replacements:
        text = text.replace(old, new)
    first = copy_lines[copy.start - 1]
    indent = first[: len(first) - len(first.lstrip())]
    return textwrap.indent(text, indent)


def _normalise(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def check_file(package_dir: Path, path: Path, fix: bool) -> list[str]:
    """Problems in one file (differences are fixed in place, not reported, when `fix`)."""
    copies, problems = find_copies(path)
    if not copies:
        return problems
    lines = path.read_text().splitlines(keepends=True)
    rewrites = []
    for copy in copies:
        try:
            expected = expected_text(package_dir, copy, lines)
        except CheckError as error:
            problems.append(f"{_display(path)}:{copy.marker_line}: {error}")
            continue
        if _normalise(expected) == _normalise("".join(lines[copy.start - 1 : copy.end])):
            continue
        if fix:
            rewrites.append((copy, expected))
        else:
            problems.append(f"{_display(path)}:{copy.marker_line}: copy of {copy.name} differs from its source")
    # A copy nested in another rewritten copy (a marked method inside a marked class) is rewritten with it. The rest
    # go bottom to top so that the line numbers of the ones above stay valid.
    outer = [
        (c, e) for c, e in rewrites if not any(o is not c and o.start <= c.start <= c.end <= o.end for o, _ in rewrites)
    ]
    for copy, expected in sorted(outer, key=lambda item: item[0].start, reverse=True):
        lines[copy.start - 1 : copy.end] = [line + "\n" for line in expected.rstrip("\n").split("\n")]
        print(f"{_display(path)}:{copy.marker_line}: rewrote the copy of {copy.name} from its source")
    if rewrites:
        path.write_text("".join(lines))
    return problems


def check_copies(package_dir: Path, fix: bool = False) -> list[str]:
    """Every problem found under `package_dir`, as `path:line: message` lines."""
    problems = []
    for path in sorted(package_dir.rglob("*.py")):
        problems.extend(check_file(package_dir, path, fix))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package_dir", nargs="?", default="hf_jepa", help="the package to check (default: hf_jepa)")
    parser.add_argument("--fix", action="store_true", help="rewrite differing copies from their sources")
    args = parser.parse_args(argv)
    package_dir = Path(args.package_dir).resolve()
    if not package_dir.is_dir():
        print(f"{args.package_dir}: no such package directory", file=sys.stderr)
        return 2
    problems = check_copies(package_dir, fix=args.fix)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
