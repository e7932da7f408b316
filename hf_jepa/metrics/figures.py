"""Headless figures: matplotlib with the Agg backend (imported on first use, so computing metrics never pays for it),
and one way to write a PNG."""

from pathlib import Path


def pyplot():
    """`matplotlib.pyplot` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path) -> str:
    """Write `figure` as a 110-dpi PNG at `path` (parent folders created), close it, and return the path."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot().close(figure)
    return str(path)
