import json
import math

import pytest
import torch
import yaml

import disentangle
from disentangle.config import load_config
from disentangle.errors import NonFiniteLossError, RunExistsError
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE
from disentangle.training.trainer import fit


def _records(path):
    return [json.loads(line) for line in (path / "log.jsonl").read_text().splitlines()]


def _loss_fields(records):
    return [{k: v for k, v in r.items() if k not in ("steps_per_s", "wall_time_s", "paused_s")} for r in records]


def test_resume_is_bit_exact(tmp_path, tiny_overrides):
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=12)))
    # an interrupted run: stop at step 8 (a checkpoint step), then resume up to 12
    fit(load_config(None, tiny_overrides(split, steps=8)))
    fit(load_config(None, tiny_overrides(split, steps=12)), resume=True)
    a, b = _records(straight), _records(split)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(2, 13, 2))
    assert _loss_fields(a) == _loss_fields(b)  # exact float equality of every logged term
    ca = torch.load(straight / "checkpoint.pt", weights_only=True)
    cb = torch.load(split / "checkpoint.pt", weights_only=True)
    for key, value in ca["model"].items():
        assert torch.equal(value, cb["model"][key]), key
    sa, sb = ca["optimizers"]["model"]["state"], cb["optimizers"]["model"]["state"]
    for idx in sa:
        assert torch.equal(sa[idx]["exp_avg_sq"], sb[idx]["exp_avg_sq"])


def test_resume_drops_log_records_written_after_the_checkpoint(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=8)))
    with (run / "log.jsonl").open("a") as f:  # what a crash after step 8 would have left
        f.write(json.dumps({"step": 10, "loss": 1.0}) + "\n" + '{"step": 12, "lo')
    fit(load_config(None, tiny_overrides(run, steps=10)), resume=True)
    steps = [r["step"] for r in _records(run)]
    assert steps == [2, 4, 6, 8, 10]


def test_outputs_and_checkpoint_contents(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=6, **{"train.traversals": "true", "data.size": 64, "model.latent_dim": 3})))
    # steps=6 with checkpoint_every=4: checkpoints at 4 and 6, so the previous one is kept too
    assert {p.name for p in run.iterdir()} == {
        "config.yaml", "checkpoint.pt", "checkpoint.prev.pt", "log.jsonl", "execution.jsonl", "traversals.png",
        "reconstructions.png",
    }
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 6
    assert set(ckpt) >= {"model", "objective", "optimizers", "schedulers", "rng", "config", "step", "precision"}
    assert set(ckpt["rng"]) >= {"python", "numpy", "torch", "generators"}
    assert set(ckpt["rng"]["generators"]) == {"data", "noise"}
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["objective"] == {"name": "beta_vae", "beta": 1.0, "reconstruction": "bernoulli"}
    assert saved["train"]["steps"] == 6
    rec = _records(run)[-1]
    assert set(rec) >= {"step", "loss", "recon", "kl", "kl_per_dim", "elbo"}
    assert len(rec["kl_per_dim"]) == 3
    assert math.isclose(rec["kl"], sum(rec["kl_per_dim"]), rel_tol=1e-5)
    assert not list(run.glob("*.tmp")), "atomic save left a temporary file"


def test_refuses_to_overwrite_an_existing_run(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    before = (run / "checkpoint.pt").read_bytes()
    with pytest.raises(RunExistsError, match="already holds a run"):
        fit(load_config(None, tiny_overrides(run, steps=8)))
    assert (run / "checkpoint.pt").read_bytes() == before


def test_resume_without_checkpoint_and_with_changed_config(tmp_path, tiny_overrides):
    with pytest.raises(RunExistsError, match="no checkpoint"):
        fit(load_config(None, tiny_overrides(tmp_path / "none")), resume=True)
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    with pytest.raises(disentangle.ConfigError, match="objective.beta"):
        fit(load_config(None, tiny_overrides(run, steps=8, **{"objective.beta": 3})), resume=True)


class _ExplodingVAE(BetaVAE):
    """β-VAE whose loss turns NaN from step 5 on (steps are 0-based inside the objective)."""

    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        if step >= 5:
            terms["loss"] = terms["loss"] * float("nan")
        return terms


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, tiny_overrides):
    OBJECTIVES.register("_exploding", _ExplodingVAE, overwrite=True)
    run = tmp_path / "run"
    config = load_config(None, tiny_overrides(run, steps=12, **{"objective.name": "_exploding"}))
    with pytest.raises(NonFiniteLossError, match="NaN or infinite"):
        fit(config)
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 4  # the checkpoint at step 4 survives; nothing non-finite was saved
    assert all(torch.isfinite(v).all() for v in ckpt["model"].values())


