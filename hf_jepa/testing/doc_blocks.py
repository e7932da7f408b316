"""The runnable code blocks of the docs: collect them from Markdown, run them, or check the ones marked to skip.

A fenced ```` ```python ```` or ```` ```bash ```` block runs as written (tests/test_docs_code_blocks.py): the blocks of
one page in order, in one fresh folder, each in its own process (`python -c` / `bash -euo pipefail -c`), offline, with
this interpreter's bin folder first on PATH. State passes between blocks only through files. An HTML comment on the line
before the fence changes that:

    <!-- docs-test: skip reason="needs a GPU" -->

The block is then only checked: Python compiles and every imported module and name resolves; bash passes `bash -n`
and every `hf-jepa ...` command line (also `-m hf_jepa.cli ...`) parses with the CLI's own argparse parser.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = ("python", "bash")
# Other names of the two languages: a block written ```py or ```sh must not go untested; say python or bash.
_ALIASES = ("py", "python3", "sh", "shell", "console", "zsh")
# The info string may carry attributes after the language (```python title="x.py"): the language is its first word.
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)(?P<attributes>\s+[^`]*)?\s*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_SKIP = re.compile(r'^skip\s+reason="(?P<reason>[^"]+)"$')


@dataclass(frozen=True)
class CodeBlock:
    page: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.language})"


def collect_blocks(path: Path, page: str | None = None) -> list[CodeBlock]:
    """Every ```python / ```bash block of a Markdown file, with the skip reason of its directive (or None).

    A malformed `docs-test` directive raises ValueError naming the line."""
    page = page or str(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, language, start = match["indent"], match["lang"], i
        body, i = [], i + 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):  # an unclosed fence would swallow the rest of the page unseen
            raise ValueError(f"{page}:{start + 1}: the ``` fence opened here is never closed (at this indent)")
        i += 1
        if language.lower() in _ALIASES:
            raise ValueError(
                f"{page}:{start + 1}: write ```python or ```bash, not ```{language} (it would go untested)"
            )
        if language not in LANGUAGES:
            continue
        skip = None
        directive = _DIRECTIVE.match(lines[start - 1]) if start > 0 else None
        if directive:
            found = _SKIP.match(directive["body"])
            if not found:
                raise ValueError(f'{page}:{start}: unknown directive {directive["body"]!r}; use skip reason="..."')
            skip = found["reason"]
        blocks.append(CodeBlock(page, start + 1, language, "\n".join(body) + "\n", skip))
    return blocks


def block_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_JEPA_DISABLE_PROGRESS_BARS="1", PYTHONUNBUFFERED="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("HF_JEPA_MNIST", None)  # pages must not depend on a local MNIST copy
    return env


def _isolated_caches(cwd: Path) -> dict[str, str]:
    """The Hugging Face caches (models, remote-code modules, datasets) under the page's own folder: a block sees
    what a new user sees, and leaves nothing in the user's cache."""
    home = Path(cwd) / ".hf-home"
    return {
        "HF_HOME": str(home),
        "HF_MODULES_CACHE": str(home / "modules"),
        "HF_DATASETS_CACHE": str(home / "datasets"),
    }


def run_block(block: CodeBlock, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a block in `cwd`; returns the finished process (stdout and stderr together in `.stdout`)."""
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    return subprocess.run(
        command,
        cwd=cwd,
        env={**block_environment(), **_isolated_caches(cwd)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )


def check_block(block: CodeBlock) -> list[str]:
    """The problems of a block that is not run (an empty list when it is fine)."""
    return check_python(block.code) if block.language == "python" else check_bash(block.code)


def check_python(code: str) -> list[str]:
    try:
        tree = compile(code, "<block>", "exec", ast.PyCF_ONLY_AST)
    except SyntaxError as error:
        return [f"syntax error, line {error.lineno}: {error.msg}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                problems += _resolve(alias.name, None)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                problems += _resolve(node.module, alias.name)
    return problems


def _resolve(module: str, name: str | None) -> list[str]:
    try:
        imported = importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - any failure to import is the problem reported
        return [f"import {module}: {type(error).__name__}: {error}"]
    if name is None or name == "*" or hasattr(imported, name):
        return []
    try:
        importlib.import_module(f"{module}.{name}")
        return []
    except ImportError:
        return [f"from {module} import {name}: no such name"]


def check_bash(code: str) -> list[str]:
    result = subprocess.run(["bash", "-n", "-c", code], capture_output=True, text=True)
    problems = [f"bash -n: {result.stderr.strip()}"] if result.returncode else []
    for argv in hf_jepa_commands(code):
        problems += check_cli_arguments(argv)
    return problems


def hf_jepa_commands(code: str) -> list[list[str]]:
    """The argument lists of every `hf-jepa ...` / `... -m hf_jepa.cli ...` command in a bash block."""
    commands = []
    text = re.sub(r"\\\n", " ", code)
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        command: list[str] | None = None
        for word in words:
            if word in (";", "&&", "||", "|", "&") or word.endswith((";", "&")):
                if command is not None:
                    commands.append(command)
                command = None
                continue
            if command is not None:
                command.append(word)
            elif word == "hf-jepa" or word == "hf_jepa.cli":
                command = []
        if command is not None:
            commands.append(command)
    return commands


def check_cli_arguments(argv: list[str]) -> list[str]:
    """Parse `hf-jepa` arguments with the CLI's own parser (nothing runs); the error message, if any."""
    if any("$" in word for word in argv):  # shell variables: only known when the block runs
        return []
    from hf_jepa.cli import build_parser

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exit_:
        if exit_.code:
            return [f"hf-jepa {' '.join(argv)}: {stderr.getvalue().strip() or exit_.code}"]
    return []
