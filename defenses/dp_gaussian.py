"""Label-DP for everything the passive parties see: DP-SGD on the active party's whole label-dependent computation
(Abadi et al. 2016's mechanism, applied to the labels of split learning), with Opacus' RDP accountant.

What it does, per update of the active party (every exchange, and every FedBCD local update): it computes each
sample's gradient of its own cross-entropy with respect to everything the label reaches, its top's and its bottom's
parameters and the embeddings it received, clips that joint vector to L2 norm C, and adds N(0, sigma^2 C^2) noise to
each coordinate of (a) the sum over the batch of the parameter gradients (its update: the noisy sum over the batch
size, as in DP-SGD) and (b) every row of every gradient message it sends (sample i's row: its clipped gradient plus
noise, over the batch size). Strength: the noise multiplier sigma (higher is stronger); 0 is the identity (no
clipping either), bit for bit.

The argument (written for the README too):

- Neighbouring relation: two training sets that differ in one sample's label (label DP); features, alignment and
  batches are the same (they hold no label), and so are the training set as the loader split it and the partition's
  sets (which samples are labeled, the adversary's auxiliary ones, the canaries, the ``finetune.validation``
  hold-out): public, drawn from the seed before any training. They are not all drawn independently of the labels
  (review fe F1's label twin): the loaders' train/test splits are stratified by label, and with
  ``partition.aux_source=labeled`` the auxiliary samples are drawn per class among the labeled ones and the canaries
  and the validation samples among those left, so there one label can change which samples are canaries or trained
  on; with ``partition.active_labels_local`` (VFLHLP's default) and the unaligned samples shared (the default), the
  default auxiliary samples are the active party's own local ones, whose labels it trains with, drawn per class, so
  there one trained label can change which trained samples the adversary knows (review fe2 R4). The epsilon (this
  one, label-dp's and alibi's) bounds what the training reveals of the labels given those sets, not what their draw
  reveals.
- Sensitivity: a sample's label enters one update only through its own loss, so it changes only its own clipped
  vector, by at most 2C in L2 (both versions have norm <= C): the sample's rows of the messages and its share of the
  noisy sum. The top has no layer coupling samples (Linear, MLP or sum); BatchNorm in a bottom couples samples through
  their features only, never through labels. Each update is therefore a Gaussian mechanism of sensitivity 2C with
  noise sigma C: noise multiplier sigma / 2.
- Composition: every message the passive parties receive, and every parameter the active party holds, is a function
  of the noisy outputs of earlier updates and of the current one (post-processing, adaptive composition). Batches are
  not Poisson-sampled: each epoch shuffles the labeled samples and every sample is in exactly one batch of it, so no
  amplification by subsampling is claimed: a sample's label is charged for every update that reads it (epochs x
  FedBCD updates per exchange), each at sample rate 1, in Opacus' RDP accountant (``privacy_spent``; counted per
  sample as it really happens, so any loop is charged what it did). epsilon is reported at ``delta``.
- The noise: from the defense's generator, seeded from the run's seed (in every record) for reproducibility: one who
  knows the seed regenerates and strips it, so the bound assumes the adversary does not know the generator's state
  (review fe F3; said in the run's notes); ``options.secure_noise`` seeds it from OS entropy (not reproducible).
- What it covers: the shared finetuning loop's every label use, and nothing else. A method declares every place it
  reads labels outside that loop (``Method.label_uses``: VFLHLP's supervised step 1 that finetuning starts from,
  one-shot and few-shot VFL's gradient, server classifier and probabilities before their end-to-end loop, a plugin's
  own loop); there the labels reach the passive parties around the mechanism, so no epsilon is recorded (the run's
  notes say why), and a run that asks for one (``target_epsilon``) is refused in planning. Why the two: a noise
  multiplier is a mechanism one may still measure (its utility cost, the empirical epsilon of its canaries), and the
  record says plainly that nothing is claimed; a target epsilon asks for the claim itself, which the method cannot
  have, so such a run would deliver nothing that was asked for. A defense that reads the
  labels itself (Marvell: ``reads_labels``) is refused beside it, as is one at another of the active party's points
  (its batch, model, loss or gradient computation), unless a label defense (label-dp, alibi) randomised the labels
  first: then every reader reads the randomised labels, a post-processing of that defense's mechanism, and the run's
  epsilon, the sum of both claims (basic composition), still bounds the whole training (the label defense's alone
  does).

``target_epsilon`` solves for the sigma that spends that epsilon over the run's updates (Opacus'
``get_noise_multiplier`` at sample rate 1). The per-message mechanism it replaces (each gradient row clipped and
noised on the channel, the top training on clean labels) is ``gaussian-message``; it claims no epsilon.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from pydantic import Field
from torch import nn

from vflpriv.common.errors import ConfigError
from vflpriv.defenses.base import StrengthAxis, TrainingDefense
from vflpriv.defenses.noise import NoiseOptions
from vflpriv.engine.hooks import ACTIVE_BACKWARD

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


class GaussianDPOptions(NoiseOptions):
    clip: float = Field(1.0, gt=0, description="C: each sample's joint gradient (parameters and sent rows) is clipped "
                                               "to this L2 norm")
    delta: float = Field(1e-5, gt=0, lt=1, description="delta of the (epsilon, delta) the accountant reports; "
                         "below 1/n for n training rows, else refused (the default suits fewer than 100000 rows)")
    target_epsilon: float | None = Field(
        None, gt=0, description="solve for the noise multiplier that spends this epsilon over the run (instead of a "
        "strength)")


class GaussianDP(TrainingDefense):
    """DP-SGD on the active party's label-dependent computation: per-sample joint clipping to C, noise sigma C on its
    update and on every gradient row it sends; epsilon by Opacus' RDP accountant (label DP), checked with canaries by
    the white-box auditor gradient-lrt (``finetune.auditor``)."""

    Options = GaussianDPOptions
    hook_points = frozenset({ACTIVE_BACKWARD})
    axis = StrengthAxis(name="sigma", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.5, 64.0), log=True)
    #: The claims the audit tests: epsilon 4, 2 and 1, below the cap of its canaries (sigma 0.1, 0.5 and 4 claimed
    #: about 4500, 240 and 12, which no audit of a few hundred canaries can test). The audit solves sigma for them at
    #: the audited run's updates; :attr:`audit_strengths` (a sweep's default) are those sigmas at the default
    #: finetuning (20 epochs, one update per exchange, delta 1e-5).
    audit_epsilons = {"finetune": (4.0, 2.0, 1.0)}
    audit_strengths = {"finetune": (10.37, 19.3, 36.25)}
    anchor = "Abadi et al. 2016 (DP-SGD) on the labels of split learning; Opacus RDP accountant"
    #: 1: the per-message mechanism of 0.1 became DP-SGD on the active party (records of 0.1 do not resume).
    revision = 1

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if why := self.refusal(self.strength, self.options):
            raise ConfigError(f"dp-gaussian: {why}")
        self.sigma = self.strength
        self.uses: torch.Tensor | None = None  # per training row: the updates that read its label

    @property
    def is_identity(self) -> bool:
        return self.strength == self.axis.identity and getattr(self.options, "target_epsilon", None) is None

    @classmethod
    def own_strength_option(cls, options: dict) -> str:
        return "target_epsilon" if options.get("target_epsilon") is not None else ""

    @classmethod
    def refusal(cls, strength: float, options: GaussianDPOptions) -> str:
        """A strength beside ``target_epsilon``: two noise multipliers asked for."""
        if options.target_epsilon is not None and strength != cls.axis.identity:
            return "give a strength (the noise multiplier) or options.target_epsilon, not both"
        return ""

    @classmethod
    def audit_strengths_for(cls, phase: str, *, finetune, options: dict) -> tuple[float, ...] | None:
        """The sigma that spends each of :attr:`audit_epsilons` over a run of ``finetune``'s updates."""
        targets = cls.audit_epsilons.get(phase)
        if targets is None:
            return super().audit_strengths_for(phase, finetune=finetune, options=options)
        delta = cls.Options.model_validate(options).delta
        return tuple(noise_for(target, delta=delta, uses=label_reads(finetune)) for target in targets)

    @classmethod
    def claimed_epsilon(cls, strength: float, *, finetune, options: dict) -> tuple[float, float] | None:
        """What the accountant will charge a label the shared loop reads every update (epochs x local updates)."""
        o = cls.Options.model_validate(options)
        if o.target_epsilon is not None:
            return float(o.target_epsilon), float(o.delta)
        if strength == cls.axis.identity:
            return None
        return spent(strength, delta=o.delta, uses=label_reads(finetune)), float(o.delta)

    @property
    def effective_strength(self) -> float:
        """sigma: given, or solved for ``target_epsilon`` at ``bind``."""
        return self.sigma

    def covers(self, method) -> str:
        """'' where the argument covers ``method``'s every label use (it declares none outside the shared loop), else
        why not."""
        if uses := uses_outside_loop(method):
            return (f"{'; '.join(uses)}: outside dp-gaussian's mechanism (only the shared finetuning loop is private), "
                    "so its epsilon does not bound what the passive parties see")
        return ""

    def requested_claim(self) -> str:
        return "options.target_epsilon" if self.options.target_epsilon is not None else ""

    def bind(self, federation: Federation) -> None:
        """Count label uses from here, and solve sigma for a target epsilon over the run's updates."""
        super().bind(federation)
        self.uses = torch.zeros(federation.active.labels.numel(), dtype=torch.long)
        target = self.options.target_epsilon
        if target is not None:
            self.sigma = noise_for(target, delta=self.options.delta, uses=label_reads(federation.finetune))

    def backpropagates(self) -> bool:
        return not self.is_identity

    def backward(self, losses: torch.Tensor, params: list[nn.Parameter], leaves: dict[int, torch.Tensor],
                 ids: torch.Tensor, *, known: torch.Tensor | None = None) -> list[torch.Tensor | None] | None:
        """The noisy update and rows; with ``known`` (an auditor's rows), also each parameter's clipped sum over
        them (:func:`clipped_sums`), from the same per-sample gradients."""
        n, clip, device = losses.shape[0], self.options.clip, losses.device
        grads, rows = per_sample_gradients(losses, params, leaves)
        scale = joint_scale(grads, rows, clip=clip)
        for p, g in zip(params, grads):  # a parameter the losses do not reach (g None) gets the noise alone
            signal = torch.einsum("n,n...->...", scale, g) if g is not None else torch.zeros_like(p)
            total = signal + self.sigma * clip * self._noise(p.shape, device)
            p.grad = total / n if p.grad is None else p.grad + total / n
        for party, leaf in leaves.items():
            row = scale[:, None] * rows[party] + self.sigma * clip * self._noise(rows[party].shape, device)
            leaf.grad = row / n
        self.uses[ids.cpu()] += 1
        return None if known is None else clipped_sums(grads, scale, known)

    def _noise(self, shape: torch.Size, device: torch.device) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, device=self.generator.device).to(device)

    def privacy_spent(self) -> float | None:
        if self.is_identity or self.uses is None or self.uncovered or int(self.uses.max()) == 0:
            return None
        return spent(self.sigma, delta=self.options.delta, uses=int(self.uses.max()))

    def privacy_delta(self) -> float:
        return float(self.options.delta)