def test_load_gives_eval_model_with_public_api(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    for target in (run, run / "checkpoint.pt"):
        model = disentangle.load(target)
        assert not model.training
        x = torch.rand(5, 1, 16, 16)
        mu, logvar = model.encode(x)
        assert mu.shape == logvar.shape == (5, 4)
        assert model.decode(mu).shape == (5, 1, 16, 16)
        torch.testing.assert_close(model.representation(x), mu)
        assert model.config["data"]["name"] == "_tiny_test"
    with pytest.raises(disentangle.DisentangleError, match="neither checkpoint.pt nor checkpoint.prev.pt"):
        disentangle.load(tmp_path)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_runs_on_cpu(tmp_path, precision, tiny_overrides):
    result = fit(load_config(None, tiny_overrides(tmp_path / precision, steps=4, **{"train.precision": precision})))
    assert math.isfinite(result.last_terms["loss"])


def test_metrics_during_training_are_logged_and_do_not_perturb_training(tmp_path, tiny_overrides):
    plain, evaluated = tmp_path / "plain", tmp_path / "eval"
    fit(load_config(None, tiny_overrides(plain, steps=8)))
    fit(load_config(None, tiny_overrides(evaluated, steps=8, **{"train.eval_every": 4, "train.eval_metrics": "[mig]"})))
    records = _records(evaluated)
    metric_records = [r for r in records if "metrics" in r]
    assert [r["step"] for r in metric_records] == [4, 8]
    assert 0.0 <= metric_records[-1]["metrics"]["mig"]["mig"] <= 1.0
    # evaluation draws no randomness from the training streams: the losses are identical
    assert _loss_fields(_records(plain)) == _loss_fields([r for r in records if "metrics" not in r])


def test_unknown_eval_metric_is_a_config_error(tmp_path, tiny_overrides):
    with pytest.raises(disentangle.ConfigError, match="Did you mean 'mig'"):
        load_config(None, tiny_overrides(tmp_path, **{"train.eval_metrics": "[mgi]"}))


# ---------------------------------------------------------------------- optimizers and schedules
from disentangle.config import TrainConfig  # noqa: E402
from disentangle.training.checkpoint import atomic_save  # noqa: E402
from disentangle.training.optim import build_optimizers, lr_factor  # noqa: E402
from disentangle.training.trainer import Trainer  # noqa: E402


def test_lr_factor_values():
    kw = dict(warmup_steps=4, total_steps=12)
    assert [lr_factor(s, schedule="constant", **kw) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_factor(4, schedule="cosine", **kw) == 1.0
    assert math.isclose(lr_factor(8, schedule="cosine", **kw), 0.5, abs_tol=1e-12)
    assert math.isclose(lr_factor(10, schedule="cosine", **kw), 0.5 * (1 + math.cos(math.pi * 0.75)))
    assert math.isclose(lr_factor(12, schedule="cosine", **kw), 0.0, abs_tol=1e-12)
    assert lr_factor(8, schedule="linear", **kw) == 0.5 and lr_factor(12, schedule="linear", **kw) == 0.0
    assert lr_factor(0, schedule="cosine", warmup_steps=0, total_steps=10) == 1.0


def test_the_trainer_builds_the_model_optimizer_and_objectives_only_their_own(tmp_path):
    from disentangle.models.vae import VAE

    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[8])
    aae = OBJECTIVES.build("aae", discriminator_hidden=8, discriminator_lr=3e-4)
    aae.setup(model=model, dataset_size=100)
    opts = build_optimizers(model, aae, TrainConfig(optimizer="adamw", lr=2e-3, weight_decay=0.05))
    assert set(opts) == {"model", "discriminator", "generator"}
    assert all(type(o) is torch.optim.AdamW for o in opts.values())
    assert (opts["model"].defaults["lr"], opts["model"].defaults["weight_decay"]) == (2e-3, 0.05)
    assert (opts["generator"].defaults["lr"], opts["generator"].defaults["weight_decay"]) == (2e-3, 0.05)
    assert (opts["discriminator"].defaults["lr"], opts["discriminator"].defaults["weight_decay"]) == (3e-4, 0.0)
    assert tuple(opts["discriminator"].defaults["betas"]) == (0.5, 0.9)
    assert set(build_optimizers(model, BetaVAE(), TrainConfig())) == {"model"}

    class Greedy(BetaVAE):
        def extra_optimizers(self, model, make_optimizer):
            return {"model": make_optimizer(model.parameters())}

    with pytest.raises(disentangle.DisentangleError, match="named 'model'"):
        build_optimizers(model, Greedy(), TrainConfig())


def test_the_schedule_sets_every_optimizers_lr_at_every_step(tmp_path, tiny_overrides):
    extra = {
        "objective.name": "factor_vae", "objective.discriminator_hidden": 8, "objective.discriminator_layers": 1,
        "objective.discriminator_lr": 3e-4, "train.lr": 1e-3, "train.lr_schedule": "cosine", "train.warmup_steps": 2,
    }
    trainer = Trainer(load_config(None, tiny_overrides(tmp_path / "run", steps=6, **extra)))
    trainer.device = torch.device("cpu")
    trainer._build()
    for step in range(6):
        factor = lr_factor(step, schedule="cosine", warmup_steps=2, total_steps=6)
        assert math.isclose(trainer.optimizers["model"].param_groups[0]["lr"], 1e-3 * factor, rel_tol=1e-12)
        assert math.isclose(trainer.optimizers["discriminator"].param_groups[0]["lr"], 3e-4 * factor, rel_tol=1e-12)
        trainer.train_step()
        trainer.step += 1


SCHEDULED = {"train.optimizer": "adamw", "train.weight_decay": 0.01, "train.lr_schedule": "cosine", "train.warmup_steps": 3}


def test_resume_with_a_schedule_and_adamw_is_bit_exact(tmp_path, tiny_overrides):
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=12, **SCHEDULED)))
    # the same run killed after its step-8 checkpoint: its previous checkpoint and its whole log
    split.mkdir()
    for name in ("config.yaml", "log.jsonl"):
        (split / name).write_bytes((straight / name).read_bytes())
    (split / "checkpoint.pt").write_bytes((straight / "checkpoint.prev.pt").read_bytes())
    assert torch.load(split / "checkpoint.pt", weights_only=True)["step"] == 8
    fit(load_config(None, tiny_overrides(split, steps=12, **SCHEDULED)), resume=True)
    assert _loss_fields(_records(straight)) == _loss_fields(_records(split))
    ca = torch.load(straight / "checkpoint.pt", weights_only=True)
    cb = torch.load(split / "checkpoint.pt", weights_only=True)
    assert all(torch.equal(v, cb["model"][k]) for k, v in ca["model"].items())
    assert ca["schedulers"]["model"]["last_epoch"] == cb["schedulers"]["model"]["last_epoch"] == 12
    assert ca["optimizers"]["model"]["param_groups"][0]["lr"] == cb["optimizers"]["model"]["param_groups"][0]["lr"]
    # a constant schedule is not a run of a scheduled config
    plain = tmp_path / "plain"
    fit(load_config(None, tiny_overrides(plain, steps=12)))
    assert _loss_fields(_records(plain)) != _loss_fields(_records(straight))


