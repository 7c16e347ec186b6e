"""fi-decoder: the training-based inverse network (TBM; He et al., CCS 2019; VFLAIR's "ResSFL" attack, ResSFL's MIA
decoder, SecretFlow's v_mia; ../shared/ANCHORS-FEATURES.md A4).

Threat model: an honest-but-curious adversary (the active party by default; any role the method sends per-sample
rows about the victim) that knows the victim's features of a few aligned samples (``partition.aux_features``, 10% of
the aligned training samples: VFLAIR's ``need_auxiliary``) and the rows it received about them. Algorithm: train a
decoder from received rows to victim features on those pairs by MSE, apply it to the targets' rows. The rows of the
known samples are those it really received, so a defense's noise is in them: the decoder is noise-aware by
construction (ResSFL's ``noise_aware``). VFLAIR's recipe is the default: Adam lr 1e-3, 50 epochs, batch 32, its MLP
decoder (the conv decoder for image victims of 16 px or more, ResSFL's kind). VFLAIR calls the passive bottom on the
known samples (white-box); here the adversary uses what it received, as in deployment.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from vflpriv.attacks.features.base import FeatureAttack, FeatureOptions, FeatureView, Reconstruction
from vflpriv.attacks.features.decoders import build_decoder, fit_regression
from vflpriv.attacks.features.shared_fits import shared_fit
from vflpriv.models.training import apply_in_batches


class DecoderOptions(FeatureOptions):
    decoder: Literal["auto", "mlp", "conv"] = Field(
        "auto", description="auto: conv for image victims of 16 px or more, else VFLAIR's MLP")
    epochs: int = Field(50, ge=1, description="decoder training epochs (VFLAIR: 50)")
    lr: float = Field(1e-3, gt=0, description="Adam learning rate (VFLAIR: 1e-3)")
    batch_size: int = Field(32, ge=2, description="VFLAIR: 32")


class FeatureDecoder(FeatureAttack):
    """Decoder from received rows to the victim's features, trained on the known pairs."""

    Options = DecoderOptions
    anchor: ClassVar[str] = ("VFLAIR src/evaluates/attacks/ResSFL.py (TBM); ResSFL MIA_torch.py; SecretFlow "
                             "examples/security/v_mia")
    search_space: ClassVar[dict[str, tuple]] = {"lr": (3e-4, 1e-3, 3e-3)}
    budget_option: ClassVar[str] = "epochs"
    #: The quick audit's feature attack: the cheapest (benchmarks/results/feature_attack_cost.md) and the one the
    #: audit also runs under the feature defenses (``audit.feature_defended``).
    strongest_of_kind: ClassVar[bool] = True

    def victim_problem(self, spec) -> str:
        if self.options.decoder == "conv" and not (spec.modality == "image" and len(spec.shape) == 3):
            return "attack.options.decoder=conv decodes to images; the victim's features are tabular: use mlp or auto"
        return super().victim_problem(spec)

    def infer(self, view: FeatureView) -> dict[str, Reconstruction]:
        o = self.options
        x = view.received["aux"].flatten(1)
        net = build_decoder(o.decoder, x.shape[1], view.victim_spec, generator=view.generator).to(view.device)
        shared_fit(fit_regression, net, x, view.aux_victim, epochs=o.epochs, lr=o.lr, batch_size=o.batch_size,
                   generator=view.generator, what="fi-decoder's decoder")  # fi-inversion's starting decoder too
        return {name: Reconstruction(apply_in_batches(net, view.received[name].flatten(1))) for name in view.targets}
