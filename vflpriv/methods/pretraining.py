"""Shared machinery of the SSL pretraining methods (FedHSSL paper 000; REFERENCE.md §2-5).

Pieces, all built from ``vflpriv.models.ssl`` and ``vflpriv.models``:

- ``SSLOptions``: the pretraining settings every SSL method shares (optimiser, batch, views, SSL variant).
- the networks (``vflpriv.methods.towers``): ``Tower`` (encoder -> projector -> predictor), ``LocalEncoder``
  (private bottom f_lb, shared top f_lt), ``PooledEncoder`` (0.5 f_c + 0.5 f_l); ``build_tower`` here.
- ``LocalSSL``: one party's local SSL state (online tower, EMA target, queue, optimiser) and its epoch of
  (cross-party-guided) local SSL, FedHSSL Eq. 6; with gamma = 0 and no cross branch it is plain local SSL.

Every random draw comes from an explicit generator. Methods derive named sub-streams from the seed of
``fed.generator`` (``initial_seed``, which consumes nothing), so pretraining never shifts the randomness of
finetuning and a cached pretraining gives the same finetuning as a fresh one.

Defaults vs the paper / the authors' code (all are options; keyword names in parentheses):

============================== ======================== ==========================================
setting                        vflpriv default          paper (code)
============================== ======================== ==========================================
global iterations              4 (global_iterations)    40; 10 on NUS-WIDE
FedLocal epochs                4 (epochs)               same budget as FedHSSL's local step
batch                          128 (batch_size)         512
lr                             0.05 * batch / 256       same rule (SGD momentum 0.9, wd 3e-5, cosine),
                               x 0.5 / (0.5 + gamma)    times the code's 0.5 / (local_ratio + gamma)
projector / predictor          w-w-w / w/4-w            same with w = 512; MoCo projector out 128 (min(128, w))
BYOL / MoCo EMA momentum       0.995 / 0.99             paper 0.995 / 0.99 (code 0.999)
MoCo                           tau 0.5, queue 4096      same
gamma                          0.5                      paper 0.5 (code default 0: guidance off)
tabular corruption             30%, both views          30%; the code keeps one view clean (clean_view)
image views                    crop (0.5, 1), flip      crop (0.3, 1), jitter (0.3, 0.3, 0.3, 0.1) p 0.8,
                                                        blur sigma U[0.1, 2] p 0.5, flip (fedhssl-paper)
============================== ======================== ==========================================

The embedded digits data is tiny (1437 training rows), so 4 global iterations at batch 128 (11 local steps
per party and iteration) keep one FedHSSL pretraining around 5 s on 2 cores while the SSL losses fall and the
finetuned accuracy rises above FedLocalSSL's and FedSplitNN's; raise ``global_iterations`` on real data.
Both views of a local batch go through the networks as one batch (one BatchNorm over 2B rows).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Literal, Sequence

import torch
from pydantic import Field, model_validator
from torch import Tensor, nn

from vflpriv.common.errors import ConfigError
from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.options import Options
from vflpriv.data.base import PartySpec
from vflpriv.engine import PRETRAIN, DefensePoints
from vflpriv.methods.towers import Tower
from vflpriv.models.encoders import init_parameters
from vflpriv.models.ssl import (
    FeatureRanges,
    MemoryQueue,
    byol_loss,
    corrupt_tabular,
    info_nce,
    make_augmenter,
    momentum_copy,
    momentum_updater,
    negative_cosine,
    predictor,
    projector,
    scarf_corrupt,
    stacked_views,
    symmetrized,
)
from vflpriv.models.ssl.augment import Augment
from vflpriv.models.ssl.losses import MIN_TEMPERATURE
from vflpriv.models.training import Optimizer, index_batches, make_optimizer

Flavour = Literal["simsiam", "byol", "moco"]
PairLoss = Callable[[Tensor, Tensor], Tensor]

#: Paper momentum of the EMA target (FedHSSL App. B-A): BYOL 0.995, MoCo 0.99.
PAPER_EMA = {"byol": 0.995, "moco": 0.99}


class SSLOptions(Options):
    """Pretraining settings shared by FedLocalSSL, FedCSSL, FedGSSL and FedHSSL.

    Defaults are sized for the embedded digits data on 2 CPU cores; the paper's values are given in
    each description (batch 512, 40 global iterations, lr 0.05 * batch / 256).
    """

    batch_size: int = Field(128, ge=2, description="pretraining batch (paper: 512)")
    lr: float | None = Field(
        None, gt=0, description="base learning rate; default lr_per_256 * batch_size / 256 (the code's rule)"
    )
    lr_per_256: float = Field(0.05, gt=0, description="learning rate per 256 samples (code: 0.05)")
    lr_rescale: bool = Field(
        True, description="multiply every pretraining lr by 0.5 / (0.5 + gamma), the code's pretrain_lr_ratio "
        "(local_ratio 0.5 = the 0.5 of Eq. 6's first term): the guidance term adds gamma to the loss's weight")
    optimizer: Literal["sgd", "adam"] = Field("sgd", description="sgd = SGD momentum 0.9 (code) or adam")
    weight_decay: float = Field(3e-5, ge=0, description="weight decay (code: 3e-5)")
    cosine: bool = Field(True, description="cosine decay of the lr over the pretraining epochs (code)")
    fixed_predictor_lr: bool = Field(
        True, description="keep the predictor's lr constant under cosine decay (SimSiam; the FedHSSL code)"
    )
    grad_clip: float = Field(5.0, ge=0, description="gradient-norm clip in local SSL, 0 = off (code: 5)")
    augment: Literal["auto", "image", "tabular", "scarf"] = Field(
        "auto",
        description="views: auto = image crop/flip for image parties, tabular corruption otherwise; tabular = "
        "corrupt features with Uniform(min, max) of the column (FedHSSL §V-A; images are flattened); "
        "scarf = values drawn from the column's empirical marginal",
    )
    corruption_rate: float = Field(0.3, ge=0, le=1, description="fraction of features corrupted (paper: 0.3)")
    clean_view: bool | Literal["tabular"] = Field(
        False, description="first view left clean: true for every party, tabular for tabular parties only (the "
        "authors' code: one clean view of tabular data, both views of an image augmented, TwoCropsTransform)")
    crop_scale: tuple[float, float] = Field((0.5, 1.0), description="random resized crop area range (images)")
    flip: bool = Field(True, description="random horizontal flip (images)")
    color_jitter: tuple[float, float, float, float] = Field(
        (0.0, 0.0, 0.0, 0.0), description="ColorJitter (brightness, contrast, saturation, hue) strengths (images; "
        "code: (0.3, 0.3, 0.3, 0.1)); saturation and hue act on colour images only, as torchvision's")
    jitter_p: float = Field(0.8, ge=0, le=1, description="probability of the colour jitter per view (code: 0.8)")
    blur_sigma: tuple[float, float] = Field(
        (0.0, 0.0), description="Gaussian blur sigma range in pixels, (0, 0) = off (images; code: (0.1, 2))")
    blur_p: float = Field(0.5, ge=0, le=1, description="probability of the blur per view (code: 0.5)")
    projector_hidden: int | None = Field(
        None, ge=1, description="projector hidden width; default the encoder's width (paper: 512 = its encoder's)")
    projector_dim: int | None = Field(
        None, ge=1, description="projector output; default the encoder's width, MoCo min(128, it) (paper: 512, MoCo 128)")
    predictor_hidden: int | None = Field(
        None, ge=1, description="predictor bottleneck; default a quarter of the encoder's width (paper: 128 of 512)")
    ema_momentum: float | None = Field(
        None, ge=0, le=1, description="EMA target momentum; default BYOL 0.995, MoCo 0.99 (paper; code 0.999)"
    )
    temperature: float = Field(0.5, ge=MIN_TEMPERATURE, description="MoCo InfoNCE temperature (paper: 0.5)")
    queue_size: int = Field(4096, ge=1, description="MoCo queue of negatives (paper: 4096)")

    @model_validator(mode="after")
    def _views_are_valid(self) -> SSLOptions:
        lo, hi = self.crop_scale
        if not 0.0 < lo <= hi <= 1.0:
            raise ValueError(f"crop_scale must satisfy 0 < low <= high <= 1, got {list(self.crop_scale)}")
        if min(self.color_jitter) < 0 or self.color_jitter[3] > 0.5:
            raise ValueError(f"color_jitter strengths must be >= 0 and hue <= 0.5, got {list(self.color_jitter)}")
        lo, hi = self.blur_sigma
        if not (lo == hi == 0.0 or 0.0 < lo <= hi <= 10.0):
            raise ValueError(f"blur_sigma must be (0, 0) (off) or 0 < low <= high <= 10 pixels, got {list(self.blur_sigma)}")
        return self

    def guidance(self) -> float:
        """gamma of Eq. 6: 0 for methods without cross-party-guided local SSL."""
        return 0.0

    @abstractmethod
    def ssl_epochs(self) -> int:
        """Passes of SSL over a party's samples in the whole pretraining (the adversary prior's budget)."""

    def base_lr(self) -> float:
        """The lr of every pretraining optimiser: ``lr`` (or the code's lr_per_256 * batch / 256) times the
        code's rescaling 0.5 / (0.5 + gamma) (``lr_rescale``; 1 without guidance)."""
        lr = self.lr if self.lr is not None else self.lr_per_256 * self.batch_size / 256
        return lr * 0.5 / (0.5 + self.guidance()) if self.lr_rescale else lr

    def out_dim(self, flavour: Flavour, width: int) -> int:
        """Projector output for an encoder of ``width`` units (REFERENCE §2's proportions by default)."""
        if self.projector_dim is not None:
            return self.projector_dim
        return min(128, width) if flavour == "moco" else width

    def hidden_widths(self, width: int) -> tuple[int, int]:
        """(projector hidden, predictor bottleneck) for an encoder of ``width`` units."""
        return self.projector_hidden or width, self.predictor_hidden or max(1, width // 4)

    def momentum(self, flavour: Flavour) -> float:
        return self.ema_momentum if self.ema_momentum is not None else PAPER_EMA.get(flavour, 0.0)


# ----------------------------------------------------------------------------------------------- models


def build_tower(
    encoder: nn.Module, flavour: Flavour, options: SSLOptions, *, generator: torch.Generator
) -> Tower:
    """Projector (and predictor unless MoCo) on top of ``encoder``, initialised from ``generator``."""
    out = options.out_dim(flavour, encoder.out_dim)
    proj_hidden, pred_hidden = options.hidden_widths(encoder.out_dim)
    proj = init_parameters(projector(encoder.out_dim, hidden=proj_hidden, out=out), generator=generator)
    pred = None
    if flavour != "moco":
        pred = init_parameters(predictor(out, hidden=pred_hidden), generator=generator)
    return Tower(encoder, proj, pred)


# ----------------------------------------------------------------------------------------------- losses


#: L_SSL(p, z) of Table II per SSL method, given the options and the MoCo negatives (None: in-batch NT-Xent).
PAIR_LOSSES: dict[str, Callable[[SSLOptions, Tensor | None], PairLoss]] = {
    "simsiam": lambda options, negatives: negative_cosine,
    "byol": lambda options, negatives: byol_loss,
    "moco": lambda options, negatives: partial(info_nce, temperature=options.temperature, negatives=negatives),
}


def pair_loss(flavour: Flavour, options: SSLOptions, *, negatives: Tensor | None = None) -> PairLoss:
    """L_SSL(p, z) of Table II; MoCo without ``negatives`` is NT-Xent with in-batch negatives."""
    if flavour not in PAIR_LOSSES:
        raise ConfigError(f"unknown SSL method {flavour!r}; choose {', '.join(PAIR_LOSSES)}")
    return PAIR_LOSSES[flavour](options, negatives)


# ----------------------------------------------------------------------------------------- optimisation


def make_pretrain_optimizer(tower: Tower, options: SSLOptions) -> Optimizer:
    """One optimiser over a tower; param groups carry ``cosine`` (the predictor's lr may stay fixed)."""
    lr = options.base_lr()
    pred = list(tower.predictor.parameters()) if tower.predictor is not None else []
    pred_ids = {id(p) for p in pred}
    rest = [p for p in tower.parameters() if p.requires_grad and id(p) not in pred_ids]
    groups = [{"params": rest, "cosine": options.cosine}]
    if pred:
        groups.append({"params": pred, "cosine": options.cosine and not options.fixed_predictor_lr})
    for g in groups:
        g["base_lr"] = lr
    return make_optimizer(groups, name=options.optimizer, lr=lr, weight_decay=options.weight_decay)


# ------------------------------------------------------------------------------------------------ views


def party_augmenter(spec: PartySpec, x_local: Tensor, options: SSLOptions) -> Augment:
    """The view function T of one party, fitted on its own local samples only."""
    kind = options.augment
    if kind == "auto":
        kind = "image" if spec.modality == "image" else "tabular"
    if kind == "image":
        if spec.modality != "image":
            raise ConfigError("augment=image needs an image party; use tabular or scarf")
        return make_augmenter(spec, x_local, crop_scale=options.crop_scale, flip=options.flip,
                              jitter=options.color_jitter, jitter_p=options.jitter_p,
                              blur_sigma=options.blur_sigma, blur_p=options.blur_p)
    if kind == "scarf":
        flat_pool = x_local.flatten(1)

        def scarf(x: Tensor, generator: torch.Generator) -> Tensor:
            return scarf_corrupt(x.flatten(1), flat_pool, rate=options.corruption_rate, generator=generator).view_as(x)

        return scarf
    if spec.modality == "tabular":
        return make_augmenter(spec, x_local, tabular="uniform", rate=options.corruption_rate)
    flat = x_local.flatten(1)  # an image party corrupted like a table: pixels are features
    ranges = FeatureRanges(flat.amin(dim=0), flat.amax(dim=0), 0)

    def corrupt(x: Tensor, generator: torch.Generator) -> Tensor:
        return corrupt_tabular(x.flatten(1), ranges, rate=options.corruption_rate, generator=generator).view_as(x)

    return corrupt


# ------------------------------------------------------------------------------------------- local SSL


@dataclass
class LocalSSL:
    """One party's local SSL: online tower (f_l, g_l, h_l), EMA target (BYOL/MoCo), queue (MoCo).

    ``epoch`` runs Eq. 6 over the party's local samples: 0.5 (L(p1, z~2) + L(p2, z~1)) plus, when a cross
    tower and gamma > 0 are given, gamma (L(p1, sg(g_c(f_c(v1)))) + L(p2, sg(g_c(f_c(v2))))) — the
    guidance targets are the cross branch's projector outputs (as in the code), computed without gradient
    (step 2 updates f_l and h_l only), in train mode as the code by default (``guide_mode``).
    """

    flavour: Flavour
    options: SSLOptions
    tower: Tower
    augment: Augment
    aug_generator: torch.Generator
    batch_generator: torch.Generator
    target: nn.Module | None = None
    queue: MemoryQueue | None = None
    clean_first: bool = False
    #: The party it trains, and the hook points whose ``passive_loss`` (phase pretrain) it adds to its SSL loss
    #: (``vflpriv.engine.hooks``: a passive party's defenses); None: none (a party pretraining alone, the prior).
    party: int = -1
    hooks: DefensePoints | None = None
    optimizer: Optimizer = field(init=False)
    online: nn.Module = field(init=False)

    def __post_init__(self) -> None:
        self.online = nn.Sequential(self.tower.encoder, self.tower.projector)
        if self.flavour in ("byol", "moco") and self.target is None:
            self.target = momentum_copy(self.online)
        self.optimizer = make_pretrain_optimizer(self.tower, self.options)

    @classmethod
    def create(
        cls,
        flavour: Flavour,
        options: SSLOptions,
        tower: Tower,
        x_local: Tensor,
        spec: PartySpec,
        *,
        seed: int,
        stream: str,
        device: torch.device,
        party: int = -1,
        hooks: DefensePoints | None = None,
    ) -> LocalSSL:
        """Named sub-streams ``stream:views|batches|queue`` of ``seed`` (views on ``device``); ``party`` and ``hooks``:
        the defense points of the party it trains (none by default)."""
        queue = None
        if flavour == "moco":
            queue = MemoryQueue(
                options.out_dim(flavour, tower.encoder.out_dim), size=options.queue_size,
                generator=seeded_generator(seed, f"{stream}:queue"), device=device,
            )
        return cls(
            flavour, options, tower, party_augmenter(spec, x_local, options),
            aug_generator=seeded_generator(seed, f"{stream}:views"),
            batch_generator=seeded_generator(seed, f"{stream}:batches"),
            queue=queue,
            clean_first=options.clean_view is True or (options.clean_view == "tabular" and spec.modality != "image"),
            party=party, hooks=hooks,
        )

    def epoch(
        self, x: Tensor, ids: Tensor, *, cross: Tower | None = None, gamma: float = 0.0, guide_mode: str = "train"
    ) -> list[Tensor]:
        """One pass over ``x[ids]`` in shuffled batches; returns the detached loss of each batch.

        With ``cross`` and ``gamma`` > 0, Eq. 6's guidance target is ``cross.project`` of the views (no gradient),
        computed in ``guide_mode``: ``train`` as the authors' code (``set_train`` puts every module, the cross branch
        included, in train mode: BatchNorm normalises the target per batch and refreshes the cross branch's running
        statistics on the local rows), or ``eval`` (running statistics; its targets share one direction: mean
        pairwise cosine 0.64-0.80 against 0.01-0.07 in train mode, ``../shared/FEDHSSL-CODE.md`` R1)."""
        opts = self.options
        tower = self.tower
        tower.train()
        guide = cross is not None and gamma > 0
        if guide:
            cross.train(guide_mode == "train")
        params = [p for p in tower.parameters() if p.requires_grad]
        m = opts.momentum(self.flavour)
        update_target = momentum_updater(self.online, self.target) if self.target is not None else None
        losses = []
        for batch in index_batches(ids, batch_size=opts.batch_size, generator=self.batch_generator):
            n = batch.numel()
            views = stacked_views(x[batch], self.augment, clean_first=self.clean_first, generator=self.aug_generator)
            h, z, p = tower.stages(views)
            if self.target is not None:
                with torch.no_grad():
                    t = self.target(views)
            else:
                t = z
            negatives = self.queue.negatives() if self.queue is not None else None
            loss_fn = pair_loss(self.flavour, opts, negatives=negatives)
            loss = symmetrized(loss_fn, p[:n], t[n:], p[n:], t[:n])
            if guide:
                with torch.no_grad():
                    c = cross.project(views)
                loss = loss + gamma * (loss_fn(p[:n], c[:n]) + loss_fn(p[n:], c[n:]))
            self.optimizer.zero_grad(set_to_none=True)
            with_defenses(loss, self.hooks, self.party, views, h).backward()
            if opts.grad_clip > 0:
                nn.utils.clip_grad_norm_(params, opts.grad_clip, foreach=True)
            self.optimizer.step()
            if update_target is not None:
                update_target(m=m)
            if self.queue is not None:
                self.queue.enqueue(t)
            losses.append(loss.detach())
        if guide:
            cross.train()
        return losses


def with_defenses(loss: Tensor, hooks: DefensePoints | None, party: int, views: Tensor, h: Tensor) -> Tensor:
    """``loss`` plus the terms party ``party``'s defenses add to it in pretraining (``passive_loss``, phase pretrain)
    from its ``views`` and its encoder's outputs ``h`` (``loss`` itself, bit for bit, where none does)."""
    term = hooks.passive_loss(party, PRETRAIN, views, h) if hooks is not None else None
    return loss if term is None else loss + term


def mean_loss(losses: Sequence[Tensor]) -> Tensor:
    return torch.stack(list(losses)).mean() if losses else torch.tensor(float("nan"))