def test_a_scheduled_run_cannot_change_its_length_on_resume(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4, **SCHEDULED)))
    with pytest.raises(disentangle.ConfigError, match="train.lr_schedule=cosine decays"):
        fit(load_config(None, tiny_overrides(run, steps=8, **SCHEDULED)), resume=True)


def test_a_checkpoint_from_before_the_trainer_owned_the_optimizer_resumes(tmp_path, tiny_overrides):
    """Format-1 checkpoints without schedulers, noise generator or the new train keys still load."""
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=8)))
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    del ckpt["schedulers"]
    del ckpt["rng"]["generators"]["noise"]
    for key in ("optimizer", "weight_decay", "lr_schedule", "warmup_steps", "compile", "tf32", "cudnn_benchmark",
                "tensorboard", "image_every"):
        del ckpt["config"]["train"][key]
    atomic_save(ckpt, run / "checkpoint.pt")
    result = fit(load_config(None, tiny_overrides(run, steps=12)), resume=True)
    assert result.step == 12 and math.isfinite(result.last_terms["loss"])
    assert [r["step"] for r in _records(run)] == [2, 4, 6, 8, 10, 12]


@pytest.mark.slow  # inductor compiles the MLP's forward and backward with gcc: about a minute on 2 cores
def test_compiled_and_eager_steps_give_the_same_losses(tmp_path, tiny_overrides):
    torch.set_num_threads(1)
    eager, compiled = tmp_path / "eager", tmp_path / "compiled"
    extra = {"objective.name": "beta_tcvae", "train.log_every": 1}
    fit(load_config(None, tiny_overrides(eager, steps=3, **extra)))
    torch._dynamo.reset()
    fit(load_config(None, tiny_overrides(compiled, steps=3, **{**extra, "train.compile": "true"})))
    a, b = _loss_fields(_records(eager)), _loss_fields(_records(compiled))
    assert [r["step"] for r in a] == [r["step"] for r in b] == [1, 2, 3]
    for ra, rb in zip(a, b):
        for key in ("loss", "recon", "kl", "total_correlation"):
            assert math.isclose(ra[key], rb[key], rel_tol=1e-4), (key, ra[key], rb[key])
    ckpt = torch.load(compiled / "checkpoint.pt", weights_only=True)
    assert not any("_orig_mod" in k for k in ckpt["model"])  # compiled in place: the same keys


