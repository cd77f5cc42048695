"""UDR (Duan et al. 2020): the pairwise formula on hand-computed cases, planted answers on synthetic
representations, and end to end from hand-made run folders into the study's analyses."""
from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest
import torch
import yaml
from scipy.stats import spearmanr

from disentangle.models.vae import VAE
from disentangle.study import analyze, similarity_matrix, udr_pair, udr_scores
from disentangle.study.udr import gaussian_kl_per_latent


def test_udr_pair_hand_computed():
    r = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    # rows: 1²/1 = 1, 1²/2 = 0.5; columns: 1²/1 = 1 each. Paper: (1.5 + 3) / (2 + 3).
    assert udr_pair(r) == pytest.approx(4.5 / 5)
    # disentanglement_lib: mean over rows and mean over columns, averaged: (0.75 + 1) / 2
    assert udr_pair(r, aggregation="dlib") == pytest.approx(0.875)
    assert udr_pair(np.eye(4)) == pytest.approx(1.0)
    assert udr_pair(np.ones((3, 3))) == pytest.approx(1 / 3)  # every latent equally similar to all
    assert udr_pair(np.zeros((3, 3))) == 0.0
    # only informative latents count: dropping row 1 and column 2 leaves [[1, 0], ...] -> [[1, 0]]
    assert udr_pair(r, np.array([True, False]), np.array([True, True, False])) == pytest.approx((1 + 1) / 3)
    assert udr_pair(r, np.array([False, False]), None) == 0.0


def _dlib_relative_strength(matrix):
    """disentanglement_lib's relative_strength_disentanglement, written out for comparison."""
    score_x = np.nanmean(np.nan_to_num(np.max(matrix, axis=0) ** 2 / np.sum(matrix, axis=0)))
    score_y = np.nanmean(np.nan_to_num(np.max(matrix, axis=1) ** 2 / np.sum(matrix, axis=1)))
    return (score_x + score_y) / 2


def test_dlib_aggregation_matches_the_reference_formula():
    rng = np.random.default_rng(0)
    for shape in ((3, 3), (4, 6), (5, 2)):
        m = rng.uniform(0, 1, shape)
        assert udr_pair(m, aggregation="dlib") == pytest.approx(_dlib_relative_strength(m))
        if shape[0] == shape[1]:
            assert udr_pair(m) == pytest.approx(_dlib_relative_strength(m))  # the two agree when d_a = d_b


