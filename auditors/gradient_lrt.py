"""The likelihood-ratio auditor of dp-gaussian: Nasr et al. 2021's intermediate-model adversary, a label-DP game.

Threat model (Nasr et al.'s adversary with access to every intermediate model, white box, with natural inputs: the
canaries are real samples with a uniform random label, nothing is crafted, since label-DP's neighbouring relation
changes one label and nothing else). It knows every label the active party trains with except the canaries', the
initial state (every party's initialisation, the batches, the features), and everything dp-gaussian releases: at every
private update the noisy update of the active party's parameters and the noisy rows of the gradient messages (the
active party's intermediate states are functions of them). Those releases are exactly what dp-gaussian's accountant
composes over, so whatever this auditor certifies bounds the claim from below; it is not what a passive party sees
(it never sees the active party's updates, nor the other labels), so it measures the mechanism, never a leakage.

The test. At each update, for a canary i of the batch and each candidate label c, the auditor computes what
dp-gaussian computes (``defenses.dp_gaussian.per_sample_gradients`` and ``joint_scale``: the per-sample gradient of the
cross-entropy with respect to the active party's parameters and the sample's rows, jointly clipped to C) from the
state the update starts from: v_i(c) = (u_i(c), r_i(c)), its parameter part and its row. The release is
U = sum over the batch of u_j(y_j) + N(0, (sigma C)^2 I) (the update times the batch size) and, per sample,
R_i = r_i(y_i) + N(0, (sigma C)^2 I) (the row it is sent, times the batch size). The auditor subtracts the known
samples' u_j(y_j) from U (their sum as dp-gaussian computed it for its update, handed over at the hook point,
``AuditRead``: the same numbers, not computed twice), and the other canaries' expected u_k under its current belief
about their labels (a mean field: their posterior from the earlier updates), and adds, per candidate, the Gaussian
log-likelihood

    log p(U, R_i | y_i = c) = (<U - others, u_i(c)> + <R_i, r_i(c)> - ||v_i(c)||^2 / 2) / (sigma C)^2 + const,

summed over every update that reads the canary (each epoch's exchange and FedBCD's local updates, which release an
update and no row). Its guess is the candidate of largest summed log-likelihood; its confidence, that candidate's
posterior under a uniform prior, orders the guesses for the canary audit's abstention menu. The other canaries' labels
are unknown to it, so the mean field is an approximation; any guess computed from the releases and the public state is
a valid guesser, so approximations cost power, never soundness.

Crafted canaries (``canary_inputs: crafted``; Nasr et al.'s adversaries that craft the canary's input or gradient,
such as their "dirac" gradient canary, moved to the label-DP game). The game: the auditor plays the DP adversary and a
malicious passive party at once. Its canaries are still the canary audit's (real samples whose label is drawn
uniformly from the K classes by the canary key, which the auditor never reads); what it adds is control of the rows the
first passive party sends for them: at every exchange it replaces each canary's row by :func:`uniform_logit_rows`'s,
a row of norm about 100 C that makes the canary's logits equal and whose large part lies in the null space of that
party's block of the top (one direction per canary of the batch), computed from the active party's current top and
the other parties' rows. So every candidate's joint gradient is clipped to norm exactly C and the ten candidates sit
at the regular simplex, the most separated ten vectors of norm C can be, in directions no other canary shares.
Why this is within the claim's threat model: dp-gaussian claims label DP against whoever sees its releases, whatever
the other data are. Its neighbouring relation changes one label and holds every feature and every passive party's
embedding fixed, so the passive parties' rows are part of the dataset DP quantifies over, chosen by the adversary; and
the top it crafts from is a function of the earlier noisy releases and the initial state (adaptive composition: each
update's input may be chosen from the earlier outputs). The claim is for any passive party, malicious ones included,
so a row a malicious passive party may send is a valid canary. What it costs: the active party trains on rows of norm
100 C for the canaries (the trained model is not the natural one, so this mode measures the mechanism only), and it
needs the Linear top (``finetune.top: linear``, ``top_depth`` 0) and passive embeddings wider than the classes (a null
direction); the planner refuses other settings. The statistic is unchanged: the likelihood of the releases under each
candidate, computed from the graph the crafted rows went through.

Pair canaries (``partition.canary_labels: pair``, with crafted inputs: the two-candidate game). Each canary's label is
drawn uniformly from two classes (a, b): the pair is public (drawn from the partition's seed), the choice is the secret
(the canary key's stream, which no attack can replay). The crafted row then makes the logits equal on a and b and 30
lower on every other class (:func:`pair_targets`), so p = (e_a + e_b) / 2 and the two candidates' joint gradients are
exactly antipodal, each clipped to C: 2C apart, the sensitivity dp-gaussian's accountant charges for every update (it
claims no subsampling amplification, so that the auditor knows which updates read its canary costs the claim nothing).
Under the exact Gaussian releases each canary's log-likelihood ratio is then N(+-mu / 2, 1) with mu = 2 sqrt(U) / sigma
over its U updates (the canaries' parameter parts lie in different null directions; the shared rest is O(1 / 100) of
them and handled by the mean field): the game is tight for the mechanism's exact GDP curve, which is what the f-DP
one-run bound (``vflpriv.common.fdp_one_run``) tests. Why within the claim: label DP's neighbouring relation is any one
label changed, and a <-> b is one label changed; restricting a canary's prior to two classes is the audit's own
randomisation (DP holds for every pair of neighbouring label sets, so for these), and the adversary's knowledge of the
pair is knowledge of the rest of the dataset, which DP allows it. The auditor computes and scores only each canary's
candidates (its posterior is uniform over them at the start, -inf elsewhere), and every bound uses C = 2.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from vflpriv.auditors.base import Auditor
from vflpriv.auditors.crafted import CRAFT_NORM, pair_targets, uniform_logit_rows
from vflpriv.common.empirical_epsilon import FINE_KEEP, KEEP
from vflpriv.config.options import Options
from vflpriv.defenses.dp_gaussian import GaussianDP, joint_scale, per_sample_gradients
from vflpriv.engine.hooks import AUDIT_EMBEDDINGS, AUDIT_UPDATE, ActiveUpdate, AuditRead

#: The passive party whose rows a crafting auditor controls: the first (one malicious passive party suffices).
CRAFTING_PARTY = 1


class GradientLRTOptions(Options):
    canary_inputs: Literal["natural", "crafted"] = Field(
        "natural", description="natural: the canaries' rows are what their features give; crafted: the first passive "
        "party sends rows of norm 100 C with equal logits, so each candidate label's clipped gradient reaches C at the "
        "simplex geometry (a malicious passive party; the trained model is not the natural one); with "
        "partition.canary_labels: pair, the two candidates' gradients are antipodal, 2 C apart")
    menu: Literal["standard", "fine"] = Field(
        "standard", description="the abstention menu its guesses are scored with: standard keeps every guess, the "
        "most confident half, quarter and tenth; fine adds the most confident 3% and 1% (for audits pooling tens of "
        "thousands of canaries, where the tenth caps the bound; a Bonferroni factor 6/4 at small counts)")


class GradientLRT(Auditor):
    """A likelihood-ratio test on every noisy update and row dp-gaussian releases, per canary and candidate label."""

    Options = GradientLRTOptions

    privileges = ("every label the active party trains with but the canaries'",
                  "the initial state: every party's initialisation, the batches and the features",
                  "the active party's state at every private update, and the noisy update and rows each releases")
    threat_model = ("Nasr et al. 2021's intermediate-model (white-box) adversary of the label-DP game, with natural "
                    "canaries (a real sample, a uniform random label) or, with canary_inputs: crafted, canaries whose "
                    "rows a malicious passive party crafts (with partition.canary_labels: pair, each canary's two "
                    "candidate gradients antipodal at C), and a likelihood-ratio distinguisher; an auditor of "
                    "dp-gaussian's claim, not a party's attack")
    anchor = ("Nasr et al. 2021 (adversary instantiation); Steinke, Nasr & Jagielski 2023 (one training run); "
              "Mahloujifar, Melis & Chaudhuri 2024 (f-DP in one run: pair canaries, and k candidates for ten-class ones)")

    def __init__(self, options):
        super().__init__(options)
        self.defense: GaussianDP | None = None
        self.scores = torch.zeros(0, 0)

    @classmethod
    def audits(cls, defense: type) -> bool:
        return issubclass(defense, GaussianDP)

    def menu(self) -> tuple[float, ...]:
        return FINE_KEEP if self.options.menu == "fine" else KEEP

    @property
    def crafted(self) -> bool:
        return self.options.canary_inputs == "crafted"

    def hook_points(self) -> frozenset[str]:
        return frozenset({AUDIT_UPDATE, AUDIT_EMBEDDINGS} if self.crafted else {AUDIT_UPDATE})

    def refuses(self, config, *, classes: int) -> str:
        """Crafted rows need the Linear top (their null directions) and embeddings wider than the classes."""
        if not self.crafted:
            return ""
        if (config.finetune.top, config.finetune.top_depth) != ("linear", 0):
            return "canary_inputs: crafted crafts rows for the Linear top; set finetune.top=linear, top_depth=0"
        if config.model.out_dim <= classes:
            return (f"canary_inputs: crafted needs passive embeddings wider than the {classes} classes (a null "
                    f"direction of the top); model.out_dim is {config.model.out_dim}")
        return ""

    def audit_embeddings(self, ids: torch.Tensor, local: list[torch.Tensor], top: nn.Module) -> list[torch.Tensor]:
        """Crafted mode: the crafting party's canary rows replaced (:func:`uniform_logit_rows`); it trains on none of
        them (they are constants in its graph)."""
        if not self.crafted:
            return local
        mine = (self.canary[ids] >= 0).nonzero().flatten()
        if mine.numel() == 0:
            return local
        pairs = self.candidates[self.canary[ids[mine]]] if self.candidates.shape[1] == 2 else None
        rows = uniform_logit_rows(top.linear, local, mine, CRAFTING_PARTY, norm=CRAFT_NORM * self.defense.options.clip,
                                  targets=None if pairs is None else pair_targets(pairs, self.classes))
        sent = local[CRAFTING_PARTY].index_put((mine,), rows.to(local[CRAFTING_PARTY].dtype))
        return [*local[:CRAFTING_PARTY], sent, *local[CRAFTING_PARTY + 1:]]

    def bind(self, defense, *, labels: torch.Tensor, canaries: torch.Tensor, classes: int,
             candidates: torch.Tensor | None = None) -> None:
        """The scores start at the log prior: uniform over each canary's candidates, -inf elsewhere."""
        self.defense, self.classes, self.labels, device = defense, classes, labels, labels.device
        self.canary = torch.full_like(labels, -1)  # each training row's canary index, -1 for the others
        self.canary[canaries.to(device)] = torch.arange(canaries.numel(), device=device)
        if candidates is None:
            candidates = torch.arange(classes, device=device).expand(canaries.numel(), -1)
        self.candidates = candidates.to(device)
        self.scores = torch.full((canaries.numel(), classes), -torch.inf, device=device, dtype=torch.float64)
        self.scores.scatter_(1, self.candidates, 0.0)

    def audit_update(self, update: ActiveUpdate) -> AuditRead | None:
        """Each canary's candidates (what dp-gaussian would compute for each of its labels); the known samples' part of
        the release is dp-gaussian's own clipped sum over them (``AuditRead``: the same per-sample gradients, computed
        once), subtracted when the update is released."""
        index = self.canary[update.ids]
        inside = index >= 0
        if not bool(inside.any()):
            return None
        known, mine = (~inside).nonzero().flatten(), inside.nonzero().flatten()
        n, canaries = update.ids.numel(), index[mine]
        options = self.candidates[canaries]  # each canary's candidate labels (public): only theirs are computed
        c, k = options.shape[1], mine.numel()
        owners = mine.repeat_interleave(c)
        losses = nn.functional.cross_entropy(update.logits[owners], options.flatten(), reduction="none")
        grads, rows = per_sample_gradients(losses, update.params, update.leaves, owners=owners, retain=True)
        scale = joint_scale(grads, rows, clip=self.defense.options.clip)
        reached = [i for i, g in enumerate(grads) if g is not None]
        candidates = (torch.cat([grads[i].flatten(1) for i in reached], dim=1) * scale[:, None]).view(k, c, -1)
        own_rows = (torch.cat([rows[p] for p in update.leaves], dim=1) * scale[:, None]).view(k, c, -1) \
            if update.leaves else None

        def released(known_sums: list[torch.Tensor | None]) -> None:
            noise = self.defense.sigma * self.defense.options.clip
            known_sum = torch.cat([known_sums[i] for i in reached])
            release = torch.cat([update.params[i].grad.flatten() for i in reached]) * n - known_sum
            belief = torch.softmax(self.scores[canaries].gather(1, options), dim=1).to(candidates.dtype)
            expected = torch.einsum("kc,kcp->kp", belief, candidates)
            observed = release[None] - (expected.sum(0, keepdim=True) - expected)  # less the other canaries' mean
            linear = torch.einsum("kp,kcp->kc", observed, candidates)
            square = candidates.pow(2).sum(-1)
            if own_rows is not None:
                sent = torch.cat([leaf.grad[mine] for leaf in update.leaves.values()], dim=1) * n
                linear = linear + torch.einsum("kr,kcr->kc", sent, own_rows)
                square = square + own_rows.pow(2).sum(-1)
            step = ((linear - square / 2) / max(noise, 1e-12) ** 2).double()
            self.scores[canaries] = self.scores[canaries].scatter_add(1, options, step)

        return AuditRead(known, released)

    def guesses(self) -> tuple[torch.Tensor, torch.Tensor]:
        posterior = torch.softmax(self.scores, dim=1)
        confidence, guess = posterior.max(1)
        return guess.cpu(), confidence.cpu()