# ---------------------------------------------------------------------------- train.tf32 (issue 22)
def test_tf32_unset_leaves_pytorchs_defaults_and_true_or_false_set_both():
    from disentangle.config import TrainConfig
    from disentangle.training.runtime import configure_cuda_backends

    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    try:
        assert TrainConfig().tf32 is None
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True  # PyTorch's defaults
        configure_cuda_backends(TrainConfig())
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, True)
        configure_cuda_backends(TrainConfig(tf32=True))
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
        configure_cuda_backends(TrainConfig(tf32=False, cudnn_benchmark=True))
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
        assert torch.backends.cudnn.benchmark
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = flags


@pytest.mark.parametrize("value", ["true", "false", "null"])
def test_tf32_is_tri_state_in_configs(value, tiny_overrides, tmp_path):
    cfg = load_config(None, tiny_overrides(tmp_path, **{"train.tf32": value}))
    assert cfg.train.tf32 is {"true": True, "false": False, "null": None}[value]
    assert load_config(None, tiny_overrides(tmp_path)).train.tf32 is None


def test_a_run_written_with_tf32_false_resumes_with_tf32_unset(tmp_path, tiny_overrides):
    """Configs and checkpoints of earlier versions say tf32: false; the key may change on resume."""
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=8)))
    fit(load_config(None, tiny_overrides(split, steps=4, **{"train.tf32": "false"})))
    assert yaml.safe_load((split / "config.yaml").read_text())["train"]["tf32"] is False
    fit(load_config(None, tiny_overrides(split, steps=8)), resume=True)
    assert _loss_fields(_records(split)) == _loss_fields(_records(straight))


# ---------------------------------------------------------------------------- train.channels_last (issue 22)
def _conv_overrides(out_dir, steps, **extra):
    """The conv64 β-VAE on 64×64 sprites at batch 8: convolutions, where the layout matters."""
    items = {"data.name": "sprites", "data.image_size": 64, "model.backbone": "conv64", "model.latent_dim": 10,
             "train.steps": steps, "train.batch_size": 8, "train.log_every": 1, "train.checkpoint_every": 4,
             "train.out_dir": str(out_dir), "train.progress": "false", "train.device": "cpu",
             "train.traversals": "false", **extra}
    return [f"{k}={v}" for k, v in items.items()]


def test_channels_last_changes_only_the_rounding_and_resumes_bit_exact(tmp_path, one_thread):
    from disentangle.training.trainer import Trainer

    default, last, split = tmp_path / "default", tmp_path / "last", tmp_path / "split"
    fit(load_config(None, _conv_overrides(default, 6, **{"train.channels_last": "false"})))
    trainer = Trainer(load_config(None, _conv_overrides(last, 6, **{"train.channels_last": "true"})))
    trainer.fit()
    convs = [p for p in trainer.model.parameters() if p.dim() == 4]
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    assert any(not p.is_contiguous() for p in convs)  # (a one-channel kernel is contiguous in both layouts)
    a, b = _loss_fields(_records(default)), _loss_fields(_records(last))
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    for ra, rb in zip(a, b):
        for key in ("loss", "recon", "kl"):
            assert math.isclose(ra[key], rb[key], rel_tol=1e-4), (key, ra[key], rb[key])
    # interrupted at a checkpoint step and resumed: the same bits as the straight channels-last run
    fit(load_config(None, _conv_overrides(split, 4, **{"train.channels_last": "true"})))
    fit(load_config(None, _conv_overrides(split, 6, **{"train.channels_last": "true"})), resume=True)
    assert _loss_fields(_records(split)) == b
    ca = torch.load(last / "checkpoint.pt", weights_only=True)["model"]
    cb = torch.load(split / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(ca[k], cb[k]) for k in ca)
    # the checkpoint loads into a model in the default layout
    model = disentangle.load(last)
    assert all(torch.equal(model.state_dict()[k], ca[k]) for k in ca)


