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
takes about 13 CPU s for 10 classes on one thread, its gradients written out: ``benchmarks/cae_autoencoder.py``).
DCAE adds DiscreteSGD (12 bins, VFLAIR) on the gradients the active party sends.

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
from vflpriv.models.optim import FusedAdam
from vflpriv.store import cache

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


class CAEOptions(Options):
    epochs: int = Field(20, ge=1, description="autoencoder training epochs (SecretFlow: 20)")
    samples: int = Field(30000, ge=16, description="random label rows it trains on (SecretFlow: 30000)")
    batch_size: int = Field(128, ge=2, description="(SecretFlow: 128)")
    lr: float = Field(5e-4, gt=0, description="Adam's lr (SecretFlow: 5e-4)")
    temperature: float = Field(0.025, ge=1e-3, description="T sharpening the random label rows (SecretFlow: 0.025; "
                               "at least 0.001: the map is finite at any T, its float32 error grows as 1/T)")


class DCAEOptions(CAEOptions):
    bins: int = Field(12, ge=1, description="DiscreteSGD's bins on the gradients sent (VFLAIR's DCAE: 12)")


def sharpen(p: torch.Tensor, *, temperature: float) -> torch.Tensor:
    """p^(1/T) renormalised per row (SecretFlow's ``sharpen``), each row divided by its maximum first: the same map,
    whose largest term is 1, so never p^(1/T)'s 0 / 0 (NaN rows at T = 0.025 on 20 or more classes)."""
    q = (p / p.amax(1, keepdim=True)).pow(1 / temperature)
    return q / q.sum(1, keepdim=True)


class LabelAutoencoder(nn.Module):
    """encode(y) = softmax(encoder(y)) (the fake soft label), decode(p) = softmax(decoder(p)). The ReLUs work in
    place (same values; no second activation per layer). Trained by :func:`train_autoencoder`'s written-out
    gradients, not through these modules."""

    def __init__(self, classes: int):
        super().__init__()
        hidden = (6 * classes + 2) ** 2
        self.encoder = nn.Sequential(nn.Linear(classes, hidden), nn.ReLU(True), nn.Linear(hidden, classes))
        self.decoder = nn.Sequential(nn.Linear(classes, hidden), nn.ReLU(True), nn.Linear(hidden, classes))

    def encode(self, y: torch.Tensor) -> torch.Tensor:
        return self.encoder(y).softmax(1)

    def decode(self, p: torch.Tensor) -> torch.Tensor:
        return self.decoder(p).softmax(1)


def train_autoencoder(classes: int, *, strength: float, options: CAEOptions, generator: torch.Generator,
                      device: torch.device) -> LabelAutoencoder:
    """SecretFlow's ``AutoEncoderTrainer.train``, drawn from ``generator`` (its init: normal(0, 0.01), zero bias): the
    loss as written, its gradients written out (:class:`_Pair`, :func:`_loss_gradients`) on one flat buffer of
    parameters that one fused Adam step updates. The same autoencoder as autograd's training of the modules, to
    float rounding (tested; ``benchmarks/cae_autoencoder.py`` measures both)."""
    model = LabelAutoencoder(classes)
    draws = [torch.randn(m.weight.shape, generator=generator, device=generator.device) * 0.01
             for m in model.modules() if isinstance(m, nn.Linear)]  # the modules' order: as their own init drew
    y = sharpen(torch.rand(options.samples, classes, generator=generator, device=generator.device).softmax(1),
                temperature=options.temperature).to(device)
    hidden = model.encoder[0].out_features
    flat = torch.zeros(2 * _Pair.size(classes, hidden), device=device)
    flat.grad = torch.zeros_like(flat)  # every entry written at each step
    encoder, decoder = (_Pair(flat, flat.grad, k, classes, hidden) for k in range(2))
    with torch.no_grad():
        for pair, first, second in ((encoder, *draws[:2]), (decoder, *draws[2:])):
            pair.first[:classes].copy_(first.t())
            pair.second.copy_(second)
    opt = FusedAdam([flat], lr=options.lr, weight_decay=0.0)  # make_optimizer's Adam (it keeps trainable tensors only)
    for _ in range(options.epochs):
        for start in range(0, options.samples, options.batch_size):
            batch = y[start:start + options.batch_size].t()  # (C, N): one column per sample
            fake = encoder.forward(batch)
            decoded = decoder.forward(fake)
            entropy, upstream, cross = _loss_gradients(batch, fake, decoded, strength)
            upstream = entropy + decoder.backward(upstream, inputs=True) - cross  # d loss / d fake
            encoder.backward(fake * (upstream - (upstream * fake).sum(0, keepdim=True)), inputs=False)  # its softmax
            opt.step()
    with torch.no_grad():
        for pair, sequential in ((encoder, model.encoder), (decoder, model.decoder)):
            sequential[0].weight.copy_(pair.first[:classes].t())
            sequential[0].bias.copy_(pair.first[classes])
            sequential[2].weight.copy_(pair.second)
            sequential[2].bias.copy_(pair.bias)
    return model.to(device).eval().requires_grad_(False)


