"""Command line: ``python -m disentangle.train --config CONFIG.yaml [key=value ...] [--resume]``.

Examples::

    python -m disentangle.train --config configs/quickstart.yaml
    python -m disentangle.train --config configs/dsprites/beta_vae.yaml train.steps=1000 train.out_dir=runs/x
    python -m disentangle.train --resume runs/x train.steps=2000     # continue a run up to 2000 steps
    python -m disentangle.train --resume runs/x --precision fp32    # a bf16 run, continued in fp32
    torchrun --standalone --nproc_per_node 4 -m disentangle.train --config X.yaml   # 4 GPUs, same objective

Configuration problems, an existing run folder and missing data files are reported in one
paragraph on stderr with a non-zero exit status (2 for usage/config errors, 1 otherwise). Under
torchrun every process exits with that status and rank 0 alone prints.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ._core.cli import REPORTED, add_import_option, add_logging_options, apply_import_option, report, setup_logging
from .errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m disentangle.train",
        description="Train a disentangled-representation model from a YAML config.",
        epilog="Overrides are dotted keys, e.g. train.steps=1000 objective.beta=4 data.name=sprites.",
    )
    p.add_argument("--config", "-c", help="YAML config file (optional with --resume RUN_DIR)")
    p.add_argument(
        "--resume", nargs="?", const=True, default=False, metavar="RUN_DIR",
        help="continue the run in train.out_dir (or RUN_DIR) from its checkpoint up to train.steps",
    )
    p.add_argument("--threads", default=None, metavar="N|auto",
                   help="CPU threads, the same as the override train.threads=N (default: the config's, auto: the "
                        "CPUs this process may use); 1 on a CPU shared with other jobs")
    p.add_argument("--precision", default=None, choices=("fp32", "bf16", "fp16", "auto"),
                   help="with --resume: train this session in another precision than the run's train.precision "
                        "(which stays the run's; execution.jsonl records the change), e.g. fp32 for a bf16 run "
                        "moved to a CPU that emulates bf16")
    add_import_option(p)
    p.add_argument("overrides", nargs="*", help="dotted key=value overrides")
    add_logging_options(p)
    return p


def _print(message: str, file=None) -> None:
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for all
        print(message, file=file)


def _with_data_path_hint(err: Exception, config, resuming: bool) -> Exception:
    """``err``, with a hint when the config's ``data.path`` is not there: where a relative path is read
    from, and, on resume, that the path is part of the run (it cannot change; the data can be linked)."""
    path = config.data.params.get("path")
    if not isinstance(path, str) or not path or Path(path).expanduser().exists():
        return err
    where = "" if Path(path).expanduser().is_absolute() else f" (read from the current folder, {Path.cwd()})"
    fix = (f"data.path is part of the run and cannot change on resume: run from the folder the run was started "
           f"in, or link the old path to the data's new place (ln -s NEW_PLACE {path})") if resuming else (
           "give the data's place with data.path=...")
    return ConfigError(f"{err} The config's data.path is '{path}'{where}; {fix}.")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_intermixed_args(argv)  # overrides before and after options
    setup_logging(args)
    from .config import Config, apply_overrides, load_config, read_yaml_config, upgrade_saved_config
    from .training.trainer import fit

    try:
        apply_import_option(args.imports)  # the user's registrations, before the config names them
        config_path = args.config
        overrides = list(args.overrides)
        if isinstance(args.resume, str) and "=" in args.resume and not Path(args.resume).is_dir():
            # `--resume train.steps=6`: an override that --resume's optional RUN_DIR took for a folder
            overrides.insert(0, args.resume)
            args.resume = True
        if args.threads is not None:
            overrides.append(f"train.threads={args.threads}")
        if isinstance(args.resume, str):
            run_dir = Path(args.resume)
            if config_path is None:
                config_path = run_dir / "config.yaml"
                if not config_path.exists():
                    raise ConfigError(f"Cannot resume: '{run_dir}' has no config.yaml. Is it a run folder?")
            overrides.append(f"train.out_dir={run_dir}")
        if config_path is None:
            raise ConfigError("No config given. Use --config CONFIG.yaml (e.g. configs/quickstart.yaml).")
        if isinstance(args.resume, str) and args.config is None:
            # the run's own saved config: keys added since it was written take the values it used
            raw = upgrade_saved_config(read_yaml_config(config_path))
            config = Config.from_dict(apply_overrides(raw, overrides))
        else:
            config = load_config(config_path, overrides)
        from .training.runtime import flush_denormals_first

        flush_denormals_first(config)  # before torch starts its threads, which inherit the mode
        try:
            result = fit(config, resume=bool(args.resume), precision=args.precision)
        except (ConfigError, FileNotFoundError) as err:
            raise _with_data_path_hint(err, config, bool(args.resume)) from None
    except (*REPORTED, KeyboardInterrupt) as err:
        return report(err, interrupted="interrupted: the last completed step was checkpointed; continue with --resume.")
    _print(f"done: {result.step} steps, run folder {result.out_dir}")
    return 0


if __name__ == "__main__":
    from disentangle._core.cli import run_main

    run_main(main)
