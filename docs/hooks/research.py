"""mkdocs hook: publish the research write-ups (research/, outside docs_dir) with the docs site.

Every file under research/ (write-ups, their figures, tables, scripts and records) is added to the site's files at
`research/<family>/<study>/...`, beside the pages, so a page links a study as `../research/<family>/<study>/README.md`
(relative to the page's own place in docs/, e.g. docs/families/bro-jepa.md) and `mkdocs build --strict` validates
those links like any other. The studies are not in the nav (research/README.md is their index, linked from the
pages), so they are marked `NOT_IN_NAV` instead of failing the strict "not in nav" check.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

RESEARCH = "research"


def on_files(files, config):
    root = Path(config["config_file_path"]).resolve().parent
    research = root / RESEARCH
    for path in sorted(research.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        src_uri = path.relative_to(root).as_posix()
        files.append(
            File(
                src_uri,
                src_dir=str(root),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
                inclusion=InclusionLevel.NOT_IN_NAV,
            )
        )
    return files