class _Pair:
    """One Linear(C, H) - ReLU - Linear(H, C) - softmax of the autoencoder on views of the flat parameters: the first
    layer as a (C + 1) x H block (its weight transposed, then its bias: one product with the input and a row of ones
    gives the layer's output, and one the weight's and the bias's gradients), the second as its C x H weight and C
    bias. Samples are columns (C x N, H x N), the layout in which these products with C = 10 run fastest on the CPU
    (``benchmarks/cae_autoencoder.py``); activations live in buffers kept per batch size."""

    @staticmethod
    def size(classes: int, hidden: int) -> int:
        return (classes + 1) * hidden + classes * hidden + classes

    def __init__(self, flat: torch.Tensor, grad: torch.Tensor, index: int, classes: int, hidden: int):
        size, c, h = self.size(classes, hidden), classes, hidden
        self.first, self.second, self.bias = _views(flat[index * size:(index + 1) * size], c, h)
        self.grads = _views(grad[index * size:(index + 1) * size], c, h)
        self.buffers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """softmax over the classes of each column of ``x`` (C x N) through the pair."""
        n = x.shape[1]
        if n not in self.buffers:  # (the input with a row of ones, the ReLU's output), reused at every step
            self.buffers[n] = (x.new_ones(x.shape[0] + 1, n), x.new_empty(self.first.shape[1], n))
        ones, hidden = self.buffers[n]
        ones[:-1].copy_(x)
        torch.mm(self.first.t(), ones, out=hidden).relu_()
        return torch.addmm(self.bias[:, None], self.second, hidden).softmax(0)

    def backward(self, upstream: torch.Tensor, *, inputs: bool) -> torch.Tensor | None:
        """Given the loss's gradient for the second layer's output (C x N), write every parameter's gradient; with
        ``inputs``, return the gradient for the input (C x N)."""
        ones, hidden = self.buffers[upstream.shape[1]]
        first, second, bias = self.grads
        torch.mm(upstream, hidden.t(), out=second)
        torch.sum(upstream, 1, out=bias)
        back = torch.mm(self.second.t(), upstream)
        back = torch.ops.aten.threshold_backward.grad_input(back, hidden, 0, grad_input=back)  # the ReLU's gradient
        torch.mm(ones, back.t(), out=first)
        return torch.mm(self.first[:-1], back) if inputs else None


def _views(flat: torch.Tensor, c: int, h: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A pair's (first layer (C + 1) x H, second layer's weight C x H, its bias C) in its slice of the flat buffer."""
    first, second, bias = flat.split([(c + 1) * h, c * h, c])
    return first.view(c + 1, h), second.view(c, h), bias


def _loss_gradients(y: torch.Tensor, fake: torch.Tensor, decoded: torch.Tensor, strength: float
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For the loss 10 CE(decoded, y) - lambda H(fake) - CE(fake, y) (``CrossEntropyLoss`` on the softmax outputs as
    logits, mean over the N columns; H the mean of -f log(f + 1e-6) over the N C entries), with d/dx CE(x, y) =
    (softmax(x) sum(y) - y) / N: the entropy's term of d loss / d fake, the gradient for the decoder's last layer
    (through its softmax) and the cross-entropy's term of d loss / d fake, each C x N."""
    n = y.shape[1]
    total = y.sum(0, keepdim=True)
    grad = (decoded.softmax(0) * total - y) * (10.0 / n)
    grad = decoded * (grad - (grad * decoded).sum(0, keepdim=True))
    shifted = fake + 1e-6
    entropy = (shifted.log() + fake / shifted) * (strength / fake.numel())
    return entropy, grad, (fake.softmax(0) * total - y) * (1.0 / n)


class ConfusionalAutoencoder(TrainingDefense):
    """Train on the label autoencoder's fake soft labels; decode the predictions."""

    Options = CAEOptions
    hook_points = frozenset({ACTIVE_BATCH, PREDICTIONS})
    reads_labels = True
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0, low=0.0, high=100.0, search=(0.05, 2.0), log=True)
    audit_strengths = {"finetune": (0.1, 0.5, 1.0)}
    #: 1: the autoencoder's gradients written out (the same recipe and loss; float rounding, carried through its 4700
    #: Adam steps, makes another autoencoder than autograd's: benchmarks/results/audit_profile.md); 2: its label rows
    #: sharpened in log space (equal up to float rounding where p^(1/T) did not underflow); 3: sharpened as
    #: (p / max p)^(1/T) (:func:`sharpen`: finite too, and as exact as p^(1/T) on few classes)
    revision = 3
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
