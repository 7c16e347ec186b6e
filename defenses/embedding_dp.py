"""embedding-dp: feature DP for a passive party's embeddings, per-row clipping and Gaussian noise on every row it sends
and, by default, DP-SGD on its bottom, with an RDP accountant (SecretFlow ``secretflow_fl/security/privacy/mechanism/
torch/layers.py`` ``GaussianEmbeddingDP`` is the anchor for the rows; ../shared/ANCHORS-FEATURES.md D2).

The mechanism. The victim's bottom ends in a layer (``passive_bottom``) that clips each row of the embedding to L2 norm
C (h <- h min(1, C / ||h||)) and adds N(0, sigma^2 C^2) to every entry, in float32 at least (a 16-bit bottom's rows are
rounded back after: post-processing; noise added in 16 bits reveals the row by its grid, Mironov 2012): what it sends in
finetuning and at inference. With ``private_bottom`` (the default), its bottom also trains by DP-SGD
(``passive_backward``): each sample's gradient of its own row's objective (the clipped row times the gradient the active
party sent for it), over every parameter of the bottom, is clipped to L2 norm C_g (``bottom_clip``) and N(0, sigma^2
C_g^2) is added to their sum before the mean over the batch; and the bottom's BatchNorm layers run on their running
statistics, frozen (a batch's statistics couple its rows: one sample's features would move every row of the message and
every sample's gradient, so neither bound below would hold; Opacus refuses BatchNorm for the same reason). Strength: the
noise multiplier sigma (higher is stronger); 0 is the identity (no clipping, no freezing, no DP-SGD), bit for bit.

The argument (``privacy_spent``; written for the README too):

- Neighbouring relation: two training sets that differ in one sample's features at the victim (replace-one). Labels, the
  other parties' features, alignment and batches are the same. A preprocessing fitted on the training rows
  (``VerticalDataset.fitted_features``) moves every row with one sample: no training epsilon (``covers_data``).
- Sensitivity: the premise is that each row, and each sample's part of a DP-SGD update, is a function of its own sample
  (BatchNorm frozen, no layer coupling rows, no state carried from earlier batches). vflpriv's own bottoms hold it by
  construction (``own_modules``: every module one of vflpriv's whose forward was read or a row-wise torch.nn layer, no
  callable held by an instance, BatchNorm only on running statistics, and every call of an admitted layer, in training
  and at inference, on the batch's rows at the rank its rule needs (``calls_checked``, at each input shape's first
  forward: a Conv2d on a 3-D tensor takes the batch for channels; such a call voids the claim, the test rows' too), and
  every parameter, buffer and batch exactly an ``nn.Parameter`` / ``torch.Tensor`` (at every forward). The claim also
  assumes what ``HOOKS_ASSUMED`` names: no hooks registered by other code (torch lists hooks through no public API), no
  change to the bottom after a shape's first forward, no rows but the shared predict's marked as test rows, every
  feature use declared. The probes run with real ``nn.Parameter`` weights and the wrapper's input is compared with the
  batch at each update, so a hook mixing rows on the batch's values at the checked update fails the run, but one gated
  on values the batch lacks, on what only the probes do, or acting only at inference or after the checked update is not
  seen); for any other the checks below test it on the batch's values and cannot prove it (replace-one allows any value:
  a mixing gated on values the batch lacks, e.g. batch-mean imputation where a NaN appears, passes), so such a bottom
  records no training epsilon (the run's notes say why). Any other is checked on probes (``row_checks``: copies of the
  batch keeping some rows and replacing the others, every pair of rows kept apart in one, from the run's seed): its rows
  in float64 and as trained, its buffers' new values and, on the tape, the rows' gradients under 0/w weights and each
  row's records at every trainable layer (input and output gradient: what the update reads; ``tape_checks``). They run
  at the first update of each training with two rows or more, and only there: not at inference, not in a training
  without an update (its releases then get no epsilon: fail closed), not later (mixing that starts after it, e.g. a
  plugin written to behave only at its first update, is not seen); nor is a mixing the probes' repeated rows leave
  unchanged, or one whose effect on the batch's rows is within the checks' tolerances (1e-10 relative in float64, 8 ulps
  as trained, per row; a neighbour of large norm could make it larger). Where the premise holds, sample i's features
  enter an exchange only through its own row and its own per-sample gradient. Replacing them moves its clipped row by at
  most 2C and its clipped gradient by at most 2C_g: each release of its row and each DP-SGD step that includes it is a
  Gaussian mechanism of noise multiplier sigma / 2 for it.
- Composition: everything the adversary (the active party, the server) receives and everything the victim holds is a
  function of those noisy outputs, of a bottom initialised independently of the data (checked where it could fail: a
  bottom whose first training forward changes a parameter, a data-dependent initialisation such as Glow's ActNorm, fails
  its run), and of the other parties' data (the gradients the active party sends are computed from noisy rows): adaptive
  composition. Batches are not Poisson-sampled (each epoch shuffles the labeled aligned samples and uses each once), so
  no amplification by subsampling is claimed: sample i is charged every row of it released (one per epoch, and one per
  release at inference of a training row: ``finetune.validation``) and every DP-SGD step including it (one per exchange
  and per FedBCD local update), each at sample rate 1, in Opacus' RDP accountant; epsilon is the worst sample's, at
  ``delta``.
- The noise: seeded from the run's seed (in every record; one who knows it strips the noise), so the bound assumes the
  adversary does not know the generator's state (review fe F3; the notes say so); ``options.secure_noise``: OS entropy.
- What it covers: the shared finetuning loop, from a bottom initialised from the seed alone. It does not cover a method
  that uses the victim's features elsewhere (``Method.feature_uses``: a pretraining trains the bottom on them; FedCSSL
  and FedHSSL send projections of them and, with PMA, parameters trained on them), a bottom trained without DP-SGD
  (``private_bottom=false``: every later row depends on every sample's features through its parameters), BatchNorm
  statistics re-estimated on the training rows (``finetune.bn_recalibrate``), or a release of the victim's rows without
  sample ids other than inference's (test rows: no training sample can be charged with it; fail closed). There no
  epsilon is recorded and the run's notes say why.
- A method whose finetuning makes no update of the victim's bottom from a received gradient calls no
  ``passive_backward`` (SS-VFL-I's frozen encoders released once; one-shot VFL's local semi-supervised training): that
  point is optional (``optional_points``), the rows are the whole mechanism there, and with nothing to make private no
  BatchNorm layer is frozen (DP-SGD and the freezing act only where the point is called). No training epsilon is
  recorded there: the planner cannot see whether such a loop updates the bottom some other way (both built-in methods
  do, and say so in ``feature_uses``); the per-release note for the test rows below still holds.
- What still holds then: one release of a frozen bottom. At inference each test sample's row passes the mechanism
  through a bottom that never saw it, in eval mode (rows independent): a Gaussian mechanism of multiplier sigma / 2 per
  release for that sample, whatever trained the bottom. The note gives that epsilon; it is not the training's.

SecretFlow's ``GaussianEmbeddingDP`` clips and noises each row and accounts it as sampled Gaussian steps at sample rate
B / n: it charges sensitivity C for the replace-one relation (2C), ignores that its base model trains non-privately on
the same features (a row of epoch 2 depends on every sample through the weights), and that BatchNorm couples the rows.
Its epsilon bounds none of that; this one bounds what it says and is absent elsewhere. The feature epsilon is in its own
column (``epsilon_features``), never added to a label-DP epsilon: the two claims have different neighbouring relations.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from pydantic import Field
from torch import nn

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses.base import StrengthAxis
from vflpriv.defenses.embedding_dp_accounting import HOOKS_ASSUMED, Counts, gaussian_epsilon
from vflpriv.defenses.gaussian_message import clip_rows
from vflpriv.defenses.ghost_sums import flat_noise
from vflpriv.defenses.noise import NoiseOptions
from vflpriv.defenses.own_modules import foreign_part
from vflpriv.defenses.passive import PASSIVE_BACKWARD, PASSIVE_BOTTOM, PassiveDefense
from vflpriv.defenses.private_rows import PrivateRows, same_rows, same_tensors
from vflpriv.defenses.per_sample import func_grads, ghost_applies, ghost_grads
from vflpriv.defenses.row_checks import forward_mixing
from vflpriv.defenses.tape_checks import record_mixing
from vflpriv.engine.message import EMBEDDING, FINETUNE, INFERENCE, Message, Payload


class EmbeddingDPOptions(NoiseOptions):
    clip: float = Field(1.0, gt=0, description="C: each sent row is clipped to this L2 norm (SecretFlow l2_norm_clip 1)")
    private_bottom: bool = Field(True, description="DP-SGD on the victim's bottom, BatchNorm frozen: what the claim over "
                                                   "the training needs (false: rows only, no training epsilon)")
    bottom_clip: float = Field(1.0, gt=0, description="C_g: each sample's gradient of the bottom is clipped to this "
                                                      "L2 norm (private_bottom)")
    delta: float = Field(1e-5, gt=0, lt=1, description="delta of the (epsilon, delta) the accountant reports; "
                         "below 1/n for n training rows, else refused (the default suits fewer than 100000 rows)")
    read_only_with: ClassVar[dict[str, tuple[str, tuple]]] = {"bottom_clip": ("private_bottom", (True,))}


class EmbeddingDP(PassiveDefense):
    """Per-row clipping and Gaussian noise on the victim's embeddings, DP-SGD on its bottom (whose gradients the
    mechanism forms itself: the bottom's parameter hooks do not run); feature-DP epsilon for a bottom built of vflpriv's
    and torch.nn's row-wise modules (another's premise is tested on the batch, not proven: no epsilon recorded).

    DP-SGD forms each update of the bottom from per-sample gradients it computes (the tape's recorded rows, or
    torch.func): autograd never computes a parameter's gradient there, so a hook registered on a parameter
    (``p.register_hook``) is not called and cannot change the update; one that must act can act on ``p.grad`` after
    the update (post-processing of the noised sum: the claim still holds)."""

    Options = EmbeddingDPOptions
    hook_points = frozenset({PASSIVE_BOTTOM, PASSIVE_BACKWARD})
    #: DP-SGD needs an update from a received gradient; a training without one gets the rows alone.
    optional_points = frozenset({PASSIVE_BACKWARD})
    phase_reason = ("its claim is over the finetuning transcript from a bottom initialised from the seed; a pretraining "
                    "trains the bottom on the features outside it")
    axis = StrengthAxis(name="sigma", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.25, 16.0), log=True)
    audit_strengths = {"finetune": (0.02, 0.1, 0.5)}
    #: 1: DP-SGD's sums by ghost clipping on Linear / BatchNorm1d bottoms; 2: on Conv2d / BatchNorm2d (the CNN bottom)
    #: too (each equal to torch.func's up to float rounding: a CNN's last digits moved at 2, an MLP's did not). The
    #: book-keeping sums and the one noise buffer (drawn per parameter, into its views) keep revision 2's values; 3: the
    #: tape only on bottoms of known modules (a plugin bottom that took it before may have had wrong sums: its stored
    #: runs are recomputed; vflpriv's own bottoms keep their numbers bit for bit); 4: the tape on public APIs, hooks
    #: checked by what they did: a bottom with row-wise hooks, torch.func's before, now takes the tape (the same update
    #: to float rounding), a frozen Conv2d reading a 3-D batch as channels (wrong sums before) now fails its run, a
    #: layer on other rows falls back instead of failing; vflpriv's own bottoms keep their numbers bit for bit; 5: a
    #: bottom whose rows mix (forward or gradients, on either path) fails its run, where it recorded an epsilon, and one
    #: whose in-place module may write a recorded input leaves the tape (vflpriv's own: bit for bit); 6: a bottom
    #: computing in place gets copies of its batch (torch.func read the one its forward overwrote: updates change), and
    #: spectral_norm / Embedding bottoms train again (false mixing, a crash at 5); vflpriv's own: bit for bit. 7: an
    #: in-place module writing a recorded input behind a pass-through module (Identity, a view, Dropout(0)) leaves the
    #: tape (its sums were wrong; torch.func fails the run as autograd does); a forward mixing only with gradients on or
    #: only in its own dtype, and a gradient hook rescaling rows by a statistic of their directions, fail the run (an
    #: epsilon was recorded); RReLU bottoms train on the tape (their runs failed); vflpriv's own: bit for bit. 8: a
    #: bottom mixing into the tape's records only, carrying features in a buffer, or mixing a pair of rows the fixed
    #: halves kept together fails its run (an epsilon was recorded); a hook handing an in-place module a recorded input
    #: sends the update to torch.func (wrong sums before); vflpriv's own: bit for bit. 9: a bottom not built only of
    #: vflpriv's and row-wise torch.nn modules records no training epsilon (one was recorded on a premise the checks
    #: test, not prove); a bottom whose first training forward changes a parameter (data-dependent initialisation) fails
    #: its run, as does one whose hook writes a statistic of the batch into a buffer in the backward (on the tape), one
    #: whose hook writes a layer's recorded input after the call (a wrong update before) or reaches a parameter through
    #: a captured tensor; other updates, and vflpriv's own bottoms' numbers, unchanged. 10 (review rc3): an epsilon only
    #: at a victim the defense guards; none where a layer on the list is called across the batch (a Conv2d on a 3-D
    #: tensor, Flatten/Unflatten from dim 0, LayerNorm over the batch axis), a module holds a callable of its own, a
    #: vflpriv class whose forward was not read is in the bottom, BatchNorm keeps no running statistics, a method
    #: overrides a bottom builder, a release carries no sample ids outside inference, or no update ran the rows check (a
    #: frozen bottom); a pre-hook on the wrapper or a hook acting on real nn.Parameter weights only fails the run; a
    #: 16-bit bottom is noised in float32 (its sent rows change); vflpriv's own float32 bottoms: bit for bit.
    revision = 10
    anchor = ("SecretFlow GaussianEmbeddingDP (per-row clipping and noise); Abadi et al. 2016 DP-SGD on the victim's "
              "bottom; Opacus RDP accountant")
    cost = ("DP-SGD's per-sample norms and clipped sums of the victim's bottom with private_bottom (ghost clipping "
            "from its one backward, which forms no weight gradient, for bottoms built of Linear / Conv2d / BatchNorm "
            "layers and modules of known forward, no plugin class; torch.func otherwise, and where the tape's "
            "run-time checks fail), noise on each of its parameters, and at the first update after train() (once a "
            "training) the rows check (2 + m forwards in float64, m probes, 8 at a batch of 64, and as many as "
            "trained: on the tape, forwards and backwards recording each probe, and two weighted backwards; about 14 "
            "steps on digits' bottom); the training x1.7 to x2.3 on digits (over issue 47's 1.5x), x1.3 with "
            "Fashion-MNIST's CNN bottom (benchmarks/results/feature_defense_overhead.md)")
    pays = ("where a bound is required: the only feature defense with one; digits: fi-decoder at the prior at sigma 0.1 "
            "(accuracy 0.818 of 0.937: clipping, frozen statistics and DP-SGD cost 0.12 at any sigma), epsilon 8900")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.released: Counts | None = None  # per training row: rows of it sent through the mechanism
        self.stepped: Counts | None = None  # per training row: DP-SGD steps that included it
        self.test_rows: dict[int, int] = {}  # per guarded party: the test rows it sent (one sample's features each)
        self.n_test = 0
        self.idle_updates = 0  # DP-SGD updates of a bottom with no trainable parameter: nothing to privatise
        self.foreign = ""  # what makes a wrapped bottom not vflpriv's own ('' where none): the premise only tested
        self.wrapped: list[PrivateRows] = []  # the bottoms it wrapped (each records a call off its layer's rule)
        self.parties: list[int] = []  # whose bottom each is
        self.unseen = ""  # why test rows may have left by a path the mechanism did not count (no test-row claim)
        self.curve = False  # finetune.curve: the monitor scores the test rows through the mechanism, muted

    def bind(self, federation) -> None:
        """Count, per training row, its releases (a channel observer: what was really sent) and DP-SGD steps."""
        n = federation.active.labels.numel()
        self.released, self.stepped = Counts(n), Counts(n)
        self.n_test = int(federation.active.x_test.shape[0])
        self.curve = bool(federation.finetune.curve)
        if federation.finetune.bn_recalibrate and not self.uncovered:
            self.uncovered = ("finetune.bn_recalibrate re-estimates the bottom's BatchNorm statistics on the training "
                              "rows, outside the mechanism")
        federation.channel.observers.append(self._released)

    def _released(self, message: Message, payload: Payload) -> None:
        if message.kind != EMBEDDING or not self.acts_for(message.sender, message.phase):
            return
        if message.sample_ids is not None:
            self.released.add(message.sample_ids)
        elif message.test and message.phase == INFERENCE:  # the test rows the shared ``finetune.predict`` marks
            self.test_rows[message.sender] = self.test_rows.get(message.sender, 0) + int(payload.shape[0])
        else:  # fail closed: rows of the victim no training sample's count (nor the test rows') is charged with
            self.unseen = (f"the victim sent an embedding message in {message.phase} without sample ids and not "
                           "marked as finetune.predict's test rows (a release not attributable to samples): no "
                           "training row's count can be charged with it")
            self.uncovered = self.uncovered or self.unseen

    def covers(self, method) -> str:
        undeclared = method.undeclared_feature_uses()  # its own code may send test rows the mechanism never sees
        self.unseen = self.unseen or "; ".join(undeclared)
        uses = [*method.feature_uses(), *undeclared]
        if not self.options.private_bottom:
            uses.append("options.private_bottom=false: the victim's bottom trains on its features without DP-SGD, so "
                        "every later row depends on every sample's features through its parameters")
        elif PASSIVE_BACKWARD not in self.called:  # the claim needs every update of the bottom inside the mechanism
            uses.append("its finetuning calls no passive-backward point, so any update of the victim's bottom there "
                        "runs without DP-SGD")
        return "; ".join(uses) + (": outside embedding-dp's mechanism, so no training epsilon" if uses else "")

    def passive_bottom(self, party: int, bottom: nn.Module) -> nn.Module:
        if not self.acts_for(party, FINETUNE):
            return bottom
        self.wrapped.append(PrivateRows(bottom, clip=self.options.clip, sigma=self.strength, frozen=self.dp_sgd,
                                        generator=self.generator))
        self.parties.append(party)
        self._foreign(bottom, self.wrapped[-1])
        return self.wrapped[-1]

    @property
    def rows_checked(self) -> bool:
        """Whether every wrapped bottom that sent rows had an update run the rows check (per party: one checked
        bottom vouches for no other)."""
        sent = [w for w in self.wrapped if w.sent]
        return bool(sent) and all(w.rows_checked for w in sent)

    @property
    def unchecked_foreign(self) -> str:
        """What makes a wrapped bottom that sent rows foreign, for the first one no update checked; or ''."""
        return next((w.foreign for w in self.wrapped if w.sent and w.foreign and not w.rows_checked), "")

    @property
    def misread(self) -> str:
        """The first call of an admitted layer off its row-wise rule in any forward of a wrapped bottom, or ''."""
        return next((w.misread for w in self.wrapped if w.misread), "")

    def _foreign(self, bottom: nn.Module, rows: PrivateRows) -> None:
        """Where ``bottom`` is not built only of vflpriv's and row-wise torch.nn modules (``own_modules``), no training
        epsilon: the checks test the premise on the batch's values, they cannot prove it for a forward vflpriv has not
        read (a mixing gated on values the batch lacks passes them)."""
        rows.foreign = rows.foreign or foreign_part(bottom)
        self.foreign = self.foreign or rows.foreign
        if self.foreign and not self.uncovered:
            self.uncovered = (f"the victim's bottom is not built only of vflpriv's and row-wise torch.nn modules "
                              f"({self.foreign}): the premise that each row is a function of its own sample is tested "
                              "on the batch's values there, not proven")

    @property
    def dp_sgd(self) -> bool:
        """Whether DP-SGD runs on the victim's bottom: ``private_bottom``, in a training that calls its backward."""
        return self.options.private_bottom and PASSIVE_BACKWARD in self.called

    def passive_backpropagates(self, party: int) -> bool:
        return self.dp_sgd and self.acts_for(party, FINETUNE)

    def passive_backward(self, party: int, bottom: nn.Module, x: torch.Tensor, sent: torch.Tensor,
                         gradient: torch.Tensor, ids: torch.Tensor) -> None:
        """DP-SGD: each sample's gradient of its own clipped row times the gradient it received, clipped to C_g,
        summed, noised, over the batch size. A bottom the tape covers (``per_sample.ghost_applies``: Linear / Conv2d /
        frozen BatchNorm layers, row-wise modules, ``nn.Sequential`` and vflpriv's own encoders, by exact type) gets the
        norms and clipped sums from one backward through the forward that computed ``sent`` (a forward of its own for
        rows computed elsewhere), where the tape's run-time checks hold (``GhostTape.norms``); any other bottom or
        update (a plugin's module, a subclass, a weight reused by a hook) its per-sample gradients by ``torch.func``.
        On both paths each row must be a function of its own sample (the argument's premise): the first update after
        each ``train()`` with two distinct rows or more (:meth:`PrivateRows.check_due`: once a training in the loop)
        checks, on probes, the rows and buffers (``row_checks.forward_mixing``) and, where the tape records the
        bottom, its records as trained (``tape_checks.record_mixing``) and gradients (``row_checks.gradient_mixing``),
        and fails the run with :class:`ProtocolError` where they mix (no epsilon recorded); a bottom that starts
        mixing after that update is outside what is checked."""
        inner, clip, n = bottom.bottom, self.options.bottom_clip, x.shape[0]
        trained = [p for p in inner.parameters() if p.requires_grad]
        if not trained:  # a frozen bottom: no update, nothing of the features released, so no step to charge
            self.idle_updates += 1
            return
        given = bottom.input_of(sent)
        if given is not None and given is not x and not same_rows(given, x):
            raise ProtocolError("embedding-dp: the victim's bottom computed the rows it sent from another input than "
                                "its batch (a pre-hook on embedding-dp's wrapper?): the sent rows and the update would "
                                "not be the samples' own; the run fails, no epsilon is recorded")
        check, received = bottom.check_due(x), gradient.detach()
        if check:  # an instance method added since the wrap makes it foreign; then the probes (rows, buffers, records)
            self._foreign(inner, bottom)
            records = record_mixing(inner, x, received, clip=bottom.clip, seed=bottom.seed) \
                if ghost_applies(inner) else None
            mixing = forward_mixing(inner, x, seed=bottom.seed, as_trained=records is None) or records
            if mixing:
                raise ProtocolError(f"embedding-dp: {mixing}; its argument (each sent row and each sample's part of "
                                    "an update a function of its own sample) covers bottoms whose rows depend on their "
                                    "own sample only: the run fails, no epsilon is recorded")
            bottom.rows_checked = True
        taped = bottom.tape_of(sent)  # the rows' own forward, recorded: no second forward
        if taped is not None and same_tensors(taped[1].params, trained):  # the tape covers what trains now
            clipped, tape = taped
            ghost = tape.norms((clipped * received).flatten(1).sum(1), n=n, check=check, seed=bottom.seed)
        else:
            ghost = ghost_grads(inner, lambda h: (clip_rows(h, clip=bottom.clip) * received).flatten(1).sum(1),
                                x.clone() if bottom.copies else x, check=check, seed=bottom.seed) \
                if ghost_applies(inner) else None
        sums = trained[0].new_zeros(sum(p.numel() for p in trained))  # the clipped sums, then the update, flat
        views = dict(zip(trained, sums.split([p.numel() for p in trained])))
        if ghost is not None:  # a bottom the tape provably covers: from one backward (defenses/per_sample.py)
            squares, clipped_sums = ghost
            clipped_sums(_scale(squares, clip), views)
        else:
            grads = func_grads(inner, bottom.clip, x, received)
            names = [k for k, p in inner.named_parameters() if p.requires_grad]
            squares = sum(grads[k].reshape(n, -1).pow(2).sum(1) for k in names)
            scale = _scale(squares, clip)
            for k, p in zip(names, trained):
                views[p].copy_(torch.einsum("n,n...->...", scale, grads[k]).reshape(-1))
        noise = flat_noise(trained, self.generator)
        update = noise.mul_(self.strength * clip).add_(sums).div_(n)  # (sum + sigma C_g noise) / n, as one buffer
        for p, g in zip(trained, update.split([p.numel() for p in trained])):
            g = g.view(p.shape)
            p.grad = g if p.grad is None else p.grad + g
        self.stepped.add(ids)

    @property
    def releases(self) -> torch.Tensor | None:
        """Per training row, the rows of it sent through the mechanism."""
        return None if self.released is None else self.released.counts()

    @property
    def steps(self) -> torch.Tensor | None:
        """Per training row, the DP-SGD steps that included it."""
        return None if self.stepped is None else self.stepped.counts()

    def uses(self) -> int:
        """The most mechanisms any training row passed (its releases plus its DP-SGD steps)."""
        return int((self.releases + self.steps).max()) if self.releases is not None else 0

    def privacy_spent(self) -> float | None:
        """The worst training row's epsilon; None where uncovered, and (fail closed) where no update ran the rows check
        (a frozen bottom: nothing tested that its releases' rows are their samples' own)."""
        if self.is_identity or self.uses() == 0:
            return None
        if self.misread and not self.uncovered:
            self.uncovered = f"the victim's bottom does not compute as read (row-wise): {self.misread}"
        if not self.rows_checked and not self.uncovered:
            self.uncovered = ("no update of the victim's bottom ran the rows check (no trainable parameter, or no "
                              "batch of two rows or more): its releases' premise was never tested")
        if self.uncovered:
            return None
        return gaussian_epsilon(self.strength / 2.0, self.uses(), delta=self.options.delta)

    def privacy_delta(self) -> float:
        return float(self.options.delta)

    def notes(self) -> str:
        """The claim that holds for the test rows at inference whatever trained the bottom (labelled as resting on a
        tested premise for a bottom not vflpriv's own), and that DP-SGD had nothing to privatise where the bottom has no
        trainable parameter; or ''."""
        idle = (f"the victim's bottom has no trainable parameter: embedding-dp's DP-SGD had nothing to privatise in "
                f"{self.idle_updates} update(s) and charged no step for them" if self.idle_updates else "")
        if not self.is_identity and self.rows_checked and not self.uncovered and not self.misread:  # an epsilon's
            idle = "; ".join(filter(None, [idle, HOOKS_ASSUMED]))
        if self.is_identity or self.n_test == 0 or not self.test_rows:
            return idle
        untested = self.unchecked_foreign and (f"a wrapped bottom is not vflpriv's own ({self.unchecked_foreign}) "
                                               "and no update ran its rows check")
        # the premise fails, rows went unseen or another defense read them around it, or it is untested
        withheld = self.misread or self.unseen or self.read_around or untested
        if withheld:  # no per-release claim either
            return "; ".join(filter(None, [f"no epsilon for the test rows either: {withheld}", idle]))
        times = max(math.ceil(rows / self.n_test) for rows in self.test_rows.values())  # a party's own releases
        eps = gaussian_epsilon(self.strength / 2.0, times, delta=self.options.delta)
        return (f"each test row passed embedding-dp's mechanism {times} time(s) at inference, at part"
                f"{'ies' if len(self.parties) > 1 else 'y'} {', '.join(map(str, self.parties))} only, through a "
                f"bottom that never saw it: ({eps:.3g}, {self.options.delta:g})-DP for that test sample's features "
                "(one release of a frozen bottom, not the training's epsilon), where each row is a function of its "
                "own sample: true of vflpriv's own bottoms, for another checked by probes at the first update of a "
                "training only (not at inference, not in a training without one, not after it), to the checks' "
                "tolerances"
                ) + (f"; this bottom is not vflpriv's own ({self.foreign}): that epsilon rests on a premise tested on "
                     "the batch's values, not proven" if self.foreign else "") + (
            "; finetune.curve passed them through it at each epoch's end too, muted (sent to no party), with noise "
            "of a forked stream: not counted, and the record's utility_curve is outside this claim" if self.curve
            else "") + (f"; {idle}" if idle else "")


def _scale(squares: torch.Tensor, clip: float) -> torch.Tensor:
    """Each sample's factor min(1, C_g / |grad_i|) from its squared gradient norm."""
    return (clip / squares.sqrt().clamp_min(1e-12)).clamp(max=1.0)