def test_spearman_similarity_matches_scipy():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(300, 3))
    b = np.column_stack([a[:, 2] ** 3, -a[:, 0], rng.normal(size=300)])
    sim = similarity_matrix(a, b, "spearman")
    expected = np.array([[abs(spearmanr(a[:, i], b[:, j]).statistic) for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(sim, expected, atol=1e-12)
    assert sim[2, 0] == pytest.approx(1.0) and sim[0, 1] == pytest.approx(1.0)


@pytest.mark.parametrize("correlation", ["lasso", "spearman"])
def test_permuted_representations_score_higher_than_unrelated_ones(correlation):
    rng = np.random.default_rng(0)
    factors = rng.uniform(-1, 1, size=(1000, 4))
    disentangled = [factors, -2.0 * factors[:, [2, 0, 3, 1]], factors[:, [1, 0, 3, 2]] + 0.01 * rng.normal(size=(1000, 4))]
    entangled = [factors @ np.linalg.qr(rng.normal(size=(4, 4)))[0] for _ in range(3)]
    good = udr_scores(disentangled, correlation=correlation)
    bad = udr_scores(entangled, correlation=correlation)
    if correlation == "lasso":
        # on standardised codes the Lasso shrinks a perfect coefficient 1 to 1 - alpha = 0.9 and zeroes the
        # chance correlations (< alpha) of independent latents, hence r²/Σr = 0.9
        assert good == pytest.approx(0.9, abs=2e-3)
    else:
        # chance rank correlations (|ρ| ≈ 0.03 on 1,000 points) between independent latents add to each Σ
        assert good.min() > 0.88
    assert bad.max() < 0.75
    assert good.min() > bad.max()


def test_uninformative_latents_are_ignored():
    rng = np.random.default_rng(0)
    # a full 30 × 30 grid: the two factors have exactly zero rank correlation
    factors = np.stack(np.meshgrid(np.arange(30.0), np.arange(30.0)), axis=-1).reshape(-1, 2)
    noise = [rng.normal(size=(900, 1)) for _ in range(2)]
    codes = [np.column_stack([factors, noise[0]]), np.column_stack([factors[:, ::-1], noise[1]])]
    kl = [np.array([1.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.001])]  # the noise latents are collapsed
    assert udr_scores(codes, kl, correlation="spearman") == pytest.approx([1.0, 1.0], abs=1e-12)
    # counted as informative, the unrelated noise latents pull the score down
    assert udr_scores(codes, None, correlation="spearman").max() < 0.9


def test_udr_of_a_lone_model_is_nan_and_kl_formula():
    assert np.isnan(udr_scores([np.zeros((10, 2))])).all()
    mu = np.array([[1.0, 0.0], [1.0, 0.0]])
    logvar = np.array([[0.0, np.log(4.0)], [0.0, np.log(4.0)]])
    np.testing.assert_allclose(gaussian_kl_per_latent(mu, logvar), [0.5, 0.5 * (4 - np.log(4) - 1)])


# --------------------------------------------------------------------------------- from run folders

GRID = 8  # an 8 × 8 grid of one-pixel images: factors x and y


def _dataset(path):
    classes = np.array([[x, y] for x in range(GRID) for y in range(GRID)])
    images = np.zeros((len(classes), GRID, GRID), dtype=np.uint8)
    images[np.arange(len(classes)), classes[:, 1], classes[:, 0]] = 1
    np.savez(path, images=images, factor_classes=classes)


def _linear_model(mixing: np.ndarray) -> VAE:
    """A linear encoder (mlp, no hidden layer) whose means are mixing @ (x, y); log-variance 0."""
    model = VAE.from_backbone("mlp", image_shape=(1, GRID, GRID), latent_dim=2, hidden_sizes=[])
    ys, xs = np.meshgrid(np.arange(GRID), np.arange(GRID), indexing="ij")
    pixel_xy = np.stack([xs.ravel(), ys.ravel()]).astype(np.float32)  # (2, 64): the position of each pixel
    with torch.no_grad():
        model.encoder.head.mean.weight.copy_(torch.from_numpy(mixing.astype(np.float32) @ pixel_xy))
        model.encoder.head.mean.bias.zero_()
        model.encoder.head.logvar.weight.zero_()
        model.encoder.head.logvar.bias.zero_()
    return model


def _write_sweep(folder, data_path):
    rotations = [np.pi / 5, np.pi / 3, -np.pi / 4]
    runs = []
    for beta, seed, mixing in (
        [(1.0, s, m) for s, m in enumerate([np.eye(2), np.array([[0, -1.0], [1, 0]]), np.diag([2.0, 0.5])])]
        + [(4.0, s, np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])) for s, t in enumerate(rotations)]
    ):
        run_id = f"b{beta:g}-s{seed}"
        run = folder / "runs" / run_id
        run.mkdir(parents=True)
        config = {"seed": seed, "data": {"name": "npz", "path": str(data_path)},
                  "model": {"backbone": "mlp", "latent_dim": 2, "hidden_sizes": []},
                  "objective": {"name": "beta_vae", "beta": beta}, "train": {"steps": 0}}
        torch.save({"format": 1, "step": 0, "config": config, "model": _linear_model(mixing).state_dict(),
                    "image_shape": [1, GRID, GRID]}, run / "checkpoint.pt")
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        runs.append({"run_id": run_id, "status": "finished", "seed": seed, "objective.beta": beta,
                     "mig.mig": 0.1 * seed + beta, "sap_score.sap": 0.2 * seed - beta})
    with open(folder / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(runs[0]))
        writer.writeheader()
        writer.writerows(runs)


def test_udr_from_run_folders_into_the_analyses(tmp_path):
    _dataset(tmp_path / "grid.npz")
    _write_sweep(tmp_path / "sweep", tmp_path / "grid.npz")
    result = analyze(tmp_path / "sweep", tmp_path / "report", udr=True, udr_points=500, udr_correlation="spearman",
                     figures=False, progress=False)
    udr = {run_id: v["udr"] for run_id, v in result.udr.items()}
    aligned = [udr[f"b1-s{s}"] for s in range(3)]  # the same axes up to permutation, sign and scale
    rotated = [udr[f"b4-s{s}"] for s in range(3)]  # rotated axes: each seed mixes x and y differently
    # aligned codes are monotone in x and y, so R = [[1, c], [c, 1]] with c = |ρ(x, y)| on the drawn
    # points (the same draw: default_rng(0)), and UDR = (4 · 1/(1 + c)) / 4
    from disentangle.data import build_dataset

    factors = build_dataset({"name": "npz", "path": str(tmp_path / "grid.npz")}).sample_factors(500, np.random.default_rng(0))
    c = abs(spearmanr(factors[:, 0], factors[:, 1]).statistic)
    assert aligned == pytest.approx([1 / (1 + c)] * 3, abs=1e-9)
    assert max(rotated) < min(aligned) - 0.1
    assert all(v["udr_models"] == 3 for v in result.udr.values())
    # the UDR column is analysed as an unsupervised score
    assert "udr.udr" in result.design.unsupervised
    assert "udr.udr" in result.unsupervised_vs_supervised["npz"].rows  # data.name, read from config.yaml
    with open(tmp_path / "report" / "udr.csv", newline="") as f:
        rows = {r["run_id"]: r for r in csv.DictReader(f)}
    assert float(rows["b4-s2"]["udr"]) == pytest.approx(udr["b4-s2"])
    assert rows["b4-s2"]["setting"] == "beta=4"


def test_udr_needs_run_folders(tmp_path):
    _dataset(tmp_path / "grid.npz")
    _write_sweep(tmp_path / "sweep", tmp_path / "grid.npz")
    (tmp_path / "sweep" / "runs" / "b4-s1" / "checkpoint.pt").unlink()
    from disentangle import DisentangleError

    with pytest.raises(DisentangleError, match="no checkpoint.pt.*b4-s1"):
        analyze(tmp_path / "sweep", tmp_path / "report", udr=True, progress=False)
    assert not (tmp_path / "report").exists()


# ------------------------------------------------------------- against disentanglement_lib's algorithm


def _dlib_udr_model_scores(reps, kl, correlation="lasso", kl_filter_threshold=0.01, random_state=0):
    """disentanglement_lib's compute_udr_sklearn on given codes and KLs, re-implemented from udr.py.

    Per model: StandardScaler (zero-variance columns are only centred), multiply by
    ``kl > 0.01``; per ordered pair (i, j), i ≠ j: R = |Lasso(alpha=0.1).fit(rep_i, rep_j).coef_|ᵀ
    (or |Spearman|), keep the rows of i and columns of j with KL above the filter threshold,
    relative_strength_disentanglement; model j's score is the median over i ≠ j of pair (i, j).
    """
    from sklearn.linear_model import Lasso

    def scale(x):
        std = x.std(axis=0)
        return (x - x.mean(axis=0)) / np.where(std == 0, 1.0, std)

    reps = [scale(np.asarray(r, dtype=np.float64)) * np.greater(k, 0.01) for r, k in zip(reps, kl)]
    masks = [np.asarray(k) > kl_filter_threshold for k in kl]
    n = len(reps)
    pair = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if correlation == "lasso":
                corr = np.abs(Lasso(alpha=0.1, random_state=random_state).fit(reps[i], reps[j]).coef_).T
            else:  # a zeroed latent is constant: NaN correlation (scipy warns), filtered out below
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    corr = np.array([[abs(spearmanr(reps[i][:, a], reps[j][:, b]).statistic) for b in range(reps[j].shape[1])]
                                     for a in range(reps[i].shape[1])])
            corr = corr[masks[i], :][:, masks[j]]
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.nanmean(np.nan_to_num(np.max(corr, axis=0) ** 2 / np.sum(corr, axis=0)))
                y = np.nanmean(np.nan_to_num(np.max(corr, axis=1) ** 2 / np.sum(corr, axis=1)))
            pair[i, j] = (x + y) / 2
    return np.array([np.median(np.delete(pair[:, j], j)) for j in range(n)])


def _models_with_faint_inactive_latents(seed=0, n=1000):
    """4 models of 3 factors, 6 latents each. Active latents: the factors permuted, flipped, scaled and
    slightly mixed; inactive ones (KL below 0.01) still track a factor at a scale of 1e-3. One model has
    only 2 active latents, so the models differ in their numbers of informative latents."""
    rng = np.random.default_rng(seed)
    factors = rng.uniform(-1, 1, size=(n, 3))
    codes, kls = [], []
    for m in range(4):
        active = 2 if m == 3 else 3
        perm = rng.permutation(3)
        mix = np.eye(3)[perm] * rng.choice([-1.0, 1.0], 3) * rng.uniform(0.5, 2.0, 3) + 0.25 * rng.normal(size=(3, 3))
        signal = factors @ mix.T + 0.1 * rng.normal(size=(n, 3))
        faint = 1e-3 * factors[:, rng.choice(3, 6 - active)] + 1e-4 * rng.normal(size=(n, 6 - active))
        z = np.column_stack([signal[:, :active], faint])
        kl = np.concatenate([rng.uniform(0.5, 3.0, active), rng.uniform(0.0, 0.005, 6 - active)])
        order = rng.permutation(6)
        codes.append(z[:, order])
        kls.append(kl[order])
    return codes, kls


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dlib_aggregation_equals_disentanglement_libs_udr_with_faint_inactive_latents(seed):
    codes, kls = _models_with_faint_inactive_latents(seed)
    expected = _dlib_udr_model_scores(codes, kls)
    ours = udr_scores(codes, kls, aggregation="dlib")
    np.testing.assert_allclose(ours, expected, atol=1e-6, rtol=0)
    # the case is one where the order matters: fitting the Lasso on all standardised latents and only
    # masking afterwards (the faint latents as unit-variance inputs) gives clearly different scores
    unzeroed = np.array([
        np.median([udr_pair(similarity_matrix(codes[a], codes[b]), kls[a] > 0.01, kls[b] > 0.01, "dlib")
                   for a in range(4) if a != b]) for b in range(4)])
    assert np.abs(unzeroed - expected).max() > 0.01


def test_spearman_dlib_aggregation_equals_disentanglement_libs_udr():
    codes, kls = _models_with_faint_inactive_latents(3, n=400)
    np.testing.assert_allclose(udr_scores(codes, kls, correlation="spearman", aggregation="dlib"),
                               _dlib_udr_model_scores(codes, kls, correlation="spearman"), atol=1e-6, rtol=0)


def test_paper_and_dlib_aggregations_differ_with_different_numbers_of_active_latents():
    codes, kls = _models_with_faint_inactive_latents(0)
    paper, dlib = udr_scores(codes, kls), udr_scores(codes, kls, aggregation="dlib")
    assert np.abs(paper - dlib).max() > 1e-3  # model 3 has 2 informative latents, the others 3
    same = [c for c, k in zip(codes[:3], kls[:3])], kls[:3]  # 3 informative latents each: identical
    np.testing.assert_allclose(udr_scores(*same), udr_scores(*same, aggregation="dlib"), atol=1e-12)


def test_udr_runs_on_a_sample_of_unlabelled_images(tmp_path):
    """UDR needs no labels: models trained on a folder of images (here an unlabelled npz) are scored on
    uniformly drawn images, the same for every model of a configuration."""
    import torch

    from disentangle.models.vae import VAE
    from disentangle.study.udr import udr_from_runs

    images = np.random.default_rng(0).integers(0, 256, (50, 8, 8), dtype=np.uint8)
    np.savez(tmp_path / "photos.npz", images=images)
    data = {"name": "npz", "path": str(tmp_path / "photos.npz")}
    seen = []

    def load(run_dir: str):
        torch.manual_seed(int(run_dir[-1]))
        model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[8])
        model.config = {"data": data}
        encode = model.representation

        def representation(x, *args, **kwargs):
            seen.append(torch.as_tensor(x).clone())
            return encode(x, *args, **kwargs)

        model.representation = representation
        return model

    groups = {"cfg": [("a", "run0"), ("b", "run1"), ("c", "run2")]}
    scores = udr_from_runs(groups, num_points=40, load=load, progress=False)
    assert set(scores) == {"a", "b", "c"} and all(np.isfinite(s["udr"]) for s in scores.values())
    assert len(seen) == 3 and all(torch.equal(seen[0], s) for s in seen)  # one draw for the configuration
    drawn = np.random.default_rng(0).integers(50, size=40)  # uniform indices from the seed
    torch.testing.assert_close(seen[0], torch.as_tensor(images[drawn, None]).float() / 255)


def test_a_gans_codes_all_count_not_its_q_means_square():
    """A GAN's Q has logvar 0: its "KL" would be half the mean square of its means (0.0001 for codes near
    zero, below the 0.01 threshold), dropping codes its generator uses. Every code counts (no KL)."""
    import types

    from disentangle.study.udr import encode_for_udr

    means = torch.tensor([[0.01, 0.9], [-0.01, -0.9], [0.012, 0.5]])

    def encode(x):
        return means[: len(x)], torch.zeros(len(x), 2)

    gan = types.SimpleNamespace(decoder=types.SimpleNamespace(code_prior="uniform"), encode=encode,
                                device=torch.device("cpu"), representation=lambda x: means[: len(x)])
    codes, kl = encode_for_udr(gan, torch.zeros(3, 1, 4, 4))
    assert kl is None and np.array_equal(codes, means.numpy())
    vae = types.SimpleNamespace(decoder=types.SimpleNamespace(), encode=encode, device=torch.device("cpu"),
                                representation=gan.representation)
    _, kl = encode_for_udr(vae, torch.zeros(3, 1, 4, 4))
    assert kl is not None and kl[0] < 0.01 < kl[1]
