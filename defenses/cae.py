"""The confusional autoencoder, CAE and DCAE (Zou et al. 2022, "Defending Batch-Level Label Inference and
Replacement Attacks in Vertical Federated Learning"; SecretFlow ``sfl/ml/nn/sl/defenses/confusional_autoencoder.py``;
VFLAIR ``src/evaluates/MainTaskVFL.py``, DCAE in ``src/evaluates/defenses/defense_api.py``).

Once, before training, the active party trains a label autoencoder on random near-one-hot label rows
y = sharpen(softmax(U[0,1]^C), T = 0.025) (30000 of them): an encoder Linear(C, (6C+2)^2) - ReLU - Linear(., C)
whose softmax is the fake soft label y~, a decoder Linear(C, (6C+2)^2) - ReLU - Linear(., C) - softmax, with the
loss 10 CE(dec(y~), y) - lambda H(y~) - CE(y~, y), Adam lr 5e-4, 20 epochs, batch 128 (SecretFlow's defaults; as in
its code, ``CrossEntropyLoss`` takes the softmax outputs as logits, and H is the mean entropy over all entries).
The federation then trains on y~ = enc(y) instead of y, so every gradient the passive parties receive encodes fake
labels, and the active party decodes its predictions: p = dec(softmax(pred)). Like VFLAIR's shipped autoencoders
(one per number of classes and lambda), there is one autoencoder per (classes, lambda, options), drawn from a
fixed seeded stream and cached like a pretraining, shared by every run and seed (it reads no data; training one
takes about 30 s for 10 classes on two CPU cores). DCAE adds DiscreteSGD (12 bins, VFLAIR) on the gradients the
active party sends.

Strength: lambda (the entropy weight), higher confuses more; 0 is the identity (no autoencoder). VFLAIR ships
autoencoders at lambda 0, 0.1, 0.5, 1 (their lambda 0 still confuses through its -CE(y~, y) term; here it is off).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from vflpriv.common.errors import DivergedError
from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.keys import config_hash
from vflpriv.config.options import Options
from vflpriv.defenses.base import ACTIVE_BATCH, MESSAGE, PREDICTIONS, StrengthAxis, TrainingDefense
from vflpriv.defenses.discrete_sgd import discretise, grid_step
from vflpriv.engine.message import Message
from vflpriv.models.training import make_optimizer
from vflpriv.store import cache

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


class CAEOptions(Options):
    epochs: int = Field(20, ge=1, description="autoencoder training epochs (SecretFlow: 20)")
    samples: int = Field(30000, ge=16, description="random label rows it trains on (SecretFlow: 30000)")
    batch_size: int = Field(128, ge=2, description="(SecretFlow: 128)")
    lr: float = Field(5e-4, gt=0, description="Adam's lr (SecretFlow: 5e-4)")
    temperature: float = Field(0.025, gt=0, description="T sharpening the random label rows (SecretFlow: 0.025)")


class DCAEOptions(CAEOptions):
    bins: int = Field(12, ge=1, description="DiscreteSGD's bins on the gradients sent (VFLAIR's DCAE: 12)")


def sharpen(p: torch.Tensor, *, temperature: float) -> torch.Tensor:
    q = p.pow(1.0 / temperature)
    return q / q.sum(1, keepdim=True)


class WideningLinear(nn.Linear):
    """``nn.Linear`` (same parameters, init and outputs) for few inputs and many outputs, with its weight gradient
    computed as x^T g instead of (g^T x)^T: autograd's ``addmm`` backward takes the second form for a transposed
    weight, 4.9x slower for CAE's 10 -> 3844 layer on one core (the autoencoder's training took 2.3x the time of
    its layer). The gradients agree to float rounding."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight.t().contiguous())


class LabelAutoencoder(nn.Module):
    """encode(y) = softmax(encoder(y)) (the fake soft label), decode(p) = softmax(decoder(p)). The ReLUs work in
    place (same values and gradients; 0.93x the CPU of its training: no second 128 x 3844 activation per layer)."""

    def __init__(self, classes: int):
        super().__init__()
        hidden = (6 * classes + 2) ** 2
        self.encoder = nn.Sequential(WideningLinear(classes, hidden), nn.ReLU(True), nn.Linear(hidden, classes))
        self.decoder = nn.Sequential(WideningLinear(classes, hidden), nn.ReLU(True), nn.Linear(hidden, classes))

    def encode(self, y: torch.Tensor) -> torch.Tensor:
        return self.encoder(y).softmax(1)

    def decode(self, p: torch.Tensor) -> torch.Tensor:
        return self.decoder(p).softmax(1)


