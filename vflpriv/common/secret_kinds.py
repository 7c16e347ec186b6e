"""The secrets vflpriv measures the leakage of: the active party's labels and a party's features. Every table keyed
by secret (the registry's attack check, the records' check, the planner's priors, the runner's attack runs, the
search's holdouts) is keyed by these."""

LABELS, FEATURES = "labels", "features"
SECRETS = (LABELS, FEATURES)

#: Each secret's (epsilon, delta) fields of a record: a claim about one secret says nothing of the other.
CLAIM_FIELDS = {LABELS: ("epsilon", "epsilon_delta"), FEATURES: ("epsilon_features", "epsilon_features_delta")}
