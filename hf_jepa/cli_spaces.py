"""The browser-app commands of `hf-jepa`: `demo`, `space` and `push-space` (hf_jepa.spaces). Importing this module
imports neither gradio nor torch, so `hf-jepa --help` stays fast."""

from __future__ import annotations

import argparse
import logging

from .cli_errors import CliError

logger = logging.getLogger("hf_jepa.cli")

__all__ = ["add_space_commands"]


def _spaces_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("gradio") is None:
        raise CliError('the browser apps need gradio: pip install "hf-jepa[spaces]"')


def cmd_demo(args: argparse.Namespace) -> int:
    """Serve a family's app locally (training its quick preset first when no --model is given)."""
    _spaces_installed()
    from .spaces import build_app, launch

    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.public:
        raise CliError(f"--host {args.host!r} would serve the app beyond this machine: add --public to mean it")
    try:
        app = build_app(args.family, model=args.model)
    except ValueError as error:
        raise CliError(str(error)) from error
    logger.info(
        "Serving the %s app on http://%s:%d%s",
        args.family,
        args.host,
        args.port,
        " (and a share link)" if args.share else "",
    )
    launch(app, host=args.host, port=args.port, share=args.share)
    return 0


def cmd_space(args: argparse.Namespace) -> int:
    _spaces_installed()
    from .spaces.space_folder import write_space

    try:
        folder = write_space(args.model, args.output, family=args.family)
    except (ValueError, FileExistsError) as error:
        raise CliError(str(error)) from error
    print(f"Wrote the Space folder {folder} (run it with: cd {folder} && python app.py)")
    return 0


def cmd_push_space(args: argparse.Namespace) -> int:
    from .cli_errors import describe
    from .spaces.space_folder import push_space

    try:
        url = push_space(args.space_dir, args.repo_id, token=args.token, private=args.private or None)
    except FileNotFoundError as error:
        raise CliError(str(error)) from error
    except Exception as error:
        message = describe(error)
        if message is None:
            raise
        raise CliError(f"push of {args.space_dir} to the Space {args.repo_id} failed: {message}") from error
    print(url)
    return 0


def add_space_commands(sub) -> tuple[argparse.ArgumentParser, ...]:
    """Add `demo`, `space` and `push-space` to the `hf-jepa` subparsers `sub`; returns their parsers."""
    from .spaces.registry import APPS  # names only: no gradio or torch import

    app_families = tuple(APPS)
    demo = sub.add_parser(
        "demo",
        help="try a family's model in the browser (a local Gradio app)",
        description="Serve the family's app on http://127.0.0.1:7860. Without --model it first trains the family's "
        "quick preset on embedded data (progress in the page) and caches it under ~/.cache/hf-jepa/spaces.",
    )
    demo.add_argument("family", choices=app_families, metavar="FAMILY", help="one of: %(choices)s")
    demo.add_argument("--model", help="a saved folder or Hub id to serve (default: the quick preset)")
    demo.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    demo.add_argument("--port", type=int, default=7860)
    demo.add_argument("--public", action="store_true", help="allow a --host other than loopback")
    demo.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    demo.set_defaults(handler=cmd_demo)

    space = sub.add_parser(
        "space",
        help="write a Hugging Face Space folder (Gradio app) for a saved model",
        description="Writes app.py, requirements.txt (CPU torch), README.md with the Space metadata, the model "
        "(copied into model/ unless MODEL is a Hub id) and hf-jepa's source. Run it with python app.py.",
    )
    space.add_argument("model", metavar="MODEL", help="a saved folder or Hub id")
    space.add_argument("--output", required=True, help="the Space folder to write (new or empty)")
    space.add_argument("--family", choices=app_families, help="the app (default: found from the model's type)")
    space.set_defaults(handler=cmd_space)

    push_space = sub.add_parser("push-space", help="upload a Space folder (hf-jepa space) as a Space repo")
    push_space.add_argument("space_dir", metavar="SPACE_DIR")
    push_space.add_argument("repo_id", metavar="REPO_ID")
    push_space.add_argument("--private", action="store_true")
    push_space.add_argument("--token", help="Hub token (default: the logged-in one / $HF_TOKEN)")
    push_space.set_defaults(handler=cmd_push_space)

    return demo, space, push_space
