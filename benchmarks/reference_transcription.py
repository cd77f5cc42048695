"""disentanglement_lib's metric algorithms transcribed loop for loop, to compare values and times.

Run::

    python benchmarks/reference_transcription.py --data factors            # all six, ~7 min
    python benchmarks/reference_transcription.py --data sprites --metrics mig,sap

This is *not* part of the library. It follows the reference implementation's structure on purpose
(per-pair Python loops, ``mutual_info_score`` per pair, one ``GradientBoostingClassifier`` per
factor, representation called on batches of 16 as in the reference's ``generate_batch_factor_code``)
so that its wall times stand for the reference's, measured on this machine with the same data and
representation as ``bench_metrics.py``. Codes and factors are stored transposed ``(dims, n)`` as in
the reference. The only changes: a ``numpy.random.Generator`` instead of ``RandomState``, and the
scikit-learn API of today (``LogisticRegression()`` defaults are now lbfgs / multinomial).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg
import scipy.stats
import sklearn.metrics
from sklearn import svm
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import MultiLabelBinarizer


class Adapter:
    """ground_truth_data over our dataset + representation function returning numpy."""

    def __init__(self, ds):
        self.ds = ds
        self.num_factors = len(ds.factor_sizes)

    def sample_factors(self, n, rs):
        return self.ds.sample_factors(n, rs)

    def sample_observations_from_factors(self, f, rs):
        return self.ds.sample_observations_from_factors(f, rs)

    def sample(self, n, rs):
        f = self.sample_factors(n, rs)
        return f, self.sample_observations_from_factors(f, rs)

    def sample_observations(self, n, rs):
        return self.sample(n, rs)[1]


def generate_batch_factor_code(gt, rep, num_points, rs, batch_size):
    reps, facs = None, None
    i = 0
    while i < num_points:
        m = min(num_points - i, batch_size)
        f, o = gt.sample(m, rs)
        if i == 0:
            facs, reps = f, rep(o)
        else:
            facs = np.vstack((facs, f))
            reps = np.vstack((reps, rep(o)))
        i += m
    return np.transpose(reps), np.transpose(facs)


def discrete_mutual_info(mus, ys):
    m = np.zeros([mus.shape[0], ys.shape[0]])
    for i in range(mus.shape[0]):
        for j in range(ys.shape[0]):
            m[i, j] = sklearn.metrics.mutual_info_score(ys[j, :], mus[i, :])
    return m


def discrete_entropy(ys):
    return np.array([sklearn.metrics.mutual_info_score(ys[j], ys[j]) for j in range(ys.shape[0])])


def histogram_discretize(target, num_bins=20):
    d = np.zeros_like(target)
    for i in range(target.shape[0]):
        d[i, :] = np.digitize(target[i, :], np.histogram(target[i, :], num_bins)[1][:-1])
    return d


def mig_from(mus, ys):
    m = discrete_mutual_info(histogram_discretize(mus), ys)
    h = discrete_entropy(ys)
    s = np.sort(m, axis=0)[::-1]
    return np.mean((s[0] - s[1]) / h)


def mig(gt, rep, rs, num_train=10000, batch_size=16):
    mus, ys = generate_batch_factor_code(gt, rep, num_train, rs, batch_size)
    return mig_from(mus, ys)


def modularity(mi):
    sq = np.square(mi)
    mx = np.max(sq, axis=1)
    num = np.sum(sq, axis=1) - mx
    den = mx * (sq.shape[1] - 1.0)
    s = 1.0 - num / den
    s[mx == 0.0] = 0.0
    return np.mean(s)


def normalize_data(data, mean=None, std=None):
    if mean is None:
        mean = np.mean(data, axis=1)
    if std is None:
        std = np.std(data, axis=1)
    return (data - mean[:, None]) / std[:, None], mean, std


def explicitness_per_factor(mus_train, y_train, mus_test, y_test):
    clf = LogisticRegression().fit(mus_train.T, y_train)
    mlb = MultiLabelBinarizer()
    a = roc_auc_score(mlb.fit_transform(np.expand_dims(y_train, 1)), clf.predict_proba(mus_train.T))
    b = roc_auc_score(mlb.fit_transform(np.expand_dims(y_test, 1)), clf.predict_proba(mus_test.T))
    return a, b


def modularity_explicitness_from(mus_train, ys_train, mus_test, ys_test):
    mi = discrete_mutual_info(histogram_discretize(mus_train), ys_train)
    tr, te = [], []
    a, m, s = normalize_data(mus_train)
    b, _, _ = normalize_data(mus_test, m, s)
    for i in range(ys_train.shape[0]):
        x, y = explicitness_per_factor(a, ys_train[i], b, ys_test[i])
        tr.append(x)
        te.append(y)
    return dict(modularity=modularity(mi), explicitness_train=np.mean(tr), explicitness_test=np.mean(te))


def modularity_explicitness(gt, rep, rs, num_train=10000, num_test=5000, batch_size=16):
    mus_train, ys_train = generate_batch_factor_code(gt, rep, num_train, rs, batch_size)
    mus_test, ys_test = generate_batch_factor_code(gt, rep, num_test, rs, batch_size)
    return modularity_explicitness_from(mus_train, ys_train, mus_test, ys_test)


def dci_from(x_train, y_train, x_test, y_test, random_state=None):
    K, d = y_train.shape[0], x_train.shape[0]
    R = np.zeros([d, K])
    tr = []
    te = []
    for i in range(K):
        model = GradientBoostingClassifier(random_state=random_state)
        model.fit(x_train.T, y_train[i, :])
        R[:, i] = np.abs(model.feature_importances_)
        tr.append(np.mean(model.predict(x_train.T) == y_train[i, :]))
        te.append(np.mean(model.predict(x_test.T) == y_test[i, :]))
    dpc = 1.0 - scipy.stats.entropy(R.T + 1e-11, base=R.shape[1])
    ci = R.sum(axis=1) / R.sum()
    cpf = 1.0 - scipy.stats.entropy(R + 1e-11, base=R.shape[0])
    fi = R.sum(axis=0) / R.sum()
    return dict(
        disentanglement=np.sum(dpc * ci),
        completeness=np.sum(cpf * fi),
        informativeness_train=np.mean(tr),
        informativeness_test=np.mean(te),
    ), R


def dci(gt, rep, rs, num_train=10000, num_test=5000, batch_size=16):
    a, b = generate_batch_factor_code(gt, rep, num_train, rs, batch_size)
    c, d = generate_batch_factor_code(gt, rep, num_test, rs, batch_size)
    return dci_from(a, b, c, d)[0]


def sap_matrix(mus, ys, mus_test, ys_test, random_state=None):
    S = np.zeros([mus.shape[0], ys.shape[0]])
    for i in range(mus.shape[0]):
        for j in range(ys.shape[0]):
            clf = svm.LinearSVC(C=0.01, class_weight="balanced", random_state=random_state)
            clf.fit(mus[i, :, None], ys[j])
            S[i, j] = np.mean(clf.predict(mus_test[i, :, None]) == ys_test[j])
    return S


def sap_from(mus, ys, mus_test, ys_test, random_state=None):
    S = sap_matrix(mus, ys, mus_test, ys_test, random_state)
    s = np.sort(S, axis=0)
    return np.mean(s[-1] - s[-2])


def sap(gt, rep, rs, num_train=10000, num_test=5000, batch_size=16):
    a, b = generate_batch_factor_code(gt, rep, num_train, rs, batch_size)
    c, d = generate_batch_factor_code(gt, rep, num_test, rs, batch_size)
    return sap_from(a, b, c, d)


def unsupervised_from(mus):
    cov = np.cov(mus)
    tc = 0.5 * (np.sum(np.log(np.diag(cov))) - np.linalg.slogdet(cov)[1])
    sq = scipy.linalg.sqrtm(cov * np.expand_dims(np.diag(cov), axis=1))
    w = 2 * np.trace(cov) - 2 * np.trace(sq)
    disc = histogram_discretize(mus)
    m = discrete_mutual_info(disc, disc)
    np.fill_diagonal(m, 0)
    d = mus.shape[0]
    return dict(
        gaussian_total_correlation=tc,
        gaussian_wasserstein_correlation=np.real(w),
        gaussian_wasserstein_correlation_norm=np.real(w) / np.trace(cov),
        mutual_info_score=m.sum() / (d * d - d),
    )


def beta_vae(gt, rep, rs, batch_size=64, num_train=10000, num_eval=5000):
    def sample(n):
        labels = np.zeros(n, dtype=np.int64)
        pts = None
        for i in range(n):
            idx = rs.integers(gt.num_factors)
            f1 = gt.sample_factors(batch_size, rs)
            f2 = gt.sample_factors(batch_size, rs)
            f2[:, idx] = f1[:, idx]
            r1 = rep(gt.sample_observations_from_factors(f1, rs))
            r2 = rep(gt.sample_observations_from_factors(f2, rs))
            fv = np.mean(np.abs(r1 - r2), axis=0)
            if pts is None:
                pts = np.zeros((n, fv.shape[0]))
            pts[i] = fv
            labels[i] = idx
        return pts, labels

    x, y = sample(num_train)
    model = LogisticRegression().fit(x, y)
    tr = np.mean(model.predict(x) == y)
    xe, ye = sample(num_eval)
    return dict(train_accuracy=tr, eval_accuracy=model.score(xe, ye))


def factor_vae(gt, rep, rs, batch_size=64, num_train=10000, num_eval=5000, num_var=10000, thr=0.05):
    obs = gt.sample_observations(num_var, rs)
    gv = np.var(rep(obs), axis=0, ddof=1)
    active = np.sqrt(gv) >= thr
    if not active.any():
        return dict(train_accuracy=0.0, eval_accuracy=0.0, num_active_dims=0)

    def votes(n):
        v = np.zeros((gt.num_factors, gv.shape[0]), dtype=np.int64)
        for _ in range(n):
            k = rs.integers(gt.num_factors)
            f = gt.sample_factors(batch_size, rs)
            f[:, k] = f[0, k]
            r = rep(gt.sample_observations_from_factors(f, rs))
            lv = np.var(r, axis=0, ddof=1)
            v[k, np.argmin(lv[active] / gv[active])] += 1
        return v

    tv = votes(num_train)
    cl = np.argmax(tv, axis=0)
    oi = np.arange(tv.shape[1])
    tr = np.sum(tv[cl, oi]) / np.sum(tv)
    ev = votes(num_eval)
    return dict(
        train_accuracy=tr, eval_accuracy=np.sum(ev[cl, oi]) / np.sum(ev), num_active_dims=int(active.sum())
    )


METRICS = {
    "beta_vae_score": beta_vae,
    "factor_vae_score": factor_vae,
    "mig": mig,
    "modularity_explicitness": modularity_explicitness,
    "dci": dci,
    "sap_score": sap,
}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_metrics import build

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", choices=("sprites", "factors"), default="factors")
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated names")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    dataset, representation, description = build(args.data)
    gt = Adapter(dataset)

    def rep(x):
        return np.asarray(representation(x), dtype=np.float64)

    print(f"data: {description}; load average {os.getloadavg()[0]:.1f}")
    total = 0.0
    for name in [n.strip() for n in args.metrics.split(",") if n.strip()]:
        rs = np.random.default_rng(args.seed)
        start = time.perf_counter()
        out = METRICS[name](gt, rep, rs)
        seconds = time.perf_counter() - start
        total += seconds
        scores = out if isinstance(out, dict) else {name: out}
        shown = ", ".join(f"{k}={float(v):.4f}" for k, v in scores.items())
        print(f"{name:<26}{seconds:8.1f}s   {shown}", flush=True)
    print(f"{'total':<26}{total:8.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
