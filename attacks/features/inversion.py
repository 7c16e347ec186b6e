"""fi-inversion: optimisation-based inversion of the victim's bottom (model inversion by embedding matching: VFLAIR-LLM's
VMI, generalised to image and tabular bottoms with BiSR's learned initialisation; ANCHORS-FEATURES.md §5 and §7.3).

Threat model: the adversary that receives the victim's per-sample rows (the active party by default) and knows the
victim features of its known samples. Algorithm: fit a surrogate of the victim's bottom on the known pairs
(``surrogate.py``: no role holds the victim's whole bottom in vflpriv's methods), start each target from the
fi-decoder's guess (BiSR: the learned inverter's output as the starting point), then minimise over x

    || S(x) - h ||^2  +  tv * TV(x)   (images),   x projected on [0, 1] after every step (the range prior),

with Adam, where h is the row received about the target and TV the anisotropic total variation (mean absolute
difference of neighbouring pixels, rows and columns). The range is the adversary's own scale of the victim's features
(fitted on its known samples). It is the attack that pretrained, shared encoders invite, and neither image/tabular
anchor has it; its reconstructions are scored like every other feature attack's.

When to stop (``stop``). Matching a surrogate's rows can walk away from the features it started near (the surrogate
is fitted on few pairs), so more steps are not always better, and choosing ``steps`` from the targets' errors would be
selecting on the targets. ``stop: held-out`` chooses the step on the adversary's own knowledge instead: a random
quarter of its known samples (:class:`~vflpriv.attacks.search.FeatureHoldout`'s split, under a name of its own) is
inverted beside the targets, with the decoder and the surrogate fitted on the other known pairs only, and the targets'
reconstructions are kept at the step (0 to ``steps``) with the lowest MSE on that quarter. ``last`` (the default)
keeps the last step's, as VMI and BiSR do.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field

from vflpriv.attacks.features.base import FeatureAttack, FeatureOptions, FeatureView, Reconstruction
from vflpriv.attacks.features.decoder_attack import DecoderOptions, FeatureDecoder
from vflpriv.attacks.features.surrogate import fit_surrogate
from vflpriv.models.training import make_optimizer


class InversionOptions(FeatureOptions):
    steps: int = Field(200, ge=1, description="optimisation steps on the reconstructions")
    lr: float = Field(0.01, gt=0, description="Adam learning rate of the reconstructions")
    tv: float = Field(0.05, ge=0, description="total-variation weight (image victims; unused on tabular ones)")
    init: Literal["decoder", "mean"] = Field("decoder", description="start: the fi-decoder's guess (BiSR) or the known samples' mean")
    surrogate_epochs: int = Field(100, ge=1, description="training epochs of the surrogate bottom")
    decoder_epochs: int = Field(50, ge=1, description="training epochs of the initialising decoder (VFLAIR: 50)")
    fit_lr: float = Field(1e-3, gt=0, description="Adam learning rate of the surrogate and the decoder")
    batch_size: int = Field(32, ge=2, description="batch of the surrogate's and the decoder's training")
    stop: Literal["last", "held-out"] = Field(
        "last", description="last: the reconstructions after `steps` steps; held-out: at the step with the lowest MSE "
                            "on a quarter of the known samples inverted beside the targets (decoder and surrogate fitted "
                            "on the rest)")
    read_only_with: ClassVar[dict[str, tuple[str, tuple]]] = {"decoder_epochs": ("init", ("decoder",))}


#: The target set of the known samples ``stop: held-out`` withholds to choose the step on.
STEP_HOLDOUT = "step-holdout"


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of vertically and horizontally neighbouring pixels of images (N, C, H, W), summed."""
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


