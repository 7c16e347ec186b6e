"""Names a plugin's class declares, which the registry checks (review hunt2 N7) below the engine and the defenses that
import them from here: the per-sample message kinds a feature attack reads, and the hook points a defense acts at."""

EMBEDDING = "embedding"
GRADIENT = "gradient"
#: The messages sent about each sample, which a feature attack reconstructs from (``FeatureAttack.observes``).
PER_SAMPLE = (EMBEDDING, GRADIENT)

ACTIVE_BATCH = "defend:active-batch"
ACTIVE_MODEL = "defend:active-model"
ACTIVE_LOSS = "defend:active-loss"
GRADIENT_COMPUTATION = "defend:gradient-computation"
ACTIVE_BACKWARD = "defend:active-backward"
#: The loop trains with the active party's soft labels where a label defense set them (``ActiveParty.soft_labels``).
SOFT_LABELS = "defend:soft-labels"
#: The loop recomputes the active party's soft targets from its model's current outputs at each update
#: (``soft_targets``).
SOFT_TARGETS = "defend:soft-targets"
PREDICTIONS = "defend:predictions"
DEFENSE_POINTS = frozenset({ACTIVE_BATCH, ACTIVE_MODEL, ACTIVE_LOSS, GRADIENT_COMPUTATION, ACTIVE_BACKWARD,
                            PREDICTIONS})
PASSIVE_BOTTOM = "defend:passive-bottom"
PASSIVE_LOSS = "defend:passive-loss"
PASSIVE_BACKWARD = "defend:passive-backward"
#: The passive party's points the shared finetuning loop calls.
PASSIVE_POINTS = frozenset({PASSIVE_BOTTOM, PASSIVE_LOSS, PASSIVE_BACKWARD})
#: ``passive_loss`` in pretraining: the SSL loops that train a party's encoder call it (local, cross-party, guided).
PRETRAIN_PASSIVE_LOSS = "defend:pretrain-passive-loss"
#: Hook points that are not points of the training loop: the channel, and the labels at binding.
MESSAGE = "message"
LABELS = "labels"
#: Every point a defense may list in ``hook_points`` (the registry refuses others).
KNOWN_POINTS = DEFENSE_POINTS | PASSIVE_POINTS | {PRETRAIN_PASSIVE_LOSS, SOFT_LABELS, SOFT_TARGETS, MESSAGE, LABELS}