@pytest.mark.parametrize("first, then", [("true", "false"), ("false", "true")])
def test_a_resume_in_another_layout_gives_adams_moments_the_parameters_layout(tmp_path, one_thread, first, then):
    """train.channels_last is chosen anew on resume (on by default on CPUs, off on GPUs): the
    restored moments take the parameters' layout, as the fused Adam step assumes (on a CPU it
    computed a wrong update without an error, on CUDA it raises). The resumed steps then follow
    the straight run of the new layout within rounding."""
    from disentangle.training.trainer import Trainer

    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, _conv_overrides(straight, 6, **{"train.channels_last": then})))
    fit(load_config(None, _conv_overrides(split, 4, **{"train.channels_last": first})))
    trainer = Trainer(load_config(None, _conv_overrides(split, 6, **{"train.channels_last": then})))
    trainer.fit(resume=True)
    optimizer = trainer.optimizers["model"]
    moments = [(p, optimizer.state[p]) for group in optimizer.param_groups for p in group["params"] if p.dim() == 4]
    layout = torch.channels_last if then == "true" else torch.contiguous_format
    # the resumed session's layout, in which the kernels of more than one channel differ from the other
    assert moments and all(p.is_contiguous(memory_format=layout) for p, _ in moments)
    other = torch.contiguous_format if then == "true" else torch.channels_last
    assert any(not p.is_contiguous(memory_format=other) for p, _ in moments)
    for param, state in moments:
        assert state["exp_avg"].stride() == state["exp_avg_sq"].stride() == param.stride()
    for a, b in zip(_records(split), _records(straight)):
        assert math.isclose(a["loss"], b["loss"], rel_tol=1e-4), (a["step"], a["loss"], b["loss"])


def test_matching_the_state_layout_makes_a_fused_adam_step_that_of_matching_moments():
    """The helper alone: moments restored in channels-last layout beside contiguous parameters, then
    one fused step: with the helper, the bits of the step from contiguous moments; without it, a
    different update (on a CPU, without an error)."""
    from disentangle.training.runtime import match_state_layout

    gen = torch.Generator().manual_seed(0)
    grad, exp_avg, exp_avg_sq = (torch.randn(4, 3, 3, 3, generator=gen) for _ in range(3))

    def stepped(layout: torch.memory_format, match: bool) -> tuple[torch.Tensor, int]:
        param = torch.nn.Parameter(torch.ones(4, 3, 3, 3))
        optimizer = torch.optim.Adam([param], lr=1e-3, fused=True)
        state = {"step": torch.tensor(3.0), "exp_avg": exp_avg.clone(memory_format=layout),  # stepped in place
                 "exp_avg_sq": exp_avg_sq.abs().clone(memory_format=layout)}
        optimizer.load_state_dict({"state": {0: state}, "param_groups": optimizer.state_dict()["param_groups"]})
        changed = match_state_layout({"model": optimizer}) if match else 0
        param.grad = grad.clone()
        optimizer.step()
        return param.detach(), changed

    same, _ = stepped(torch.contiguous_format, match=False)
    matched, changed = stepped(torch.channels_last, match=True)
    assert changed == 2 and torch.equal(matched, same)
    assert stepped(torch.contiguous_format, match=True)[1] == 0  # nothing to change
    mismatched, _ = stepped(torch.channels_last, match=False)
    assert (mismatched - same).abs().max() > 1e-3


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_convolution_kernels_for_transposed_convolutions_resume_bit_exact_and_may_be_switched(
    tmp_path, one_thread, precision
):
    """train.conv_transpose_via_conv forced on (whatever the CPU): a run interrupted at a checkpoint
    step and resumed has the straight run's bits; resuming with it switched off is allowed (an
    execution strategy) and continues within rounding of the straight run."""
    on = {"train.conv_transpose_via_conv": "true", "train.precision": precision}
    straight, split, switched = tmp_path / "straight", tmp_path / "split", tmp_path / "switched"
    fit(load_config(None, _conv_overrides(straight, 6, **on)))
    fit(load_config(None, _conv_overrides(split, 4, **on)))
    fit(load_config(None, _conv_overrides(split, 6, **on)), resume=True)
    assert _loss_fields(_records(split)) == _loss_fields(_records(straight))
    ca = torch.load(straight / "checkpoint.pt", weights_only=True)
    cb = torch.load(split / "checkpoint.pt", weights_only=True)
    assert all(torch.equal(ca["model"][k], cb["model"][k]) for k in ca["model"])
    sessions = [json.loads(line) for line in (split / "execution.jsonl").read_text().splitlines()]
    assert [s["conv_transpose_via_conv"] for s in sessions] == [True, True]
    assert all(s["optimizer"] == "fused" for s in sessions)
    fit(load_config(None, _conv_overrides(switched, 4, **on)))
    fit(load_config(None, _conv_overrides(switched, 6, **{**on, "train.conv_transpose_via_conv": "false"})),
        resume=True)
    for a, b in zip(_records(switched), _records(straight)):
        assert math.isclose(a["loss"], b["loss"], rel_tol=1e-4), (a["step"], a["loss"], b["loss"])


