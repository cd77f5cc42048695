"""DrNet (Denton & Birodkar 2017): content from one frame, pose from another, a similarity loss on
the content and a scene discriminator that the pose must fool.

Denton & Birodkar, "Unsupervised Learning of Disentangled Representations from Video", NeurIPS (NIPS)
2017; reference code ``edenton/drnet`` (Lua Torch, ``train_drnet.lua``), whose choices are quoted below.

Here a "video" is a group of ``N = group_size`` images of one class (they share the class factors,
e.g. the shape, and the other factors vary), and its "frames" are the group's members. DrNet's
**content** ``h_c`` (what a video keeps) is *our class code*, the posterior means of the last
``C = class_dim`` latent dimensions; DrNet's **pose** ``h_p`` (what changes from frame to frame) is
*our content code*, the means of the first ``D − C`` (:mod:`disentangle.objectives.class_content`:
the family calls the shared part "class code" whatever the paper's name). Both are deterministic, as
in the paper. The paper has two encoders ``E_c`` and ``E_p``; here the model's one encoder gives both
codes (the two halves of its posterior mean), and the decoder is ``model.decode([h_p, h_c])``.
``model.encode`` / ``model.representation`` therefore give ``[pose, content]``, and
:func:`~disentangle.objectives.class_content.class_content_codes` returns them as
``(content, class)``.

With member ``i``'s *partner* ``p(i)`` the next member of its group (cyclically; the other one for
``N = 2``) playing the paper's frame ``t`` and ``i`` its frame ``t + k``, ``x̂ = sigmoid(decode(·))``,
``sg`` a stop-gradient, ``P`` the number of pixel values of an image (channels × height × width) and
``B`` the batch's images::

    recon       = (1/B) Σ_i ℓ(x_i | h_p(x_i), h_c(x_p(i)))              content of another frame, own pose
    similarity  = (1/(B·C)) Σ_i ‖n(h_c)(x_p(i)) − sg n(h_c)(x_i)‖²      mean squared difference
    adversarial = (1/B) Σ_i BCE(S(sg h_p(x_p(i)), h_p(x_i)), ½)          the pose encoder's loss
    loss = recon + P · (α · similarity + β · adversarial)

``ℓ`` is the reconstruction negative log-likelihood summed over pixels
(:func:`~disentangle.objectives.losses.reconstruction_loss`; ``gaussian``, the squared error, is the
paper's L2). The paper's loss is ``L_rec + α L_sim + β L_adv`` with the reference code's
``MSECriterion`` means over pixels and code dimensions; multiplying it through by ``P`` keeps
``recon`` a sum over pixels, as for every objective here, and ``α``, ``β`` the paper's. As in the
reference code, the similarity's target ``h_c(x_i)`` (the frame being reconstructed) and the scene
discriminator's first pose are detached; the adversarial term is computed on pairs from one video
only, and its minimum is ``log 2`` (the discriminator unsure).

The **scene discriminator** ``S(h_p1, h_p2)`` (owned by the objective, optimizer
``"discriminator"``) is the reference's MLP on the two concatenated pose codes: ``2(D − C)`` → 100
→ 100 → 1 logit, ReLU. It is trained with BCE on detached poses to tell pairs of one video from
pairs of two::

    discriminator_loss = ½ (1/B) Σ_i [BCE(S(h_p(x_p(i)), h_p(x_i)), 1) + BCE(S(h_p(x_j(i)), h_p(x_i)), 0)]

with ``x_j(i)`` an image of **another class**, drawn uniformly among the batch's (in a multi-process
run, the whole batch's; :func:`~disentangle.objectives.mathieu2016.other_class_rows`). The reference
code pairs each video with a random other video; two groups of one class share everything a group
shares (the class factors alone), so a pair from them is not a "different scene" here and the
negatives come from other classes. A row whose class is the batch's only one is paired with the same
member of the next group instead. A pose code that carries the class lets ``S`` tell the pairs apart;
the pose encoder's adversarial term (target ½) removes it.

One step (:meth:`DrNet.train_step`): (1) the model's phase minimises ``loss`` with optimizer
``"model"``, ``S`` frozen; (2) ``S``'s phase minimises ``discriminator_loss`` on the poses of phase 1,
detached, with ``"discriminator"``. (The reference code updates ``S`` first and then the networks, on
the same batch; this order, the usual alternation, lags ``S`` by one step.)

The reference encoders end in batch normalisation and ``tanh`` (with an optional unit-norm
``--normalize``, off by default); the codes here are the encoder's posterior means unchanged, so that
the decoder sees exactly what ``model.encode`` gives (the metrics, traversals and pictures use those).
On these raw codes the similarity has a trivial minimum, every class code shrunk to one constant,
which the decoder can undo by growing its weights; the reference's batch normalisation rules it out.
``similarity_normalization: batch`` makes the similarity read ``n(h_c)``, the class codes
standardised per dimension over the batch as batch normalisation does in training
(``(h − mean) / sqrt(var + 1e-5)``, biased variance, no affine; a process's own rows in a
multi-process run), so that the codes' scale no longer pays. It is not the default (``n`` is the
identity): on conv64 sprites runs, where the two codes share one encoder trunk, the standardised
term kept the reconstruction at the blank image's for the first 600–2,000 steps, while the raw one
learnt (recon 125 at step 800, against about 230 for a β-VAE of the same network). On small MLPs
``batch`` separates better (the planted test: leakage 0.00 on three seeds against 0.07–0.86 raw).
The reference code trains every network with one Adam (lr 0.002, and Adam's default betas, its
``beta=`` key being ignored); here the run's optimizer serves the model and, by default, ``S``.

Parameters (config keys)
------------------------
``class_factors``, ``class_dim``, ``group_size``
    The class and the split (:class:`~disentangle.objectives.class_content.ClassContentObjective`);
    ``group_size`` default 2 (the paper's two frames ``t`` and ``t + k``).
``similarity_weight``
    ``α``, default 1 (the reference code adds the similarity's gradient to the reconstruction's with
    weight 1).
``similarity_normalization``
    ``"none"`` (default: ``n`` the identity, the raw codes) or ``"batch"`` (``n`` standardises the
    class codes over the batch, the reference's batch normalisation).
``adversarial_weight``
    ``β``, default 0.1: our choice (the reference code's ``--advWeight`` defaults to 0 and is set per
    run; the paper's per-dataset value was not checked here).
``discriminator_hidden``, ``discriminator_layers``
    ``S``'s width and hidden layers; defaults 100 and 2 (the reference's ``makeSceneDiscriminator``).
``discriminator_lr``, ``discriminator_betas``
    ``S``'s optimizer; default ``null``: the run's ``train.lr`` and ``train.betas``.
``reconstruction``
    ``"gaussian"`` (default: the paper's L2) or ``"bernoulli"``.

Terms: ``loss``, ``recon``, ``similarity``, ``adversarial`` (the pose encoder's BCE against ½), and
from ``S``'s phase ``discriminator_loss`` and ``discriminator_accuracy`` (the fraction of the ``2B``
pairs that ``S`` classifies correctly, a logit > 0 meaning "one video").
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F

from .._core import checks, distributed
from ..data.classes import ClassBatch
from . import OBJECTIVES
from .base import detached, model_then_discriminator
from .class_content import ClassContentObjective
from .discriminator import MLPDiscriminator, frozen
from .losses import Reconstruction, check_reconstruction, reconstruction_loss
from .mathieu2016 import group_partners, other_class_rows

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision


SimilarityNormalization = Literal["batch", "none"]
#: batch normalisation's epsilon (torch's default)
BATCH_NORM_EPS = 1e-5


def batch_standardized(codes: torch.Tensor, eps: float = BATCH_NORM_EPS) -> torch.Tensor:
    """``(codes − mean) / sqrt(var + eps)`` per column over the rows (biased variance): batch
    normalisation in training mode, without its affine."""
    mean = codes.mean(0, keepdim=True)
    var = codes.var(0, unbiased=False, keepdim=True)
    return (codes - mean) / torch.sqrt(var + eps)


@OBJECTIVES.register("drnet")
class DrNet(ClassContentObjective):
    """DrNet (Denton & Birodkar 2017): an image from its pose and its partner's class code, a similarity
    loss on class codes, and a scene discriminator on pose pairs (module docstring: codes, loss, scene
    discriminator, parameters, terms)."""

    def __init__(
        self,
        class_factors: list[str | int] | str | int | None = None,
        class_dim: int | None = None,
        group_size: int = 2,
        similarity_weight: float = 1.0,
        adversarial_weight: float = 0.1,
        discriminator_hidden: int = 100,
        discriminator_layers: int = 2,
        discriminator_lr: float | None = None,
        discriminator_betas: tuple[float, float] | None = None,
        reconstruction: Reconstruction = "gaussian",
        similarity_normalization: SimilarityNormalization = "none",
    ) -> None:
        super().__init__(class_factors=class_factors, class_dim=class_dim, group_size=group_size)
        self.similarity_weight = checks.non_negative("similarity_weight", similarity_weight)
        self.similarity_normalization = checks.choice(
            "similarity_normalization", similarity_normalization, ["batch", "none"]
        )
        self.adversarial_weight = checks.non_negative("adversarial_weight", adversarial_weight)
        self.discriminator_hidden = checks.positive_int("discriminator_hidden", discriminator_hidden)
        self.discriminator_layers = checks.positive_int("discriminator_layers", discriminator_layers)
        self.discriminator_lr = None if discriminator_lr is None else checks.positive("discriminator_lr", discriminator_lr)
        self.discriminator_betas = (
            None if discriminator_betas is None else checks.adam_betas("discriminator_betas", discriminator_betas)
        )
        self.reconstruction = check_reconstruction(reconstruction)
        self.discriminator: MLPDiscriminator | None = None

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        in_features = 2 * (self.latent_dim - self.class_dim)
        if self.discriminator is None or self.discriminator.in_features != in_features:
            self.discriminator = MLPDiscriminator(
                in_features, self.discriminator_hidden, self.discriminator_layers, out_features=1, activation="relu"
            )
        self.discriminator.to(next(model.parameters()).device)

    def _require_discriminator(self) -> MLPDiscriminator:
        if self.discriminator is None or self.class_dim is None:
            raise RuntimeError("DrNet needs setup(model=..., dataset_size=...) before use (it builds the scene discriminator there).")
        return self.discriminator

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        return {
            "discriminator": make_optimizer(
                self._require_discriminator().parameters(), lr=self.discriminator_lr,
                betas=self.discriminator_betas, weight_decay=0.0,
            )
        }

    def scene_logits(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        """``S``'s logits ``(b,)`` of the pose pairs ``(first_i, second_i)``."""
        return self._require_discriminator()(torch.cat([first, second], dim=1)).squeeze(1).float()

    # ------------------------------------------------------------------ losses
    def model_terms(self, model, batch: ClassBatch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The model phase's terms and the pose codes (with their graph)."""
        disc = self._require_discriminator()
        x = batch.x
        mu, _ = model.encode(x)
        pose, content = self.split(mu.float())  # DrNet's pose = our content code; its content = our class code
        partner = group_partners(x.shape[0], self.group_size, x.device)
        logits = model.decode(torch.cat([pose, content[partner]], 1))
        recon = reconstruction_loss(logits, x, self.reconstruction)
        codes = batch_standardized(content) if self.similarity_normalization == "batch" else content
        similarity = (codes[partner] - codes.detach()).square().mean()
        with frozen(disc):  # the pose encoder's loss never moves S
            scene = self.scene_logits(pose[partner].detach(), pose)
        adversarial = F.binary_cross_entropy_with_logits(scene, torch.full_like(scene, 0.5))
        pixels = x[0].numel()
        loss = recon + pixels * (self.similarity_weight * similarity + self.adversarial_weight * adversarial)
        return {"loss": loss, "recon": recon, "similarity": similarity, "adversarial": adversarial}, pose

    def discriminator_terms(self, pose: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """``S``'s loss and accuracy: pairs of one group (target 1) and pairs with an image of another
        class (target 0, :func:`other_class_rows`; the next group's member where the batch has one
        class). ``pose`` is detached here, whatever the caller passes."""
        pose = pose.detach()
        b = pose.shape[0]
        partner = group_partners(b, self.group_size, pose.device)
        everyone = distributed.gather_detached(pose)
        total = everyone.shape[0]
        index, has_other = other_class_rows(labels)
        mine = torch.arange(total, device=pose.device)[distributed.local_rows(total)]
        next_group = (mine + self.group_size) % total
        negatives = everyone[torch.where(has_other, index, next_group)]
        same = self.scene_logits(pose[partner], pose)
        different = self.scene_logits(negatives, pose)
        loss = 0.5 * (
            F.binary_cross_entropy_with_logits(same, torch.ones_like(same))
            + F.binary_cross_entropy_with_logits(different, torch.zeros_like(different))
        )
        accuracy = 0.5 * ((same > 0).float().mean() + (different <= 0).float().mean())
        return {"discriminator_loss": loss, "discriminator_accuracy": accuracy}

    def forward(self, model, x: ClassBatch, *, step: int) -> dict[str, torch.Tensor]:
        batch = self.check_batch(x, "drnet")
        terms, pose = self.model_terms(model, batch)
        with torch.no_grad():
            d_terms = self.discriminator_terms(pose, batch.labels)
        return {**terms, **detached(d_terms)}

    # ------------------------------------------------------------------ training
    def train_step(
        self,
        model,
        x: ClassBatch,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        batch = self.check_batch(x, "drnet")
        return model_then_discriminator(
            precision, optimizers, lambda: self.model_terms(model, batch),
            lambda pose: self.discriminator_terms(pose, batch.labels),
        )
