"""One-shot and few-shot VFL (paper 002, Sun et al., Algorithms 1-2, Eq. 4-11; REFERENCE.md §7).

The label holder (the active party) plays the server. Every message goes through the channel in the
finetuning phase (the method has no separate pretraining: its whole protocol trains the model).

One-shot (Algorithm 1), per passive party: three messages.
  (1) up: the representations H_o of the aligned labeled samples (kind ``embedding``), from freshly
      initialised extractors;
  (2) down: dLoss/dH_o through the server's untrained classifier (kind ``gradient``);
  (3) the party runs k-means (k = C) on those gradients; the cluster indices are temporary labels (line 28);
  (4) it trains its extractor and a local head with semi-supervised learning on (X_o, temporary labels) and
      its other local samples X_u (Eq. 4): FixMatch for image halves, FixMatch-tab for tabular parties;
  (5) up: H_o again; (6) the server trains its classifier on the received representations (lines 22-27).
Few-shot adds Algorithm 2: the upload (5) also carries H_u (one message, so the count per passive party is
the paper's Table 1: 3 for one-shot, 5 for few-shot); the server fits an auxiliary classifier on each
party's H_o alone and the joint classifier, estimates the missing parties' representations of each
unaligned sample by scaled dot-product attention over the aligned ones (Eq. 10), and sends each party the
probability of giving each unaligned sample a pseudo-label (Eq. 8-9; kind ``probabilities``); the party
samples those samples, labels them with its own local model (Alg. 2 line 11), retrains with the expanded
labeled set (Eq. 11) and uploads H_o once more.

Choices (all documented options): the number of classes C is common knowledge, as the paper's conclusion
says, not a message of its own; the active party, which holds the true labels, trains its own extractor
with them instead of clusters (``server: label-holder``; ``feature-less`` is the paper's server, which has no
extractor: party 0's extractor then clusters its own gradient like every client, and only the server's
classifier sees a true label); clustering is k-means on the raw gradients (the algorithm; the ``gc``
attack normalises by default); batch 32, learning rates 0.01 (§5.1), SGD with momentum 0.9 and weight
decay 5e-4, tau 0.95 and lambda_u 1 (FixMatch's); r_m 0.2 and sigma 0.1 (§5.1); the client and server
epochs E_c = 10, E_s = 20 and the threshold t = 0.95 of Eq. 9 are not given in the paper. Optional
end-to-end split learning afterwards (§5, "Few-shot VFL +finetune") with ``finetune_end_to_end``.

A passive party's feature defenses (``nopeek``, ``mid-sender``, ``fi-adversarial``, ``embedding-dp``) act where its
own loop has their points: ``passive_bottom`` wraps each passive extractor once, before the first upload (1), so every
upload (1), (5), few-shot's H_u and the test embeddings are sent from the wrapped module, which the local SSL (4)
trains; ``passive_loss`` (phase finetune) adds its terms to the local SSL loss, from the loop's inputs of the batch
(its weak and strong views) and the extractor's outputs on them, as a pretraining's SSL loss does. The loop has no
``passive_backward``: a passive party never updates from a received gradient (the one it receives is clustered into
temporary labels, line 28), so ``embedding-dp`` acts here by its rows alone, and with no training epsilon: the local
SSL trains the extractor on the party's features outside its mechanism (``feature_uses``).
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.options import Options
from vflpriv.engine import (
    ACTIVE,
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    PASSIVE_BOTTOM,
    PASSIVE_LOSS,
    PASSIVE_STEP,
    PROBABILITIES,
    SPLIT_LEARNING,
    Federation,
    Message,
    PassiveStep,
    Traffic,
)
from vflpriv.methods.base import SHARED_LOOP, Method
from vflpriv.methods.finetune import Trained, finetune, new_top
from vflpriv.models.encoders import build_encoder, init_parameters
from vflpriv.models.kmeans import kmeans
from vflpriv.models.ssl.fixmatch import party_views, train_fixmatch
from vflpriv.models.training import fit_classifier


class OneShotOptions(Options):
    batch_size: int = Field(32, ge=2, description="B, clients and server (paper §5.1: 32)")
    client_lr: float = Field(0.01, gt=0, description="eta_c (paper: 0.01)")
    server_lr: float = Field(0.01, gt=0, description="eta_s (paper: 0.01)")
    client_epochs: int = Field(10, ge=1, description="E_c, epochs of local SSL over the unlabeled samples (unstated)")
    server_epochs: int = Field(20, ge=1, description="E_s, epochs of the server's classifier (unstated)")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (FixMatch)")
    weight_decay: float = Field(5e-4, ge=0, description="weight decay of local SSL (FixMatch)")
    threshold: float = Field(0.95, ge=0, le=1, description="FixMatch confidence threshold tau")
    lambda_u: float = Field(1.0, ge=0, description="weight of the unlabeled loss, Eq. 4 (FixMatch: 1)")
    mask_rate: float = Field(0.2, ge=0, le=1, description="r_m of FixMatch-tab, Eq. 5 (paper: 0.2)")
    sigma: float = Field(0.1, ge=0, description="noise std of FixMatch-tab's strong view, Eq. 5-6 (paper: 0.1)")
    kmeans_restarts: int = Field(10, ge=1, description="k-means++ restarts; the lowest inertia wins")
    finetune_end_to_end: bool = Field(False, description="end-to-end split learning afterwards (paper §5 variant)")
    server: Literal["label-holder", "feature-less"] = Field(
        "label-holder", description="label-holder: party 0 trains its own extractor on its true labels; feature-less: "
        "the paper's server, which holds labels but no extractor, so party 0's extractor clusters its own gradient like "
        "every client and no extractor sees a true label (finding M3)")


class FewShotOptions(OneShotOptions):
    confidence: float = Field(0.95, ge=0, le=1, description="t of Eq. 9 (unstated; FixMatch's tau)")


class LocalModel(nn.Module):
    """A party's extractor f_k and the local head its semi-supervised training needs (C outputs)."""

    def __init__(self, extractor: nn.Module, num_classes: int):
        super().__init__()
        self.extractor = extractor
        self.head = nn.Linear(extractor.out_dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.extractor(x))