class FeatureInversion(FeatureAttack):
    """Reconstructions optimised until a surrogate bottom maps them to the received rows, from the decoder's guess."""

    Options = InversionOptions
    anchor: ClassVar[str] = ("VFLAIR-LLM src/evaluates/attacks/VanillaModelInversion_WhiteBox.py (VMI) and BiSR.py "
                             "(learned initialisation); a surrogate bottom as SDAR/FORA")
    search_space: ClassVar[dict[str, tuple]] = {"lr": (0.003, 0.01, 0.03)}
    budget_option: ClassVar[str] = "steps"
    #: The audit's quick settings: many trainings, each with its inversion.
    audit_options: ClassVar[dict] = {"steps": 30, "surrogate_epochs": 30}

    def victim_problem(self, spec) -> str:
        tv = type(self.options).model_fields["tv"].default
        if self.options.tv != tv and not (spec.modality == "image" and len(spec.shape) == 3):
            return (f"attack.options.tv={self.options.tv:g}: tv weighs the total variation of image reconstructions "
                    "only, and the victim's features are tabular, so any value is unread: leave tv out")
        return super().victim_problem(spec)

    def known_needed(self, *, tuned: bool) -> tuple[int, str]:
        """``stop: held-out`` withholds a quarter of the known samples (at least 1) and fits on at least 2; tuned, each
        trial sees the known samples less the search's own quarter: 4 known samples leave a trial the 3 it needs."""
        if self.options.stop != "held-out":
            return super().known_needed(tuned=tuned)
        return (4 if tuned else 3), ("stop: held-out withholds at least 1 known sample and fits on at least 2"
                                     + (", in every tuning trial (which sees three quarters of them)" if tuned else ""))

    def infer(self, view: FeatureView) -> dict[str, Reconstruction]:
        held = None
        if self.options.stop == "held-out":
            from vflpriv.attacks.search import FeatureHoldout

            holdout = FeatureHoldout(view, seed=view.generator.initial_seed(), name=STEP_HOLDOUT)
            if holdout.split is not None:  # too few known samples to withhold any: the last step's
                view, held = holdout.fit_view, holdout.held.to(view.device)
        found = self._reconstruct(view, held)
        found.pop(STEP_HOLDOUT, None)
        return found

    def _reconstruct(self, view: FeatureView, held: torch.Tensor | None) -> dict[str, Reconstruction]:
        """Every target set of ``view`` inverted; with ``held``, the known features of its :data:`STEP_HOLDOUT` set,
        kept at the step where that set's MSE is lowest."""
        o = self.options
        if o.init == "decoder":
            decoder = FeatureDecoder(DecoderOptions(epochs=o.decoder_epochs, lr=o.fit_lr, batch_size=o.batch_size))
            start = {name: r.features for name, r in decoder.infer(view).items()}
        else:
            start = {name: view.aux_victim.mean(0, keepdim=True).expand(view.received[name].shape[0],
                                                                         *view.aux_victim.shape[1:])
                     for name in view.targets}
        surrogate = fit_surrogate(view, epochs=o.surrogate_epochs, lr=o.fit_lr, batch_size=o.batch_size)
        image = view.victim_spec.modality == "image" and view.aux_victim.dim() == 4
        names = view.targets
        watch = names.index(STEP_HOLDOUT) if held is not None else None
        found = self._invert(surrogate, [start[n] for n in names], [view.received[n].flatten(1) for n in names], image,
                             watch=None if watch is None else (watch, held))
        return {name: Reconstruction(x) for name, x in zip(names, found)}

    def _invert(self, surrogate, starts: list[torch.Tensor], rows: list[torch.Tensor], image: bool, *,
                watch: tuple[int, torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Each target set inverted from its start. The sets share one surrogate forward and backward per step (fewer,
        larger products), but each keeps its own loss (its mean, its TV), its own Adam state and its clamp: the sum of
        the sets' losses gives each set's reconstructions exactly the gradient they get inverted alone. ``watch`` (a
        set's index and its true features): every set is returned as it was at the step where that set's MSE was
        lowest (step 0 is the start)."""
        o = self.options
        xs = [start.detach().clone().clamp(0, 1).requires_grad_(True) for start in starts]
        opt = make_optimizer(xs, name="adam", lr=o.lr, weight_decay=0.0)
        sizes = [x.shape[0] for x in xs]
        best = None if watch is None else (_mse(xs[watch[0]], watch[1]), [x.detach().clone() for x in xs])
        for _ in range(o.steps):
            mapped = surrogate(torch.cat(xs)).split(sizes)
            loss = 0
            for x, out, h in zip(xs, mapped, rows):
                loss_x = (out - h).pow(2).sum(1).mean()
                if image and o.tv > 0:
                    loss_x = loss_x + o.tv * total_variation(x)
                loss = loss + loss_x
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                for x in xs:
                    x.clamp_(0, 1)
            if watch is not None:
                _keep_better(best, xs, _mse(xs[watch[0]], watch[1]))
        return [x.detach() for x in xs] if best is None else best[1]


def _mse(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean squared error of reconstructions ``x`` against the true features (a 0-dim tensor: no host sync)."""
    with torch.no_grad():
        return (x - target).pow(2).mean()


def _keep_better(best: tuple[torch.Tensor, list[torch.Tensor]], xs: list[torch.Tensor], error: torch.Tensor) -> None:
    """Replace the kept reconstructions and their error by the current ones where ``error`` is lower (in place, on
    the device: no host sync in the loop)."""
    with torch.no_grad():
        better = error < best[0]
        best[0].copy_(torch.where(better, error, best[0]))
        for kept, x in zip(best[1], xs):
            kept.copy_(torch.where(better, x, kept))