def uses_outside_loop(method) -> list[str]:
    """``method``'s label uses outside the shared finetuning loop, declared or its own undeclared code: each voids the
    claim (``GaussianDP.covers``; the accountants' settings_void reads the same list)."""
    return [*method.label_uses(), *method.undeclared_label_uses()]


def label_reads(finetune) -> int:
    """How often the shared finetuning loop reads each trained label: once per update, ``epochs * local_updates``
    (FedBCD's local updates included); the count dp-gaussian's accountant composes and its target is solved over."""
    return finetune.epochs * finetune.local_updates


def spent(sigma: float, *, delta: float, uses: int) -> float:
    """Opacus' RDP epsilon at ``delta`` of ``uses`` uses of a label, each a Gaussian of multiplier sigma / 2, rate 1;
    0 where its conversion gives a negative one (a large delta)."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    for _ in range(uses):
        accountant.step(noise_multiplier=sigma / 2.0, sample_rate=1.0)
    with _accountant_notes_off():  # (epsilon, delta)-DP implies (epsilon', delta)-DP for every epsilon' >= epsilon
        return max(0.0, float(accountant.get_epsilon(delta=delta)))


def noise_for(target: float, *, delta: float, uses: int) -> float:
    """The sigma whose ``uses`` uses spend ``target`` at ``delta`` (Opacus' ``get_noise_multiplier`` at rate 1, for
    the changed label's sensitivity 2C: twice its multiplier)."""
    from opacus.accountants.utils import get_noise_multiplier

    with _accountant_notes_off():
        return 2.0 * float(get_noise_multiplier(target_epsilon=target, target_delta=delta, sample_rate=1.0, steps=uses,
                                                accountant="rdp"))


def per_sample_gradients(losses: torch.Tensor, params: list[nn.Parameter], leaves: dict[int, torch.Tensor], *,
                         owners: torch.Tensor | None = None, retain: bool = False
                         ) -> tuple[tuple[torch.Tensor | None, ...], dict[int, torch.Tensor]]:
    """Each loss's gradient with respect to every parameter (None where it does not reach one) and to its owner's row of
    every received embedding (loss i owns row i unless ``owners`` says which; several losses may share a row, as an
    auditor's candidate labels do). ``retain`` keeps the graph for later passes."""
    eye = torch.eye(losses.shape[0], device=losses.device, dtype=losses.dtype)
    grads = torch.autograd.grad(losses, params, grad_outputs=eye, is_grads_batched=True,
                                retain_graph=retain or bool(leaves), allow_unused=True)
    if not leaves:
        return grads, {}
    if owners is None:  # each loss reaches its own row only: one pass
        return grads, dict(zip(leaves, torch.autograd.grad(losses.sum(), list(leaves.values()), retain_graph=retain)))
    full = torch.autograd.grad(losses, list(leaves.values()), grad_outputs=eye, is_grads_batched=True,
                               retain_graph=retain)
    entries = torch.arange(losses.shape[0], device=losses.device)
    return grads, {party: g[entries, owners] for party, g in zip(leaves, full)}


def joint_scale(grads: tuple[torch.Tensor | None, ...], rows: dict[int, torch.Tensor], *, clip: float) -> torch.Tensor:
    """min(1, C / ||v_i||) per loss, v_i its whole gradient: every parameter's and its rows (joint clipping)."""
    parts = [g.flatten(1).pow(2).sum(1) for g in (*grads, *rows.values()) if g is not None]
    squares = sum(parts[1:], parts[0])
    return (clip / squares.sqrt().clamp_min(1e-12)).clamp(max=1.0)


def clipped_sums(grads: tuple[torch.Tensor | None, ...], scale: torch.Tensor, rows: torch.Tensor
                 ) -> list[torch.Tensor | None]:
    """Each parameter's per-sample gradients (``grads``, losses first) clipped by ``scale`` and summed over the losses
    ``rows``, flattened (None where no loss reaches it): the known samples' share of the update, as an auditor
    subtracts it (the product, then the sum over the rows, in this order)."""
    return [None if g is None else (g[rows].flatten(1) * scale[rows, None]).sum(0) for g in grads]


@contextlib.contextmanager
def _accountant_notes_off() -> Iterator[None]:
    """Opacus warns when its largest RDP order is the optimum (a looser but valid bound): not the user's concern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
