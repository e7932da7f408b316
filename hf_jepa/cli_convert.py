"""The `hf-jepa convert` command: released checkpoints as hf-jepa folders (hf_jepa.conversion). Importing this module
imports neither torch nor transformers, so `hf-jepa --help` stays fast."""

from __future__ import annotations

import argparse
from pathlib import Path

from .cli_errors import CliError

__all__ = ["add_convert_commands"]

FAMILIES = ("i-jepa",)


def cmd_convert(args: argparse.Namespace) -> int:
    """Convert SOURCE into an hf-jepa folder at --output-dir; prints what was converted and initialised."""
    output = Path(args.output_dir)
    if output.exists() and any(output.iterdir()) and not args.overwrite:
        raise CliError(f"--output-dir {args.output_dir!r} is not empty: give a new folder, or add --overwrite")
    predictor = {
        name: value
        for name, value in (
            ("predictor_hidden_size", args.predictor_hidden_size),
            ("predictor_num_layers", args.predictor_num_layers),
            ("predictor_num_heads", args.predictor_num_heads),
        )
        if value is not None
    }
    from .conversion import convert_i_jepa

    result = convert_i_jepa(
        args.source,
        output,
        layout=args.layout,
        image_size=args.image_size,
        num_heads=args.num_heads,
        predictor=predictor or None,
        seed=args.seed,
        check=not args.no_check,
    )
    status = result.config.converted_from["predictor"]
    print(f"Converted {args.source} ({result.layout} layout) into {output}")
    print(f"  tensors mapped: {len(result.mapped)}; source entries ignored: {len(result.ignored)}")
    print(f"  predictor: {status}" + (" (NEW: the source holds the encoder only)" if status == "initialised" else ""))
    if result.source_max_abs_diff is not None:
        print(f"  encoder vs transformers' IJepaModel: max abs diff {result.source_max_abs_diff:.3g}")
    print(f"Continue pre-training: hf-jepa train i-jepa --set init_from={output} data=... --output-dir OUT")
    return 0


def add_convert_commands(sub) -> argparse.ArgumentParser:
    """Add `convert` to the `hf-jepa` subcommands `sub`; returns its parser."""
    convert = sub.add_parser(
        "convert",
        help="convert a released checkpoint into an hf-jepa folder",
        description="Convert a transformers IJepaModel folder / Hub id, or Meta's I-JEPA training checkpoint "
        "(.pth.tar: encoder, predictor, target_encoder), into an hf-jepa I-JEPA folder that keeps the context encoder, "
        "target encoder and predictor, so `hf-jepa train i-jepa --set init_from=DIR` continues pre-training.",
    )
    convert.add_argument("family", choices=FAMILIES, metavar="FAMILY", help="one of: %(choices)s")
    convert.add_argument("source", metavar="SOURCE", help="a model folder, a Hub id, or a checkpoint file")
    convert.add_argument("--output-dir", required=True, help="where the converted folder is written")
    convert.add_argument("--layout", choices=("transformers", "meta"), help="the source layout (default: inferred)")
    convert.add_argument("--image-size", type=int, help="another image size: position tables resampled (bicubic)")
    convert.add_argument("--num-heads", type=int, help="Meta's encoder head count when its width is not a ViT size")
    convert.add_argument("--predictor-hidden-size", type=int, help="fresh predictor width (transformers layout)")
    convert.add_argument("--predictor-num-layers", type=int, help="fresh predictor depth (transformers layout)")
    convert.add_argument("--predictor-num-heads", type=int, help="fresh predictor heads (transformers layout)")
    convert.add_argument("--seed", type=int, default=0, help="seed of the fresh predictor's initialisation")
    convert.add_argument("--no-check", action="store_true", help="skip the parity check against transformers' model")
    convert.add_argument("--overwrite", action="store_true", help="write into a non-empty --output-dir")
    convert.set_defaults(handler=cmd_convert)
    return convert
