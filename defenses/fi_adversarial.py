"""fi-adversarial: ResSFL's attacker-aware training at a passive party (Li et al., CVPR 2022, "ResSFL: A Resistance
Transfer Framework for Defending Model Inversion Attack in Split Federated Learning"; zlijingtao/ResSFL
``MIA_torch.py`` ``train_target_step`` and ``gan_train_step``; ../shared/ANCHORS-FEATURES.md D1).

The victim imagines the adversary's inversion decoder and trains its bottom against it. Per update, on its own batch
(its features x and the embedding z it sends; nothing else, no label, no other party's data):

1. the victim's term (``train_target_step``), through D as this batch meets it (its weights held): with SSIM,
   alpha * max(0, SSIM(D(z), x) - tau) (tau = ``threshold``, ResSFL's ``ssim_threshold`` 0.5; tau = 0:
   alpha * SSIM); with MSE, -alpha * MSE(D(z), x), ResSFL's ``gan_loss_type=MSE``. An unbounded -MSE term can push
   the embedding's scale without end (D5 of the anchors), so ``threshold`` caps it as vflpriv's analogue of the SSIM
   threshold: -alpha * min(MSE, tau), no push once the imagined decoder's error is above tau (unset: ResSFL's
   unbounded term);
2. the imagined attacker's step (``gan_train_step``): its decoder D, Adam at lr 1e-3, takes ``decoder_steps`` steps on
   (z detached, x) minimising MSE(D(z), x) or -SSIM(D(z), x).

x is the victim's features min-max scaled on its own local training rows (the anchors' [0, 1] scale; ResSFL
denormalises images to [0, 1]); D is the architecture the ``fi-decoder`` attack uses (``vflpriv.models.decoders``:
VFLAIR's MLP, the conv decoder for images of 16 px or more; ResSFL's imagined decoder is its ``res_normN4C64``).
``loss=auto`` is SSIM for such images (ResSFL's default) and MSE otherwise (tabular features, the 8 x 4 digit halves,
where an 11 x 11 SSIM window has no meaning). The order is ResSFL's batch schemes' (``orig_batch``: the client's step,
then the decoder's), and one forward of D (in train mode) on the embedding of the victim's training forward serves both:
the victim's gradient through D and D's own step come from one backward (ResSFL recomputes the embedding with the client
in eval mode for D's step and runs D in eval mode for the client's term: two more forwards per update, for the same
pair of updates on a model without batch-dependent layers, which VFLAIR's MLP decoder is).

``bottleneck`` C > 0 is ResSFL's bottleneck layer at the cut (``norelu_C8S1``: a 1x1 convolution to C channels, no
ReLU, the server's first layer expanding back; C = 8 in its defense, the default here in finetuning, 0 turns it off):
here the victim's bottom ends in Linear(d, C) -> Linear(C, d), no
ReLU, so what it sends lies in a C-dimensional subspace; the expansion sits at the sender (not the receiver) so the
active party's top keeps its input width, and the receiver learns exactly what it could from the C-wide code.

Resistance transfer (ResSFL stage B): in ``phase: pretrain`` it acts inside the method's SSL pretraining on each
encoder the victim trains there (the cross-party encoder's step and the local one's, FedLocal, FedCSSL, FedGSSL,
FedHSSL, SS-VFL), on its views and the encoder's outputs, so the bottom finetuning starts from was trained to resist
inversion; the pretraining reads no label, and neither does this. A guided method's two encoders share one imagined
decoder (the hook point does not tell them apart). Strength: alpha, higher is stronger; 0 is the identity (no decoder
is built). ResSFL: alpha 0.3 with SSIM, tau 0.5, C 8.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from vflpriv.common import feature_metrics as fm
from vflpriv.common.errors import ConfigError
from vflpriv.config.options import Options
from vflpriv.defenses.base import StrengthAxis
from vflpriv.defenses.passive import PASSIVE_BOTTOM, PASSIVE_LOSS, PassiveDefense
from vflpriv.engine.message import FINETUNE, INFERENCE, PRETRAIN
from vflpriv.models.decoders import build_decoder, conv_victim
from vflpriv.models.encoders import init_parameters
from vflpriv.models.training import make_optimizer

#: ResSFL's bottleneck at the cut (``norelu_C8S1``, its Table 6 and expert scripts).
RESSFL_BOTTLENECK = 8
#: The widest layer at the cut accepted: far past any embedding vflpriv's bottoms send (a wider layer is no
#: bottleneck, and 2^31 - 1 would fail in the allocator, inside the training).
MAX_BOTTLENECK = 4096


class FIAdversarialOptions(Options):
    loss: Literal["auto", "mse", "ssim"] = Field(
        "auto", description="the imagined attacker's measure: auto = ssim for images of 16 px or more (ResSFL), else mse")
    threshold: float | None = Field(
        None, ge=0, description="tau: ssim penalises only SSIM above tau (ResSFL 0.5, the default); mse stops pushing "
                                "once the decoder's MSE exceeds tau (unset: ResSFL's unbounded -MSE)")
    bottleneck: int | None = Field(
        None, ge=0, le=MAX_BOTTLENECK, description="C > 0: a C-wide Linear layer at the cut, no ReLU, finetuning only; 0: none; unset: "
                                "ResSFL's C = 8 in finetuning, none in pretraining")
    decoder: Literal["auto", "mlp", "conv"] = Field("auto", description="the imagined decoder (as fi-decoder's)")
    decoder_lr: float = Field(1e-3, gt=0, description="its Adam learning rate (ResSFL: 1e-3)")
    decoder_steps: int = Field(1, ge=1, le=100, description="its steps per update of the victim (ResSFL gan_num_step 1)")


class CutBottleneck(nn.Module):
    """The bottom followed by Linear(d, C) and Linear(C, d), no activation: a C-dimensional cut."""

    def __init__(self, bottom: nn.Module, width: int):
        super().__init__()
        d = bottom.out_dim
        self.bottom, self.narrow, self.expand = bottom, nn.Linear(d, width), nn.Linear(width, d)
        self.out_dim = d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.expand(self.narrow(self.bottom(x).flatten(1)))


class FIAdversarial(PassiveDefense):
    """The victim trains its bottom against a decoder it trains on its own (embedding, features) pairs."""

    Options = FIAdversarialOptions
    hook_points = frozenset({PASSIVE_BOTTOM, PASSIVE_LOSS})
    phases = (FINETUNE, PRETRAIN)
    axis = StrengthAxis(name="alpha", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.01, 10.0), log=True)
    audit_strengths = {"finetune": (1.0, 3.0, 10.0), "pretrain": (1.0, 3.0, 10.0)}
    anchor = "Li et al. CVPR 2022 (ResSFL); zlijingtao/ResSFL MIA_torch.py train_target_step, gan_train_step"
    cost = ("one forward and backward of the imagined decoder and its Adam step per update of the victim; the training "
            "x2.85 on digits (the decoder is 10x the bottom), x1.07 with Fashion-MNIST's CNN bottom, pretraining "
            "x1.54 to x1.64 (benchmarks/results/feature_defense_overhead.md)")
    pays = ("digits: with the C = 8 cut, alpha 10 halves fi-decoder's leakage (0.034 to 0.020 MSE) at 0.03 of accuracy; "
            "without the cut it fools its imagined decoder, not a fresh one; in pretraining it left no resistance "
            "(benchmarks/results/feature_defense_claims)")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.phase != FINETUNE and self.options.bottleneck:
            raise ConfigError(f"defense '{self.name}': options.bottleneck is a layer at the cut of the split model, "
                              "which finetuning trains; in pretraining leave it unset or 0")
        self.scales: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.specs: dict[int, object] = {}
        self.decoders: dict[int, tuple[nn.Module, torch.optim.Optimizer, list[nn.Parameter]]] = {}

    def bind(self, federation) -> None:
        """Each protected party's own min-max scale, fitted on its local training rows (it holds them)."""
        for p in federation.passive:
            if self.acts_for(p.index, self.phase):
                image = p.spec.modality == "image"
                self.scales[p.index] = fm.fit_scale(p.x_train[p.local_ids], image=image)
                self.specs[p.index] = p.spec

    def victim_problem(self, party: int, spec) -> str:
        """The SSIM measure and the conv decoder need an image victim (C, H, W); on tabular features they would fail
        inside the training."""
        image = spec.modality == "image" and len(spec.shape) == 3
        if self.options.loss == "ssim" and not image:
            return f"options.loss=ssim scores images; party {party}'s features are tabular: use mse or auto"
        if self.options.decoder == "conv" and not image:
            return f"options.decoder=conv decodes to images; party {party}'s features are tabular: use mlp or auto"
        ssim = self.options.loss == "ssim" or self.options.loss == "auto" and conv_victim(spec)
        if ssim and self.options.threshold is not None and self.options.threshold >= 1:
            return (f"options.threshold={self.options.threshold:g}: the SSIM it is compared with never exceeds 1, so "
                    f"the victim's term would never act on party {party}'s features; give tau in [0, 1) (ResSFL 0.5)")
        return ""

    def measure(self, party: int) -> str:
        """mse or ssim for ``party``'s features (``loss=auto``: ssim for images of 16 px or more)."""
        chosen = self.options.loss
        return chosen if chosen != "auto" else "ssim" if conv_victim(self.specs[party]) else "mse"

    @property
    def bottleneck(self) -> int:
        """C of the layer at the cut (0: none): ResSFL's 8 unless set."""
        return RESSFL_BOTTLENECK if self.options.bottleneck is None else self.options.bottleneck

    def passive_bottom(self, party: int, bottom: nn.Module) -> nn.Module:
        if not self.bottleneck or not self.acts_for(party, FINETUNE):
            return bottom
        device = next(bottom.parameters()).device
        return init_parameters(CutBottleneck(bottom, self.bottleneck), generator=self.generator).to(device)

    def _decoder(self, party: int, width: int, device: torch.device
                 ) -> tuple[nn.Module, torch.optim.Optimizer, list[nn.Parameter]]:
        """``party``'s imagined decoder (built at its first embedding, in train mode: nothing else holds it to change
        that), its Adam and its parameters."""
        if party not in self.decoders:
            net = build_decoder(self.options.decoder, width, self.specs[party], generator=self.generator).to(device)
            params = list(net.train().parameters())
            self.decoders[party] = net, make_optimizer(params, name="adam", lr=self.options.decoder_lr,
                                                       weight_decay=0.0), params
        return self.decoders[party]

    def _error(self, party: int, guess: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """MSE, or SSIM (higher = better reconstruction) for the ssim measure."""
        if self.measure(party) == "ssim":
            return fm.ssim(guess, target).mean().to(guess.dtype)
        return nn.functional.mse_loss(guess, target)

    def passive_loss(self, party: int, phase: str, x: torch.Tensor, sent: torch.Tensor) -> torch.Tensor | None:
        if phase == INFERENCE or not self.acts_for(party, phase):
            return None
        target = fm.scaled(x, *self.scales[party]).reshape(-1, *self.specs[party].shape)
        z = sent.flatten(1)
        net, opt, params = self._decoder(party, z.shape[1], z.device)
        ssim = self.measure(party) == "ssim"
        direct = None if ssim else getattr(net, "mse_gradients", None)
        if direct is not None:  # the MLP decoder's backward written out: autograd's gradients bit for bit, no graph
            error, (toward_z, *toward_net) = direct(z.detach(), target, with_input=True)
        else:
            leaf = z.detach().requires_grad_(True)
            error = self._error(party, net(leaf), target)  # one forward: the attacker's step and the victim's term
            toward_z, *toward_net = torch.autograd.grad(error, [leaf, *params])
        self._step(opt, params, toward_net, ascend=ssim)
        for _ in range(self.options.decoder_steps - 1):  # the imagined attacker's further steps, on detached rows
            again = self._error(party, net(z.detach()), target)
            self._step(opt, params, torch.autograd.grad(again, params), ascend=ssim)
        value, slope = self._term(error.detach(), ssim=ssim)
        push = (z * (slope * toward_z)).sum()  # its gradient: d term / d z through the decoder this batch met
        return value + push - push.detach()

    @staticmethod
    def _step(opt: torch.optim.Optimizer, params: list[nn.Parameter], grads, *, ascend: bool) -> None:
        """One step of the imagined decoder: down its MSE, up its SSIM."""
        for p, g in zip(params, grads):
            p.grad = -g if ascend else g
        opt.step()

    def _term(self, error: torch.Tensor, *, ssim: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The victim's term at the decoder's ``error`` (MSE or SSIM) and its slope d term / d error: alpha * max(0,
        SSIM - tau) (tau 0: alpha * SSIM), or -alpha * MSE, capped at tau when one is set."""
        tau, alpha = self.options.threshold, self.strength
        if ssim:
            tau = 0.5 if tau is None else tau
            above = (error > tau) | (tau == 0)
            return alpha * ((error - tau).clamp_min(0.0) if tau > 0 else error), alpha * above.to(error.dtype)
        below = torch.ones_like(error) if tau is None else (error < tau).to(error.dtype)
        return -alpha * (error if tau is None else error.clamp(max=tau)), -alpha * below
