"""The typed result of one (training, attack) run, as stored and as written to ``results.csv``."""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace

from vflpriv.store import canary_fields, feature_fields

#: Run outcomes: scored, failed with its reason, or not applicable (a non-federated method has no adversary).
OK, FAILED, NOT_APPLICABLE = feature_fields.STATUSES

#: The version of the rules deciding where an epsilon is claimed (the defenses' ``covers``, the undeclared-code rules of
#: methods and defenses, the accountants): raised by any change to them, so that a stored epsilon written under earlier
#: rules is never resumed or shown (review eps F3). 1: review eps F1/F2 (pretraining keys and defense plugins); 2: a
#: DP defense's own undeclared code voids its claim, and a class is vflpriv's own by its module's file, not its
#: ``__module__`` alone, and a defense naming no secret records no epsilon (review eps2 G1, G6, final14 F4; one
#: version, as none of them was released alone); 3: no feature epsilon where the victim's features pass a preprocessing
#: fitted on the training rows, or where the dataset does not declare it (review fe F1); 4: an epsilon's secret from
#: vflpriv's own accounting class; a plugin's ``guards``, ``acts_for``, ``notes`` or counts void it (l6 L1, eps6 E1-E3);
#: 5: a vflpriv class's member assigned since its module defined it voids the claim (a plugin's import-time
#: ``EmbeddingDP.secrets = {"labels"}`` recorded a label epsilon under 4: review eps6 E4), and a class member is no
#: code only as an ``Options`` model of vflpriv's (a planted pydantic class as ``privacy_spent`` recorded 0.0: l8 3);
#: a plugin subclass of a DP defense keeps its epsilon only with declarations and no code, judged again when the run
#: is recorded (dp-gaussian's ``backward`` counting fewer uses recorded 25.93 for 41.65 under 4: l9 L9-1, L9-2), a
#: class mixed in beside the accounting class voids it, and a declared read cannot be taken back (l10 1-4); 6: a DP
#: defense's data not what vflpriv's code makes of it when the run is recorded voids the claim (another plugin of the
#: training made dp-gaussian's ``sigma`` a float subclass zeroing the noise, and 0.164 was kept under 5: review l12 2);
#: 7: an epsilon rests on the count its settings state (``accountants.Accountant.planned_count``): a run composing
#: another (a method finetuning by its own loop) records none, and a stored count not the settings' is damage (a count
#: lowered with its epsilon showed 25.93 for 244.04: review fin17 F1).
CLAIM_VERSION = 7