def sdpa(h_u: Tensor, h_o_own: Tensor, h_o_other: Tensor) -> Tensor:
    """Eq. 10: softmax(H_u^A H_o^A^T / sqrt(d)) H_o^B, each row a convex combination of the rows of H_o^B."""
    weights = torch.softmax(h_u @ h_o_own.T / math.sqrt(h_u.shape[1]), dim=1)
    return weights @ h_o_other


def pseudo_label_probability(local: Tensor, joint: Tensor, *, threshold: float) -> Tensor:
    """Eq. 9 from the class probabilities of Eq. 8: p_joint where both predictions agree and both exceed t, else 0."""
    p_local, y_local = local.max(1)
    p_joint, y_joint = joint.max(1)
    return ((y_local == y_joint) & (p_local > threshold) & (p_joint > threshold)).to(joint.dtype) * p_joint


class OneShotVFL(Method):
    """One-shot VFL: three messages per passive party, then the server trains its classifier."""

    Options: ClassVar[type[OneShotOptions]] = OneShotOptions
    sends: ClassVar[Traffic] = SPLIT_LEARNING  # embeddings up, gradients down, test embeddings up
    #: Its own protocol: the server's Linear classifier. A passive party receives one gradient (for the batch of
    #: every labeled aligned sample) and clusters it instead of applying it: the observe hook point is called then.
    #: A passive party's defenses wrap its extractor and add to its local SSL loss (no ``passive_backward``: no
    #: update is made from a received gradient).
    supports: ClassVar[frozenset[str]] = frozenset({"top:linear", PASSIVE_STEP, PASSIVE_BOTTOM, PASSIVE_LOSS})

    def supported(self) -> frozenset[str]:
        """With ``finetune_end_to_end`` the shared loop runs afterwards, with its hook points (Linear top kept)."""
        if self.options.finetune_end_to_end:
            return SHARED_LOOP - {"top:mlp", "top:sum"}
        return self.supports

    def label_uses(self) -> tuple[str, ...]:
        """Its protocol, before any end-to-end loop (``finetune_end_to_end`` runs that loop after it, from its top)."""
        uses = ["the gradient of the server's untrained classifier's loss on the clean labels is sent to every "
                "passive party (Alg. 1 lines 5-7)",
                "the server's classifier, the top the end-to-end loop starts from, is trained on the clean labels "
                "(lines 22-27)"]
        if self.options.server == "label-holder":
            uses.append("party 0's extractor trains on the clean labels (server: label-holder)")
        return tuple(uses)

    def feature_uses(self) -> tuple[str, ...]:
        """Its protocol trains every extractor on its party's features outside the defenses' mechanisms."""
        return ("each passive party trains its extractor on its own features by local semi-supervised learning (Alg. 1 "
                "lines 29-34; few-shot: with its pseudo-labeled unaligned samples, Alg. 2), with no DP-SGD",)

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        o, seed = self.options, fed.generator.initial_seed()
        models = [self._local_model(fed, p.index, seed) for p in fed.parties]
        for p in fed.passive:  # its defenses wrap the extractor it sends from and trains (once, before any upload)
            models[p.index].extractor = fed.hooks.passive_bottom(p.index, models[p.index].extractor)
        ids = fed.labeled_aligned()
        y = fed.active.labels[ids]
        top = init_parameters(new_top(fed, [m.extractor for m in models]), generator=seeded_generator(seed, "server:init"))
        sent: list[Tensor] = []
        grads = self._gradients(fed, self._upload(fed, models, ids, sent=sent), top, ids, y)  # (1) up, (2) down
        own = grads.pop(ACTIVE)  # party 0's gradient of its own H_o: it never crosses the channel
        self._observe(fed, models, ids, grads, sent)
        clustered = grads if o.server == "label-holder" else {ACTIVE: own, **grads}
        self.temporary_labels = {ACTIVE: y, **{k: kmeans(g, k=fed.num_classes, n_init=o.kmeans_restarts,  # (3)
                                                         generator=seeded_generator(seed, f"client:{k}:kmeans")).labels
                                               for k, g in clustered.items()}}
        unlabeled = [p.local_ids[~torch.isin(p.local_ids, ids)] for p in fed.parties]
        for p, model in zip(fed.parties, models):  # (4)
            self._local_ssl(fed, model, p.index, p.x_train[ids], self.temporary_labels[p.index],
                            p.x_train[unlabeled[p.index]], seed=seed, round_=0)
        self._expand(fed, models, ids, y, top, unlabeled, seed)
        reps = self._upload(fed, models, ids)  # (5) one-shot; few-shot: Alg. 2 line 19
        self._train_server(top, reps, y, seed=seed, stream="server:train")  # (6)
        bottoms = [m.extractor for m in models]
        if o.finetune_end_to_end:
            return finetune(fed, bottoms, top, first_epoch=1, wrapped=True)
        return Trained(bottoms, top)

    # ------------------------------------------------------------------------------------------ steps

    def _local_model(self, fed: Federation, party: int, seed: int) -> LocalModel:
        g = seeded_generator(seed, f"client:{party}:init")
        extractor = build_encoder(fed.parties[party].spec, fed.model, generator=g)
        return init_parameters(LocalModel(extractor, fed.num_classes), generator=g).to(fed.device)

    def _upload(self, fed: Federation, models: list[LocalModel], ids: Tensor, *, unaligned: list | None = None,
                sent: list | None = None) -> list:
        """Every party's H_o as the server holds it: its own, and each passive party's through the channel
        (with H_u in the same message when ``unaligned`` is given: few-shot's second upload); ``sent`` gets each
        party's H_o as it computed it, before the channel."""
        out = []
        with torch.no_grad():
            for p, model in zip(fed.parties, models):
                model.eval()
                h_o = model.extractor(p.x_train[ids])
                h_u = model.extractor(p.x_train[unaligned[p.index]]) if unaligned is not None else None
                if sent is not None:
                    sent.append(h_o)
                if p.index != ACTIVE:
                    payload = h_o if h_u is None else {"aligned": h_o, "unaligned": h_u}
                    received = fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, payload,
                                                        ids if h_u is None else None))
                    h_o, h_u = (received, h_u) if h_u is None else (received["aligned"], received["unaligned"])
                out.append(h_o if unaligned is None else (h_o, h_u))
        return out

    def _gradients(self, fed: Federation, reps: list[Tensor], top: nn.Module, ids: Tensor, y: Tensor) -> dict:
        """dLoss/dH_o^k through the untrained classifier, sent to each passive party (Alg. 1 lines 5-7), and party
        0's own (kept)."""
        held = [h.clone().requires_grad_() for h in reps]
        nn.functional.cross_entropy(top(held), y).backward()
        top.zero_grad(set_to_none=True)
        return {ACTIVE: held[ACTIVE].grad,
                **{p.index: fed.channel.send(Message(GRADIENT, FINETUNE, ACTIVE, p.index, held[p.index].grad, ids, 0))
                   for p in fed.passive}}

    @staticmethod
    def _observe(fed: Federation, models: list[LocalModel], ids: Tensor, grads: dict, sent: list[Tensor]) -> None:
        """The observe hook point: each passive party holds the gradient of the embedding it sent (epoch 0, step 0)."""
        for p in fed.passive:
            fed.hooks.passive_step(PassiveStep(p.index, 0, 0, ids, p.x_train[ids], models[p.index].extractor,
                                               sent[p.index], grads[p.index]))

    def _local_ssl(self, fed, model, party, x, y, u, *, seed: int, round_: int) -> None:
        o = self.options
        p = fed.parties[party]
        views = party_views(p.spec, p.x_train[p.local_ids], mask_rate=o.mask_rate, sigma=o.sigma)
        term = None if party == ACTIVE else lambda inputs, h: fed.hooks.passive_loss(party, FINETUNE, inputs, h)
        train_fixmatch(model, x, y, u, views, epochs=o.client_epochs, batch_size=o.batch_size, lr=o.client_lr,
                       momentum=o.momentum, weight_decay=o.weight_decay, threshold=o.threshold, lambda_u=o.lambda_u,
                       batches=seeded_generator(seed, f"client:{party}:ssl:{round_}:batches"),
                       augment=seeded_generator(seed, f"client:{party}:ssl:{round_}:views"), term=term)

    def _train_server(self, model: nn.Module, reps: list[Tensor], y: Tensor, *, seed: int, stream: str) -> None:
        """SGD on received representations (Alg. 1 lines 22-27; Alg. 2 line 2 for the auxiliary classifiers)."""
        o = self.options
        features = torch.cat(reps, dim=1) if isinstance(reps, list) else reps
        head = model.linear if hasattr(model, "linear") else model
        fit_classifier(head, features, y, epochs=o.server_epochs, lr=o.server_lr, weight_decay=0.0,
                       batch_size=o.batch_size, generator=seeded_generator(seed, stream), optimizer="sgd",
                       what="server's classifier")

    def _expand(self, fed, models, ids, y, top, unlabeled, seed) -> None:
        """Between the local SSL and the final upload: nothing in one-shot VFL."""


