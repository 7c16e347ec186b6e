"""A record's configuration as a defended run and the undefended run it is judged against share it: every setting but
the defenses, the seed, the tables' own axes, the roles and what only measures (the reports and the worst case's check
that every attack it takes was measured, ``tradeoff.cap``)."""

from __future__ import annotations

import hashlib
import json

from vflpriv.config.keys import keyed
from vflpriv.tradeoff.variants import OWN_AXES, ROLES, flatten

#: Settings that only measure: a learning curve, the auditor the audit attaches to a DP defense's trainings alone and
#: its options (crafted canaries change a few canary rows' inputs, but no undefended run can carry an auditor: a DP
#: training is judged against the undefended run of its configuration, as the audit does; review fin2 G2); a defended
#: run and its undefended one are judged alike whatever they say.
MEASURES_ONLY = frozenset({"finetune.curve", "finetune.auditor"})
MEASURES_ONLY_PREFIXES = ("finetune.auditor_options.",)
#: Settings a feature attack never reads (the label attacks' prior: a feature run's prior is ``partition.aux_features``'
#: own), so two feature runs that differ only there are one configuration.
UNREAD_BY_FEATURES = frozenset({"attack.prior", "attack.prior_epochs", "attack.prior_ssl"})


def digest(config, *, unread: frozenset[str] = UNREAD_BY_FEATURES) -> str:
    """One record's configuration (its ``config`` JSON) as ``reports.features.settings`` tells configurations apart."""
    kept = {k: v for k, v in _flat(config).items() if k not in OWN_AXES and k not in ROLES
            and k not in MEASURES_ONLY and k not in unread and not k.startswith(("defenses", *MEASURES_ONLY_PREFIXES))}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _flat(config) -> dict:
    """A record's settings as the keys read them (a setting added later at its neutral value left out); an edited
    record whose config the keys cannot read (a section that is no mapping: review fin F4) as it is written."""
    try:
        raw = json.loads(config) if isinstance(config, str) and config else {}
    except ValueError:
        return {"config": config}
    if not isinstance(raw, dict):
        return {"config": config}
    sections = [raw.get(s, {}) for s in ("method", "partition", "finetune", "attack")]
    defenses = raw.get("defenses") or []
    readable = (all(isinstance(s, dict) for s in sections) and isinstance(defenses, list)
                and all(isinstance(d, dict) and isinstance(d.get("name"), str) for d in defenses))
    return flatten(keyed(raw) if readable else raw)
