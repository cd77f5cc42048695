"""The zoo name and the recipe of a campaign run, from its ``config.yaml``.

    python benchmarks/campaign300k/naming.py RUN/config.yaml [cpu|gpu]     # prints "NAME RECIPE"

The name follows the zoo's reference-init models: ``<objective>-sprites-<strength>-<hardware><steps
in thousands>k-ref-s<seed>``, the strength written as the generated recipes write it (the
objective's strength parameter, a trailing ``_`` dropped, then its value: ``beta4``,
``lambda_od10``, ``c_max25``), and AnnealedVAE's capacity ramp of disentanglement_lib (100,000 steps)
marked ``-ramp100k`` as its recipe is. The recipe is the shipped config that, with the seed, the
step count, the precision and the strength, trains the same run (``tests/zoo/test_shipped.py``
checks each published model against it), so ``zoo publish --recipe`` records it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from disentangle.zoo.recipes import FAMILIES, format_value  # noqa: E402

#: the campaign's sweeps (configs/sweeps/), in the order its lanes take them (resume.sh)
SWEEPS = ("zoo_sprites_ref300k", "zoo_sprites_ref300k_factor_fp32", "zoo_sprites_ref300k_more",
          "zoo_sprites_ref300k_ada_seeds")
#: the shipped recipe of each objective the campaign trains
RECIPES = {
    "beta_vae": "sprites/beta_vae", "beta_tcvae": "sprites/beta_tcvae", "factor_vae": "sprites/factor_vae",
    "ada_gvae": "weak/ada_gvae_sprites", "ada_ml_vae": "weak/ada_ml_vae_sprites",
    "dip_vae_i": "sprites/dip_vae_i", "dip_vae_ii": "sprites/dip_vae_ii",
    "annealed_vae": "sprites/annealed_vae_ramp100k", "info_vae": "sprites/info_vae",
}
#: disentanglement_lib's AnnealedVAE capacity ramp (steps), named in the model's name
REFERENCE_RAMP = 100_000


def strength(objective: dict[str, Any]) -> str:
    """``{"name": "dip_vae_i", "lambda_od": 10.0}`` -> ``"lambda_od10"``."""
    for family in FAMILIES:
        parameter = family.parameter.get(objective["name"])
        if parameter is not None:
            token = f"{parameter.rstrip('_')}{format_value(objective[parameter])}"
            if objective["name"] == "annealed_vae" and objective.get("iteration_threshold") == REFERENCE_RAMP:
                token += f"-ramp{REFERENCE_RAMP // 1000}k"
            return token
    raise SystemExit(f"no strength parameter is known for objective '{objective['name']}'")


def zoo_name(config: dict[str, Any], hardware: str = "cpu") -> str:
    """The zoo name of a campaign run trained on ``hardware`` (``cpu`` or ``gpu``)."""
    objective = config["objective"]
    steps = int(config["train"]["steps"]) // 1000
    return f"{objective['name']}-sprites-{strength(objective)}-{hardware}{steps}k-ref-s{config['seed']}"


def recipe(config: dict[str, Any]) -> str:
    name = config["objective"]["name"]
    if name not in RECIPES:
        raise SystemExit(f"the campaign has no recipe for objective '{name}'; it knows {', '.join(RECIPES)}")
    return RECIPES[name]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2 or (len(args) == 2 and args[1] not in ("cpu", "gpu")):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    config = yaml.safe_load(Path(args[0]).read_text())
    print(zoo_name(config, args[1] if len(args) == 2 else "cpu"), recipe(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