class FewShotVFL(OneShotVFL):
    """Few-shot VFL: one-shot plus representation estimation and pseudo-labels (Alg. 2); five messages per passive party."""

    Options = FewShotOptions
    sends = SPLIT_LEARNING | {("active", PROBABILITIES, FINETUNE)}

    def label_uses(self) -> tuple[str, ...]:
        return (*super().label_uses(), "the pseudo-label probabilities sent to every passive party come from the "
                "server's classifiers trained on the clean labels (Alg. 2, Eq. 8-9)")

    def feature_uses(self) -> tuple[str, ...]:
        """Declared beside ``_expand`` (read): its local SSL on the pseudo-labeled unaligned samples is the use the
        one-shot declaration names."""
        return super().feature_uses()

    def _expand(self, fed, models, ids, y, top, unlabeled, seed) -> None:
        """Alg. 2: H_o and H_u up, the server's probabilities down, each party's SSL on its expanded labeled set."""
        o, parties = self.options, fed.parties
        uploads = self._upload(fed, models, ids, unaligned=unlabeled)
        h_o, h_u = [u[0] for u in uploads], [u[1] for u in uploads]
        self._train_server(top, h_o, y, seed=seed, stream="server:train:infer")  # Alg. 2 line 4
        self.pseudo_probabilities = {}
        for p in parties:
            k = p.index
            aux = init_parameters(nn.Linear(h_o[k].shape[1], fed.num_classes),
                                  generator=seeded_generator(seed, f"server:aux:{k}:init")).to(fed.device)
            self._train_server(aux, h_o[k], y, seed=seed, stream=f"server:aux:{k}:train")  # Alg. 2 line 2
            with torch.no_grad():
                estimated = [h_u[k] if j == k else sdpa(h_u[k], h_o[k], h_o[j]) for j in range(len(parties))]
                prob = pseudo_label_probability(aux(h_u[k]).softmax(1), top(estimated).softmax(1),
                                                threshold=o.confidence)
            if k != ACTIVE:
                prob = fed.channel.send(Message(PROBABILITIES, FINETUNE, ACTIVE, k, prob, None))
            self.pseudo_probabilities[k] = prob
            draw = seeded_generator(seed, f"client:{k}:pseudo")
            chosen = torch.rand(prob.shape, generator=draw, device=draw.device).to(fed.device) < prob.to(fed.device)
            x_u = p.x_train[unlabeled[k]]
            with torch.no_grad():
                pseudo = models[k].eval()(x_u[chosen]).argmax(1)  # the party's own prediction (Alg. 2 line 11)
            x_lab = torch.cat([p.x_train[ids], x_u[chosen]])
            y_lab = torch.cat([self.temporary_labels[k], pseudo])
            self._local_ssl(fed, models[k], k, x_lab, y_lab, x_u[~chosen], seed=seed, round_=1)  # Eq. 11