@dataclass
class RunRecord:
    """One run's numbers. Attack accuracy is on the test samples unless the attack only targets train.

    A feature attack's record (``secret`` ``features``) scores reconstructions instead of guessed labels: the
    ``feature_*`` fields (errors, lower is better) and the adversary's feature prior beside them (``prior_mse``);
    its ``leakage`` is prior MSE - attack MSE on the same targets (positive: the attack reconstructs better than the
    prior), and its accuracy fields stay NaN."""

    key: str
    method: str
    dataset: str
    attack: str
    defense: str
    phase: str
    strength: float
    seed: int
    training_key: str = ""
    #: What the data the run read is named by (``vflpriv.data.load.data_fingerprint``): '' for a bundled dataset read
    #: from the file vflpriv pins, ``files:`` and their digest where the loader names its files, else the loaded
    #: tensors' SHA-256. A stored record of other data is never resumed: refused, or recomputed with ``--overwrite``
    #: (``tradeoff.sweep.drop_damaged``); one written before the field (read as '') is kept, its data unknown.
    data_fingerprint: str = ""
    #: The secret the attack infers: ``labels`` (the active party's) or ``features`` (``victim``'s).
    secret: str = "labels"
    #: Who ran the attack ("1": party 1; "server") and, for a feature attack, whose features it inferred ("" for labels).
    adversary: str = ""
    victim: str = ""
    #: The device the training ran on (``cpu``, ``cuda:0``). Keys leave it out: every draw is made on the CPU, so a
    #: seed is the same experiment on every device (numbers agree to float tolerance, not bit for bit).
    device: str = ""
    strength_axis: str = "lambda"
    strength_stronger: str = "higher"
    #: The swept defense's identity strength: a run there is undefended (DCS's reference utility).
    strength_identity: float = 0.0
    num_classes: int = 0
    utility: float = float("nan")
    utility_metric: str = ""
    #: With ``finetune.validation``: the utility on the active party's validation rows (lr and epoch are chosen on it).
    utility_val: float = float("nan")
    #: With ``finetune.curve``: the best test utility over the finetuning epochs, as the paper reports it (its epoch
    #: chosen on the test set: an upper bound on what a user gets, never in CAP).
    utility_optimistic: float = float("nan")
    attack_accuracy: float = float("nan")
    attack_target: str = "test"
    attack_accuracy_train: float = float("nan")
    attack_auc: float = float("nan")
    attack_tpr_at_1fpr: float = float("nan")
    attack_accuracy_optimistic: float = float("nan")
    attack_accuracy_hungarian: float = float("nan")
    attack_leak_auc: float = float("nan")
    attack_accuracy_best_threshold: float = float("nan")
    #: A tuned attack's best candidate chosen on the targets' labels: an upper bound no adversary reaches, never in CAP.
    attack_accuracy_oracle: float = float("nan")
    #: Accuracy of the attack's most confident guesses (the top 5%, at least 5 of them: attack_precision_top_k), for
    #: attacks that say how sure they are: a leak concentrated on a few targets shows here, not in the mean.
    attack_precision_top: float = float("nan")
    attack_precision_top_k: int = 0
    #: A tuned attack's selected settings (JSON of the options that differ from those given; "" untuned).
    attack_selected: str = ""
    prior_accuracy: float = float("nan")
    leakage: float = float("nan")
    #: The multiplicative advantage over the prior: log odds ratio of a right guess, on the epsilon scale (an estimate).
    leakage_multiplicative: float = float("nan")
    #: Random-label canaries of the training (``partition.canaries``), how many the attack guessed (its most confident
    #: ones where it abstained) and how many of those it got right; the prior's accuracy on all of them (chance).
    canaries: int = 0
    #: ``canary_accuracy`` is the accuracy of the ``canary_guesses`` of the menu entry selected for the best bound
    #: (selected after scoring, so optimistic); ``canary_counts`` holds every entry's (the first: every guess).
    canary_guesses: int = 0
    canary_accuracy: float = float("nan")
    canary_prior_accuracy: float = float("nan")
    #: The fingerprint of the canary key the canaries' labels were drawn with (``vflpriv.store.secrets``; '' without).
    canary_key: str = ""
    #: How many classes each canary's label is drawn from (the canary audit's C: every class, or 2 with
    #: ``partition.canary_labels: pair``); 0 in records written before it (read as ``num_classes``).
    canary_classes: int = 0
    #: The one-sided 95% lower bound on the training's label-DP epsilon these guesses certify, at delta
    #: ``epsilon_lower_delta`` (the DP defense's delta, else 0): vflpriv.common.empirical_epsilon.
    epsilon_lower: float = float("nan")
    epsilon_lower_delta: float = float("nan")
    #: The f-DP one-run bound of the same guesses and menu at the same delta (``vflpriv.common.fdp_one_run``, k =
    #: ``canary_classes`` candidates): a proven lower bound on epsilon, as ``auditor_epsilon_fdp`` is the auditor's.
    epsilon_fdp: float = float("nan")
    #: The auditor the training ran with (``finetune.auditor``: a measurement of the DP defense's claim with privileges no
    #: party holds, never an attack: in no leakage, CAP, verdict or worst case over the attacks), how many of the
    #: canaries it guessed as its abstention menu kept them, their accuracy, and the 95% lower bound they certify on the
    #: training's label-DP epsilon at the claim's delta (``epsilon_delta``). Every record of the training carries them.
    auditor: str = ""
    auditor_guesses: int = 0
    auditor_accuracy: float = float("nan")
    auditor_epsilon_lower: float = float("nan")
    #: The auditor's f-DP one-run bounds (``vflpriv.common.fdp_one_run``, k = ``canary_classes`` candidates per canary):
    #: a proven lower bound on epsilon at the claim's delta (against f_{eps,delta}), a proven lower bound on mu
    #: (against mu-GDP), and the epsilon at delta of that mu, an estimate under the Gaussian-curve assumption.
    auditor_epsilon_fdp: float = float("nan")
    auditor_mu_lower: float = float("nan")
    auditor_epsilon_gdp_estimate: float = float("nan")
    comm_mb: float = 0.0
    comm_messages: int = 0
    comm_mb_pretrain: float = 0.0
    comm_mb_finetune: float = 0.0
    comm_mb_inference: float = 0.0
    comm_messages_pretrain: int = 0
    comm_messages_finetune: int = 0
    comm_messages_inference: int = 0
    #: The privacy a DP defense of the training spent, by its accountant (NaN when no defense makes such a claim), at
    #: delta ``epsilon_delta`` (0 for a pure-epsilon claim).
    epsilon: float = float("nan")
    epsilon_delta: float = float("nan")
    #: The feature-DP epsilon a defense of a passive party's features spent (embedding-dp; neighbouring training sets
    #: differ in one sample's features at the victim), at ``epsilon_features_delta``: never added to a label epsilon.
    epsilon_features: float = float("nan")
    epsilon_features_delta: float = float("nan")
    #: The :data:`CLAIM_VERSION` of the code that wrote it (read as 0 from a record written before the field); an
    #: epsilon of another is stale.
    claim_version: int = CLAIM_VERSION
    #: JSON [{"defense", "revision", "secret", "count"}, ...]: per defense whose epsilon it records, its index in the
    #: settings, its revision, the secret and what its accountant composed beyond the settings (the most uses of a
    #: label or feature row; null where the settings fix the epsilon), so a read recomputes the epsilons
    #: (``runner.accountants``); '' in records written before the field (only a settings-fixed epsilon is checked).
    epsilon_accounting: str = field(default="", repr=False)
    #: The attack acted during this training (its own training): utility is the federation's under attack.
    training_under_attack: bool = False
    #: How many targets the attack guessed and was scored on (an attack on one batch guesses that batch).
    n_targets: int = 0
    #: A feature attack's scores on its primary targets (``attack_target``), features min-max scaled to [0, 1] on the
    #: training data (vflpriv.common.feature_metrics): MSE over all elements (and on the train targets), PSNR and SSIM
    #: for image victims, the exact-match rate of binary and categorical columns, VFLAIR's AP = max(0, 1 - MSE).
    feature_mse: float = float("nan")
    feature_mse_train: float = float("nan")
    feature_psnr: float = float("nan")
    feature_ssim: float = float("nan")
    feature_exact_match: float = float("nan")
    feature_ap: float = float("nan")
    #: A tuned feature attack's lowest MSE on the targets of anything its search trained: a bound, never a verdict's.
    feature_mse_oracle: float = float("nan")
    #: The feature prior on the same targets: the one leakage is measured against (``prior_kind``: the known samples'
    #: mean, or the regressor from the adversary's own features, chosen on its known samples), both, and U(0, 1) guesses.
    prior_mse: float = float("nan")
    prior_kind: str = ""
    prior_mse_mean: float = float("nan")
    prior_mse_regressor: float = float("nan")
    prior_mse_random: float = float("nan")
    prior_psnr: float = float("nan")
    prior_ssim: float = float("nan")
    train_seconds: float = 0.0
    attack_seconds: float = 0.0
    status: str = OK
    error: str = ""
    notes: str = ""
    traffic: str = field(default="", repr=False)
    #: JSON [[epoch, MB sent so far, test utility], ...] per finetuning epoch, with ``finetune.curve``.
    utility_curve: str = field(default="", repr=False)
    #: Per covered primary target, in order, whether the attack (the prior) guessed it right: "0"/"1" characters,
    #: for the per-sample paired test of the audit's verdicts.
    attack_hits: str = field(default="", repr=False)
    prior_hits: str = field(default="", repr=False)
    #: A feature attack's per-target MSE (JSON list, in target order) and the prior's on the same targets (the paired
    #: test's unit), and its per-feature MSE (JSON list over the flattened features).
    attack_errors: str = field(default="", repr=False)
    prior_errors: str = field(default="", repr=False)
    feature_mse_per_feature: str = field(default="", repr=False)
    #: Image victims: the first few primary targets' true features, the attack's and the chosen prior's guesses, on
    #: the scores' scale (JSON {"shape", "truth", "attack", "prior"}), for the report's grid.
    feature_examples: str = field(default="", repr=False)
    #: A tuned attack's every trial (JSON list of options, budget fraction, holdout accuracy).
    attack_trials: str = field(default="", repr=False)
    #: JSON [[guesses kept, right], ...]: each entry of the canary audit's abstention menu (summed over seeds to pool).
    canary_counts: str = field(default="", repr=False)
    #: JSON [[guesses kept, right], ...]: the auditor's, per entry of the same menu.
    auditor_counts: str = field(default="", repr=False)
    config: str = field(default="", repr=False)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        """Strict JSON (no bare NaN or Infinity): NaN ("none") is stored as null, an infinity as the string ``"inf"``
        or ``"-inf"`` (embedding-dp's epsilon where the accountant finds no finite one), so a reloaded record says what
        the written one said."""
        data = {k: (_non_finite(v) if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}
        return json.dumps(data, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """The record ``to_json`` wrote; ValueError naming what is wrong with a damaged one (not JSON, a field
        missing or of the wrong type, canary or claim fields no audit writes: ``canary_fields``, run or feature fields
        no run writes: ``feature_fields``). Unknown fields (a newer vflpriv's) are ignored."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"not a JSON object but {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        kept = {"claim_version": 0} | {k: v for k, v in data.items() if k in known}  # 0: written before the field
        missing = [f.name for f in fields(cls) if f.name not in kept and f.default is MISSING
                   and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"field(s) {', '.join(missing)} missing")
        for name, value in kept.items():
            kind = known[name].type
            if kind == "float" and (value is None or value in _INFINITIES):
                kept[name] = float("nan") if value is None else float(value)
            elif not isinstance(value, _TYPES[kind]) or (kind != "bool" and isinstance(value, bool)):
                raise ValueError(f"field {name} holds {value!r:.40}; expected {kind}")
        if renamed := RENAMED_AXES.get((kept.get("defense"), kept.get("strength_axis"))):
            kept["strength_axis"] = renamed
        record = cls(**kept)
        impossible = canary_fields.problem(kept) or feature_fields.problem(record) or _claim_problem(record)
        if impossible:
            raise ValueError(impossible)
        return record

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls)]


#: Strength axes renamed under an unchanged mechanism, (defense, stored name) -> its name now: a stored record reads
#: with the name, so an old store names no claim that is none and its seeds join the new ones (reviews eps F6, eps2 G2).
RENAMED_AXES = {("grad-perturb", "epsilon"): "laplace_eps"}

#: Each epsilon a run records with its delta (0: a pure-epsilon claim): one is never written without the other.
CLAIM_PAIRS = (("epsilon", "epsilon_delta"), ("epsilon_features", "epsilon_features_delta"))


def _claim_problem(record: RunRecord) -> str:
    """What no run writes into a claim of the current rules ('' if nothing; an earlier rules' epsilon is withheld,
    :func:`stale_claim`): an epsilon without its delta in [0, 1) or a delta without its epsilon (review hunt H6), an
    epsilon on an undefended run. Which defense may claim which epsilon is judged against the record's settings
    (``runner.naming.unclaimable``), its value against its accountants (``runner.accountants.miscounted``)."""
    if record.claim_version != CLAIM_VERSION:
        return ""
    for epsilon, delta in CLAIM_PAIRS:
        value = getattr(record, delta)
        if math.isnan(getattr(record, epsilon)) != math.isnan(value) or value >= 1:
            return f"its {epsilon} ({getattr(record, epsilon):.6g}) and {delta} ({value:.6g}) are not a claim"
        if record.defense == "none" and not math.isnan(value):
            return f"it is undefended and carries an {epsilon}"
    return ""


#: How :meth:`RunRecord.to_json` writes an infinite number (strict JSON has none).
_INFINITIES = ("inf", "-inf")


def _non_finite(value: float) -> str | None:
    """A non-finite float as stored: None for NaN, else its string in :data:`_INFINITIES`."""
    return None if math.isnan(value) else _INFINITIES[value < 0]


#: What each annotated field type of :class:`RunRecord` accepts from JSON (an int is a valid float).
_TYPES: dict[str, type | tuple[type, ...]] = {"str": str, "float": (int, float), "int": int, "bool": bool}


def stored(key: object, text: object, *, lists: bool = False) -> tuple[RunRecord | None, str]:
    """The record a store row holds under ``key`` and '', or None and what is wrong with it: it must parse, hold no
    field no run writes (``canary_fields``, ``feature_fields``) and be the record of ``key``; with ``lists``, its
    per-target errors are parsed and checked too (``feature_fields.lists_problem``: a sweep resuming its runs, where
    that is a training's fraction; a read command leaves it to where it parses them)."""
    if not isinstance(text, str):
        return None, f"its record is {type(text).__name__}, not JSON text"
    try:
        record = RunRecord.from_json(text)
    except ValueError as exc:
        return None, str(exc)
    if record.key != key:
        return None, f"it holds the record of another run ({record.key[:16]})"
    problem = feature_fields.lists_problem(record) if lists else ""
    return (None, problem) if problem else (without_stale_claim(record), "")


def stale_claim(record: RunRecord) -> str:
    """Why ``record``'s epsilon was decided by other claim rules than the current ones (:data:`CLAIM_VERSION`), or ''
    (no epsilon, or a current one)."""
    claimed = not (math.isnan(record.epsilon) and math.isnan(record.epsilon_features))
    if not claimed or record.claim_version == CLAIM_VERSION:
        return ""
    return (f"epsilon withheld: recorded under claim rules {record.claim_version}, not the current {CLAIM_VERSION} "
            "(a claim since withheld may be among them); evaluate on this store recomputes it")


def without_stale_claim(record: RunRecord) -> RunRecord:
    """``record``, with a stale epsilon (:func:`stale_claim`) read as none and the note saying why."""
    why = stale_claim(record)
    return without_epsilon(record, why) if why else record


def without_epsilon(record: RunRecord, why: str) -> RunRecord:
    """``record`` with its epsilons read as none and ``why`` added to its notes: every read that withholds them."""
    nan = float("nan")
    return replace(record, epsilon=nan, epsilon_delta=nan, epsilon_features=nan, epsilon_features_delta=nan,
                   notes="; ".join(filter(None, [record.notes, why])))
