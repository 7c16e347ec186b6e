"""Gaussian DP on the cut layer: DP-SGD's mechanism on the gradient message (VFLAIR ``GaussianDP`` in
``src/evaluates/defenses/defense_functions.py``; Abadi et al. 2016), with the privacy spent reported by Opacus'
RDP accountant.

Each row of a gradient message (one sample's gradient) is clipped to L2 norm C, then N(0, (sigma C)^2) is added
to every entry: G'_i = G_i / max(1, ||G_i|| / C) + N(0, sigma^2 C^2 I). VFLAIR instead scales the whole batch by
its largest row norm to 0.2 and adds noise of a fixed absolute std; per-row clipping bounds each sample's
contribution, which is what an accountant needs. Strength: the noise multiplier sigma (higher is stronger);
sigma = 0 is the identity (no clipping either). ``target_epsilon`` instead solves for the sigma that spends that
epsilon over the run (Opacus' ``get_noise_multiplier``, at the full batch's sample rate: an epoch's shorter last
batch spends less, so the run spends at most the target; measured: 2.81 for a target of 3 on digits).

Accounting: each gradient message is one step of the sampled Gaussian mechanism with sample rate q = B / N (B its
rows, N the labeled aligned training samples) and noise multiplier sigma; ``privacy_spent`` is epsilon at
``delta`` after every message this defense transformed (every passive party's messages compose). The accountant
assumes Poisson sampling; the loop shuffles and cuts epochs into batches, as Opacus' own DP-SGD does by default:
the reported epsilon is the standard, not a tight, statement for that sampling.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from pydantic import Field

from vflpriv.common.errors import ConfigError
from vflpriv.config.options import Options
from vflpriv.defenses.base import Defense, StrengthAxis
from vflpriv.engine.message import Message

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


class GaussianDPOptions(Options):
    clip: float = Field(1.0, gt=0, description="C: every row of a gradient message is clipped to this L2 norm")
    delta: float = Field(1e-5, gt=0, lt=1, description="delta of the (epsilon, delta) the accountant reports")
    target_epsilon: float | None = Field(
        None, gt=0, description="solve for the noise multiplier that spends this epsilon over the run "
        "(instead of a strength)")


def clip_rows(tensor: torch.Tensor, *, clip: float) -> torch.Tensor:
    """Each row scaled down to L2 norm at most ``clip``."""
    rows = tensor.reshape(tensor.shape[0], -1)
    factor = (rows.norm(dim=1, keepdim=True) / clip).clamp_min(1.0)
    return (rows / factor).reshape(tensor.shape)


class GaussianDP(Defense):
    """Per-row clipping to C and Gaussian noise sigma C on each gradient message; epsilon by Opacus' RDP accountant."""

    Options = GaussianDPOptions
    default_kinds = ("gradient",)
    supported_kinds = ("gradient",)
    axis = StrengthAxis(name="sigma", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.1, 10.0), log=True)
    audit_strengths = {"finetune": (0.5, 1.0, 4.0)}
    anchor = "Abadi et al. 2016 (DP-SGD); VFLAIR GaussianDP; Opacus RDP accountant"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        from opacus.accountants import RDPAccountant  # a core dependency, imported when a dp-gaussian is built
        if self.options.target_epsilon is not None and self.strength != self.axis.identity:
            raise ConfigError("dp-gaussian: give a strength (the noise multiplier) or options.target_epsilon, not both")
        self.accountant = RDPAccountant()
        self.training_size = 0
        self.sigma = self.strength

    @property
    def is_identity(self) -> bool:
        return self.strength == self.axis.identity and getattr(self.options, "target_epsilon", None) is None

    def bind(self, federation: Federation) -> None:
        """N (the samples the gradients are of), and sigma for a target epsilon over the run's messages."""
        self.training_size = int(federation.labeled_aligned().numel())
        target = self.options.target_epsilon
        if target is not None:
            from opacus.accountants.utils import get_noise_multiplier

            ft = federation.finetune
            rate = min(1.0, ft.batch_size / max(self.training_size, 1))
            steps = ft.epochs * -(-self.training_size // ft.batch_size) * len(federation.passive)
            with _accountant_notes_off():
                self.sigma = float(get_noise_multiplier(target_epsilon=target, target_delta=self.options.delta,
                                                        sample_rate=rate, steps=steps, accountant="rdp"))

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        clip = self.options.clip
        noise = torch.randn(tensor.shape, generator=self.generator, dtype=tensor.dtype, device=self.generator.device)
        self.accountant.step(noise_multiplier=self.sigma,
                             sample_rate=min(1.0, tensor.shape[0] / max(self.training_size, tensor.shape[0])))
        return clip_rows(tensor, clip=clip) + self.sigma * clip * noise.to(tensor.device)

    def privacy_delta(self) -> float:
        return float(self.options.delta)

    def privacy_spent(self) -> float | None:
        if self.is_identity or not self.accountant.history:
            return None
        with _accountant_notes_off():
            return float(self.accountant.get_epsilon(delta=self.options.delta))


@contextlib.contextmanager
def _accountant_notes_off() -> Iterator[None]:
    """Opacus warns when its largest RDP order is the optimum (a looser but valid bound): not the user's concern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
