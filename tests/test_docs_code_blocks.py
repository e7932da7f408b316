"""Every code block a reader can copy from README.md and docs/ runs (see hf_jepa/testing/doc_blocks.py).

One test per page: its blocks run in order in a fresh folder; blocks marked `<!-- docs-test: skip reason="..." -->`
are checked only (syntax, imports, `hf-jepa` arguments). research/ is not collected: its commands are experiments.
"""

from pathlib import Path

import pytest
import yaml

from hf_jepa.testing.doc_blocks import check_block, collect_blocks, run_block

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.independent  # each page runs in its own fresh folder


def _pages() -> list[str]:
    pages = ["README.md", "CONTRIBUTING.md"] + sorted(
        path.relative_to(ROOT).as_posix() for path in DOCS.rglob("*.md") if "hooks" not in path.parts
    )
    return [page for page in pages if (ROOT / page).exists()]


@pytest.mark.parametrize("page", _pages())
def test_page_code_blocks(page, tmp_path):
    failures = []
    for block in collect_blocks(ROOT / page, page):
        if block.skip_reason:
            failures += [f"{block.where}: {problem}" for problem in check_block(block)]
            continue
        result = run_block(block, tmp_path)
        if result.returncode:
            failures.append(
                f"{block.where} exited {result.returncode}:\n{block.code}\n--- output (tail) ---\n"
                + result.stdout[-3000:]
            )
            break  # later blocks of the page depend on this one
    assert not failures, "\n\n".join(failures)


def _nav_pages(entries) -> set[str]:
    found = set()
    for entry in entries:
        if isinstance(entry, str):
            found.add(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                found |= _nav_pages(value) if isinstance(value, list) else {value}
    return found


def test_every_docs_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_pages(config["nav"])
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md") if "hooks" not in path.parts}
    assert not pages - nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert not nav - pages, f"nav entries without a page: {sorted(nav - pages)}"


def test_checked_blocks_report_their_problems(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        '<!-- docs-test: skip reason="long" -->\n```python\nfrom hf_jepa.data import no_such_name\n```\n\n'
        '<!-- docs-test: skip reason="long" -->\n```bash\nhf-jepa train no-such-family --output-dir x\n```\n\n'
        '<!-- docs-test: skip reason="long" -->\n```bash\nhf-jepa eval runs/x --data embedded\n```\n\n'
        "```text\nnot collected\n```\n"
    )
    blocks = collect_blocks(page, "page.md")
    assert [(b.line, b.language, b.skip_reason) for b in blocks] == [
        (2, "python", "long"),
        (7, "bash", "long"),
        (12, "bash", "long"),
    ]
    assert "no such name" in check_block(blocks[0])[0]
    assert "no-such-family" in check_block(blocks[1])[0]
    assert check_block(blocks[2]) == []


def test_an_unknown_directive_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: skipp -->\n```bash\ntrue\n```\n")
    with pytest.raises(ValueError, match="page.md:1"):
        collect_blocks(page, "page.md")


@pytest.mark.parametrize(
    "text, message",
    [
        ("intro\n```python\nprint(1)\n", "page.md:2: the ``` fence opened here is never closed"),
        ("```py\nprint(1)\n```\n", "write ```python or ```bash, not ```py"),
        ("```sh\necho 1\n```\n", "write ```python or ```bash, not ```sh"),
    ],
)
def test_blocks_that_would_go_untested_are_errors(tmp_path, text, message):
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(ValueError, match=message.replace("`", "`").replace("(", r"\(")):
        collect_blocks(page, "page.md")


def test_a_fence_with_attributes_is_collected(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('```python title="example.py"\nprint(1)\n```\n')
    assert [(b.language, b.code) for b in collect_blocks(page, "page.md")] == [("python", "print(1)\n")]
