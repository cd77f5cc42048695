"""Benchmark helpers: the CPU features that decide bf16 speed (hardening item 14); the AnnealedVAE gradient diagnosis."""
from __future__ import annotations

import pytest
import torch

from disentangle.training.bench import cpu_capabilities


def test_cpu_capabilities_reads_bf16_flags(tmp_path):
    with_bf16 = tmp_path / "cpuinfo_bf16"
    with_bf16.write_text(
        "processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
        "processor\t: 1\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    )
    caps = cpu_capabilities(str(with_bf16))
    assert caps["cpu_model"] == "Some Xeon"
    assert caps["bf16_flags"] == "amx_bf16 amx_tile avx512_bf16"
    assert caps["native_bf16"] == "yes"
    without = tmp_path / "cpuinfo_plain"
    without.write_text("model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n")
    caps = cpu_capabilities(str(without))
    assert (caps["bf16_flags"], caps["native_bf16"]) == ("none", "no")
    assert caps["torch_cpu_capability"]  # torch's own reading, e.g. AVX2 or AVX512
    missing = cpu_capabilities(str(tmp_path / "absent"))
    assert missing["cpu_model"] == "unknown" and missing["native_bf16"] == "no"



def test_annealed_vae_gradients_reports_each_terms_gradient_and_adams_share(tmp_path, tiny_overrides, capsys, one_thread, benchmark_script):
    """The script's numbers against an independent computation on a tiny AnnealedVAE run: the rms
    gradient of γ·|KL − C| on the mean head's bias, and Adam's v from the checkpoint."""
    import re

    import torch

    import disentangle
    from disentangle.config import load_config
    from disentangle.data import build_dataset
    from disentangle.training.trainer import fit

    run = tmp_path / "annealed"
    fit(load_config(None, tiny_overrides(run, steps=8, **{"objective.name": "annealed_vae", "objective.iteration_threshold": 4})))
    script = benchmark_script("annealed_vae_gradients")
    assert script.main([str(run), "--batches", "2", "--batch-size", "8"]) == 0
    out = capsys.readouterr().out
    assert "step 8, C = 25.00 nats" in out
    row = next(line for line in out.splitlines() if line.startswith("| encoder.head.mean.bias |"))
    cells = [c.strip() for c in row.strip("|").split("|")]

    model = disentangle.load(run)
    model.train()
    dataset = build_dataset(model.config["data"])
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    squares = []
    for _ in range(2):
        x = dataset.sample_batch(8, generator)
        x = x.float() / 255 if x.dtype == torch.uint8 else x.float()
        out_ = model(x)
        kl = (0.5 * (out_.mu ** 2 + out_.logvar.exp() - out_.logvar - 1)).sum(1).mean()
        (grad,) = torch.autograd.grad(1000.0 * (kl - 25.0).abs(), [model.encoder.head.mean.bias])
        squares.append(grad.square())
    expected = (sum(squares) / 2).mean().sqrt().item()
    assert float(cells[2]) == pytest.approx(expected, rel=1e-2)  # printed with 3 significant digits
    checkpoint = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=False)
    names = [n for n, _ in model.named_parameters()]
    v = checkpoint["optimizers"]["model"]["state"][names.index("encoder.head.mean.bias")]["exp_avg_sq"]
    assert float(cells[4]) == pytest.approx(v.mean().sqrt().item(), rel=1e-2)
    assert re.search(r"sign of KL − C per batch: [+-] [+-]$", out.splitlines()[0])


def test_annealed_vae_gradients_refuses_another_objective(tmp_path, tiny_overrides, capsys, one_thread, benchmark_script):
    from disentangle.config import load_config
    from disentangle.training.trainer import fit

    run = tmp_path / "beta"
    fit(load_config(None, tiny_overrides(run, steps=2)))
    assert benchmark_script("annealed_vae_gradients").main([str(run)]) == 2
    assert "not annealed_vae" in capsys.readouterr().err


def test_time_to_disentangle_shows_a_continued_run_once_and_its_40k_column(benchmark_script):
    script = benchmark_script("time_to_disentangle")

    def run(curve, seed=0, strength="beta 4"):
        return {"run": "r", "objective": "beta_vae", "strength": strength, "seed": seed, "precision": "fp32",
                "init": "reference", "curve": curve, "final_mig": None, "steps_per_s": 10.0, "wall_time_s": 600.0, "last_step": curve[-1][0]}

    first = [(2000, 0.1), (20000, 0.2)]
    short, longer = run(first), run(first + [(40000, 0.3)])
    other_seed, other_curve = run(first, seed=1), run([(2000, 0.1), (20000, 0.25)])
    kept = script.drop_continued([short, longer, other_seed, other_curve])
    assert kept == [longer, other_seed, other_curve]
    table = script.table(kept)
    assert "MIG@40k" in table and "| 0.300 |" in table
    assert "MIG@40k" not in script.table([short])
    assert "| beta 4 | 0 | fp32 | reference | 40,000 |" in table  # the init column


def test_the_step_kernel_benchmark_times_every_variant_it_is_given(capsys, one_thread, benchmark_script):
    script = benchmark_script("bench_step_kernels")
    names = ["fp32 · PyTorch backward · fused Adam", "fp32 · conv kernels · fused Adam"]
    assert script.main(["--rounds", "2", "--steps", "1", "--threads", "1", "--pool", "64", "--variants", ",".join(names)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| fp32")]
    assert [row.split("|")[1].strip() for row in rows] == names
    assert rows[0].rstrip("|").split("|")[-1].strip() == "1.000×"
    with pytest.raises(SystemExit, match="unknown variant"):
        script.main(["--variants", "fp64"])


def test_the_cuda_only_step_modes_are_skipped_on_a_cpu_and_the_others_timed(one_thread):
    from disentangle.training.bench import CUDA_MODES, MODES, step_mode_rates

    assert set(CUDA_MODES) == {"tf32", "graphs"} and set(CUDA_MODES) <= set(MODES)
    g = torch.Generator().manual_seed(0)
    rates = step_mode_rates(lambda: torch.rand(4, 1, 64, 64, generator=g), ["eager", "graphs", "tf32"],
                            steps=2, batch_size=4, device=torch.device("cpu"))
    assert set(rates) == {"eager"} and rates["eager"] > 0