# ---------------------------------------------------------------------------- execution choices (issue 32)
@pytest.mark.parametrize(
    "setting, device, capability, expected",
    [
        ("auto", "cpu", "AVX512", True),
        ("auto", "cpu", "AMX", True),
        ("auto", "cpu", "AVX2", True),  # measured 1.2-1.3x (benchmarks/RESULTS-train-cpu.md)
        ("auto", "cpu", "DEFAULT", False),
        ("auto", "cpu", "VSX", False),  # a POWER CPU: not measured
        ("auto", "meta", "AVX512", False),  # not a CPU: not measured, left off
        (True, "cpu", "AVX2", True),
        (False, "cpu", "AVX512", False),
    ],
)
def test_channels_last_auto_follows_the_cpu_capability(setting, device, capability, expected):
    from disentangle.training.runtime import choose_channels_last

    on, reason = choose_channels_last(setting, torch.device(device), capability)
    assert on is expected
    assert reason == "set" if setting != "auto" else reason.startswith("auto: ")


def test_materialize_auto_needs_a_long_session_and_a_quarter_of_the_memory():
    from disentangle.training.runtime import MATERIALIZE_MIN_STEPS, choose_materialize

    gib = 2**30
    grid = 3 * gib
    assert choose_materialize("auto", grid, MATERIALIZE_MIN_STEPS, 12 * gib)[0] is True  # exactly a quarter
    assert choose_materialize("auto", grid, MATERIALIZE_MIN_STEPS, 12 * gib - 1)[0] is False
    assert choose_materialize("auto", grid, MATERIALIZE_MIN_STEPS - 1, 100 * gib)[0] is False
    assert choose_materialize("auto", grid, 10**6, None) == (False, "auto: free memory unknown")
    assert choose_materialize(True, grid, 1, 0) == (True, "set")
    assert choose_materialize(False, grid, 10**6, 100 * gib) == (False, "set")


