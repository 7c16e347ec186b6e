"""grn: the Generative Regression Network of Luo et al. (ICDE 2021, "Feature Inference Attack on Model Predictions in
Vertical Federated Learning"), faithful to the authors' code (xinjianluo/featureinference-vfl ``GRNA/``;
ANCHORS-FEATURES.md §2 A1).

Threat model: the active party after training, holding its own features, its bottom and the top model, observing
the federated model's output for each target (``observe``: ``logits``, ``probs`` (the paper's confidence scores, the
default), or ``rounded``: probabilities rounded to ``precision`` decimals, Luo's confidence-rounding setting). It
computes those outputs itself from the embeddings it received, as the model does. The victim's bottom is a surrogate
fitted on the known pairs (``surrogate.py``; Luo assumes it white-box, which no role has here).

Algorithm (``GeneratorTrainer``): a generator G (MLP: own features + N(0, I) noise of the victim's width -> 600 ->
LayerNorm -> ReLU -> 200 -> LN -> ReLU -> 100 -> LN -> ReLU -> victim width -> Sigmoid; ``EnableAttackerFeatures``)
is trained with everything else frozen to minimise, per batch,

    sum over batch and classes of (g(f_a(x_a), f_b(G(x_a, z))) - y)^2  +  0.25 * sum_j Var_batch(G(x_a, z)_j)
    [+ 1.2 * sum_j (mean_batch G_j - mu_j)^2  with ``known_mean``: mu the known samples' mean (Luo's
    EnableKnownMeanConstraint, KnownMeanLambda)]

Luo's variance term is per feature over the batch, weight 0.25 (``UnknownVarLambda``), not VFLAIR's per-sample variance
across features (weight 0.0625). Adam lr 1e-4, 60 epochs, batch 64 (Luo's config.ini). ``mode``: ``transductive``
(Luo, SecretFlow: fitted on every sample whose output it observed, the targets included, as it attacks them) or
``inductive`` (VFLAIR: fitted on the training samples, applied to the test samples).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field

from vflpriv.attacks.features.base import FeatureAttack, FeatureOptions, FeatureView, Reconstruction
from vflpriv.attacks.features.decoders import MLPDecoder
from vflpriv.attacks.features.surrogate import fit_surrogate
from vflpriv.engine import EMBEDDING
from vflpriv.models.encoders import init_parameters
from vflpriv.models.training import apply_in_batches, index_batches, make_optimizer, require_finite


class GRNOptions(FeatureOptions):
    observe: Literal["logits", "probs", "rounded"] = Field(
        "probs", description="the model output observed per target: logits, probabilities, or rounded probabilities")
    precision: int = Field(1, ge=0, le=8, description="decimals of the rounded probabilities (Luo: 1)")
    variance_weight: float = Field(0.25, ge=0, description="weight of the per-feature batch variance (Luo: 0.25)")
    known_mean: bool = Field(False, description="add Luo's known-mean term (the known samples' mean, weight 1.2)")
    mean_weight: float = Field(1.2, ge=0, description="weight of the known-mean term (Luo: 1.2)")
    mode: Literal["transductive", "inductive"] = Field(
        "transductive", description="fit on every observed sample (Luo) or on the training samples only (VFLAIR)")
    epochs: int = Field(60, ge=1, description="generator training epochs (Luo: 60)")
    lr: float = Field(1e-4, gt=0, description="Adam learning rate (Luo: 1e-4)")
    batch_size: int = Field(64, ge=2, description="Luo: 64")
    surrogate_epochs: int = Field(100, ge=1, description="training epochs of the surrogate bottom")
    surrogate_lr: float = Field(1e-3, gt=0)
    read_only_with: ClassVar[dict[str, tuple[str, tuple]]] = {"precision": ("observe", ("rounded",)),
                                                              "mean_weight": ("known_mean", (True,))}


class GenerativeRegression(FeatureAttack):
    """A generator trained so that the model's output on its guesses matches the output observed."""

    Options = GRNOptions
    roles: ClassVar[frozenset[str]] = frozenset({"active"})
    observes: ClassVar[tuple[str, ...]] = (EMBEDDING,)
    anchor: ClassVar[str] = ("xinjianluo/featureinference-vfl GRNA/utils/Trainers.py (GeneratorTrainer); SecretFlow "
                             "fia_torch.py; VFLAIR GenerativeRegressionNetwork.py")
    search_space: ClassVar[dict[str, tuple]] = {"lr": (1e-4, 1e-3), "variance_weight": (0.0, 0.25)}
    budget_option: ClassVar[str] = "epochs"
    audit_options: ClassVar[dict] = {"epochs": 5, "surrogate_epochs": 30}

    def incompatible(self, run, *, num_classes: int) -> str:
        if run.attack.phase != "finetune":
            return "grn observes the trained model's outputs: attack the finetune phase"
        if run.partition.parties != 2:
            return (f"grn computes the model's outputs from the active party's and one passive party's embeddings; "
                    f"with {run.partition.parties} parties it would need every party's (use 2 parties, as Luo and "
                    "VFLAIR do)")
        return ""

    def _observed(self, view: FeatureView, own: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """What the adversary observes of the model's output for samples with ``own`` features and received ``rows``."""
        return self._output(view, own, rows).detach()

    def _output(self, view: FeatureView, own: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        bottom, top = view.models["bottom"], view.models["top"]
        logits = top([bottom(own), rows])
        o = self.options
        if o.observe == "logits":
            return logits
        probs = logits.softmax(1)
        return probs if o.observe == "probs" else torch.round(probs, decimals=o.precision)

    def infer(self, view: FeatureView) -> dict[str, Reconstruction]:
        o = self.options
        if "top" not in view.models:
            raise ValueError("grn needs the active party's own bottom and top (the finetuned model)")
        surrogate = fit_surrogate(view, epochs=o.surrogate_epochs, lr=o.surrogate_lr, batch_size=64)
        fit_on = ["aux", *view.targets] if o.mode == "transductive" else ["aux", *(t for t in view.targets if t != "test")]
        own = {name: view.own[name] for name in ("aux", *view.targets)}
        with torch.no_grad():
            observed = {name: self._observed(view, own[name], view.received[name].flatten(1)) for name in own}
        width = view.aux_victim[0].numel()
        in_dim = own["aux"][0].numel() + width
        g = view.generator
        generator = init_parameters(MLPDecoder(in_dim, view.victim_spec.shape), generator=g).to(view.device)
        x_own = torch.cat([own[n].flatten(1) for n in fit_on])
        y = torch.cat([observed[n] for n in fit_on])
        mu = view.aux_victim.flatten(1).mean(0)
        opt = make_optimizer(generator.parameters(), name="adam", lr=o.lr, weight_decay=0.0)
        finite = torch.ones((), dtype=torch.bool, device=view.device)
        generator.train()
        for _ in range(o.epochs):
            for batch in index_batches(torch.arange(x_own.shape[0], device=view.device), batch_size=o.batch_size,
                                       generator=g):
                z = torch.randn(batch.numel(), width, generator=g, device=g.device).to(view.device)
                guess = generator(torch.cat([x_own[batch], z], 1))
                loss = (self._output_own(view, x_own[batch], surrogate(guess)) - y[batch]).pow(2).sum()
                flat = guess.flatten(1)
                loss = loss + o.variance_weight * flat.var(0).sum()  # torch.var: unbiased, as Luo's code
                if o.known_mean:
                    loss = loss + o.mean_weight * (flat.mean(0) - mu).pow(2).sum()
                finite &= torch.isfinite(loss)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        require_finite(finite, "grn's generator loss")
        out = {}
        for name in view.targets:
            z = torch.randn(own[name].shape[0], width, generator=g, device=g.device).to(view.device)
            out[name] = Reconstruction(apply_in_batches(generator, torch.cat([own[name].flatten(1), z], 1)))
        return out

    def _output_own(self, view: FeatureView, own_flat: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """The model's output with the adversary's own features given flattened (the bottom takes its own shape)."""
        shape = view.spec.shape
        return self._output(view, own_flat.reshape(-1, *shape), rows)