def train_autoencoder(classes: int, *, strength: float, options: CAEOptions, generator: torch.Generator,
                      device: torch.device) -> LabelAutoencoder:
    """SecretFlow's ``AutoEncoderTrainer.train``, drawn from ``generator`` (its init: normal(0, 0.01), zero bias)."""
    model = LabelAutoencoder(classes)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=generator, device=generator.device) * 0.01)
                m.bias.zero_()
    model = model.to(device)
    y = sharpen(torch.rand(options.samples, classes, generator=generator, device=generator.device).softmax(1), temperature=options.temperature)
    y = y.to(device)
    opt = make_optimizer(model.parameters(), name="adam", lr=options.lr, weight_decay=0.0)
    for _ in range(options.epochs):
        for start in range(0, options.samples, options.batch_size):
            batch = y[start:start + options.batch_size]
            fake = model.encode(batch)
            decoded = model.decode(fake)
            entropy = (-fake * (fake + 1e-6).log()).mean()
            loss = 10 * F.cross_entropy(decoded, batch) - strength * entropy - F.cross_entropy(fake, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.eval().requires_grad_(False)


class ConfusionalAutoencoder(TrainingDefense):
    """Train on the label autoencoder's fake soft labels; decode the predictions."""

    Options = CAEOptions
    hook_points = frozenset({ACTIVE_BATCH, PREDICTIONS})
    reads_labels = True
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0, low=0.0, high=100.0, search=(0.05, 2.0), log=True)
    audit_strengths = {"finetune": (0.1, 0.5, 1.0)}
    anchor = "Zou et al. 2022; SecretFlow confusional_autoencoder.py; VFLAIR MainTaskVFL.py (CAE)"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.autoencoder: LabelAutoencoder | None = None

    @classmethod
    def shared_state(cls, *, strength: float | None, options: dict) -> str | None:
        """The autoencoder (per strength and CAE options; dcae shares CAE's), none at the identity."""
        if strength is None or strength == cls.axis.identity:
            return None
        return json.dumps(["cae", strength, {k: v for k, v in options.items() if k in CAEOptions.model_fields}],
                          sort_keys=True)

    def bind(self, federation: Federation) -> None:
        """The autoencoder, from the cache when this seed, strength and options trained one before."""
        super().bind(federation)
        classes = self.num_classes
        if self.is_identity:
            return
        options = CAEOptions.model_validate(self.options.model_dump(include=set(CAEOptions.model_fields)))
        setting = [classes, self.strength, options.model_dump(mode="json")]
        key = config_hash({"code": cache.code_version(), "cae": setting}, 24)

        def compute() -> list[nn.Module]:
            g = seeded_generator(0, f"cae:{setting}")
            return [train_autoencoder(classes, strength=self.strength, options=options, generator=g,
                                      device=federation.device)]

        (self.autoencoder,) = cache.cached_modules(key, lambda: [LabelAutoencoder(classes).to(federation.device)],
                                                   compute)
        self.autoencoder.eval().requires_grad_(False)
        labels = torch.arange(classes, device=federation.device)
        decoded = self.autoencoder.decode(self.autoencoder.encode(F.one_hot(labels, classes).float())).argmax(1)
        if not torch.equal(decoded, labels):  # the federation would train on labels it can never decode
            raise DivergedError(
                f"the confusional autoencoder decodes {int((decoded == labels).sum())} of its {classes} classes back "
                "from their fake labels; train it longer (defense options samples, epochs)")

    def active_batch(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.autoencoder is None:
            return x, y
        rows = y if y.is_floating_point() else F.one_hot(y, self.num_classes).float()
        return x, self.autoencoder.encode(rows)

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        if self.autoencoder is None:
            return logits
        return self.autoencoder.decode(logits.softmax(1)).clamp_min(1e-12).log()


class DiscreteCAE(ConfusionalAutoencoder):
    """CAE, and DiscreteSGD on the gradients the active party sends (VFLAIR's DCAE)."""

    Options = DCAEOptions
    hook_points = frozenset({ACTIVE_BATCH, PREDICTIONS, MESSAGE})
    default_kinds = ("gradient",)
    supported_kinds = ("gradient",)
    anchor = "Zou et al. 2022; VFLAIR defense_api.py (DCAE: CAE + DiscreteSGD, 12 bins)"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.steps: dict[int, float] = {}

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        step = self.steps.get(message.receiver)
        if step is None:
            step = self.steps[message.receiver] = grid_step(tensor, bins=self.options.bins)
        return tensor if step == 0.0 else discretise(tensor, step=step)