def test_materialized_run_equals_rendered_run_and_says_so(tmp_path, one_thread, monkeypatch):
    """``data.materialize: auto`` materialises a long enough session; the losses are the same bits as
    a run rendering every batch; each session writes what it chose to execution.jsonl; the run id
    does not depend on the choice, and a run may resume with another choice."""
    from disentangle.sweep.ids import run_id
    from disentangle.training import runtime

    monkeypatch.setattr(runtime, "MATERIALIZE_MIN_STEPS", 3)
    common = {"data.name": "sprites", "data.image_size": 16, "model.backbone": "mlp", "model.latent_dim": 4,
              "train.batch_size": 8, "train.log_every": 1, "train.checkpoint_every": 2, "train.progress": "false",
              "train.device": "cpu", "train.traversals": "false"}

    def overrides(out, steps, **extra):
        return [f"{k}={v}" for k, v in {**common, "train.out_dir": str(out), "train.steps": steps, **extra}.items()]

    rendered, auto = tmp_path / "rendered", tmp_path / "auto"
    fit(load_config(None, overrides(rendered, 4, **{"data.materialize": "false"})))
    fit(load_config(None, overrides(auto, 2)))  # a 2-step session: rendered per batch
    fit(load_config(None, overrides(auto, 5)), resume=True)  # 3 more steps: materialised
    fit(load_config(None, overrides(auto, 6, **{"data.materialize": "false"})), resume=True)
    sessions = [json.loads(line) for line in (auto / "execution.jsonl").read_text().splitlines()]
    assert [(r["step"], r["materialize"]) for r in sessions] == [(0, False), (2, True), (5, False)]
    assert {r["precision"] for r in sessions} == {"fp32"}  # what trained, auto resolved
    from disentangle._core.hardware import cpu_description

    assert {r["cpu"] for r in sessions} == {cpu_description()}  # the machine of each session, by generation
    assert sessions[0]["materialize_reason"].startswith("auto: 2 steps") and sessions[2]["materialize_reason"] == "set"
    assert _loss_fields(_records(auto))[:4] == _loss_fields(_records(rendered))
    ids = {run_id(load_config(None, overrides(tmp_path, 4, **{"data.materialize": v}))) for v in ("auto", "true", "false")}
    assert len(ids) == 1


def test_a_given_dataset_is_materialised_too_and_says_so_when_it_already_was(tmp_path, one_thread, monkeypatch):
    """A sweep worker builds its dataset once and gives it to each run's Trainer: ``auto`` materialises
    it for a long session as it does a dataset built by the trainer, and the next run on the same
    dataset records that it trains on the materialised grid even when its own session is short."""
    from disentangle.data import build_dataset
    from disentangle.training import runtime

    monkeypatch.setattr(runtime, "MATERIALIZE_MIN_STEPS", 3)
    dataset = build_dataset({"name": "sprites", "image_size": 16}, device="cpu")

    def run(name, steps):
        cfg = load_config(None, [f"{k}={v}" for k, v in {
            "data.name": "sprites", "data.image_size": 16, "model.backbone": "mlp", "model.latent_dim": 4,
            "train.batch_size": 8, "train.steps": steps, "train.progress": "false", "train.device": "cpu",
            "train.traversals": "false", "train.out_dir": str(tmp_path / name)}.items()])
        Trainer(cfg, dataset=dataset).fit()
        return json.loads((tmp_path / name / "execution.jsonl").read_text().splitlines()[0])

    assert not dataset.materialized
    first = run("long", 3)
    assert (first["materialize"], dataset.materialized) == (True, True)
    second = run("short", 2)
    assert second["materialize"] is True
    assert second["materialize_reason"] == "the given dataset was already materialised"


def test_steps_per_s_is_the_loops_rate_since_the_last_record_without_evaluations(tmp_path, one_thread, monkeypatch):
    """``steps_per_s`` of a log record: steps since the previous record over the time the training
    loop took for them; an evaluation (here made to take 0.6 s) counts in ``wall_time_s`` only."""
    import time as time_module

    from disentangle.training.trainer import Trainer as TrainerClass

    monkeypatch.setattr(TrainerClass, "_evaluate", lambda self: (time_module.sleep(0.6), {})[1])
    cfg = load_config(None, [f"{k}={v}" for k, v in {
        "data.name": "sprites", "data.image_size": 16, "model.backbone": "mlp", "model.latent_dim": 4,
        "train.batch_size": 8, "train.steps": 6, "train.log_every": 2, "train.eval_every": 2,
        "train.eval_metrics": "[mig]", "train.checkpoint_every": 100, "train.progress": "false",
        "train.device": "cpu", "train.traversals": "false", "train.out_dir": str(tmp_path / "run")}.items()])
    TrainerClass(cfg).fit()
    records = [r for r in _records(tmp_path / "run") if "steps_per_s" in r]
    assert [r["step"] for r in records] == [2, 4, 6]
    for r in records[1:]:  # each interval holds a 0.6 s evaluation, left out of the rate
        assert 2 / r["steps_per_s"] < 0.3, r
    # the wall clock counts the evaluations of steps 2 and 4 (step 6's runs after its log record)
    assert records[-1]["wall_time_s"] >= 2 * 0.6
    # the intervals' times add up to the loop's time: rate_after_first_record's premise
    loop_s = sum(2 / r["steps_per_s"] for r in records)
    assert loop_s < records[-1]["wall_time_s"] - 2 * 0.6 + 0.05
