"""Review eps F3: a stored epsilon decided by earlier claim rules (``RunRecord.claim_version``) is never shown (read as
none, the note says why) and never resumed (the sweep deletes and recomputes it); an old store still opens."""

import hashlib
import json
import math
import sqlite3

import vflpriv.tradeoff.sweep as sweep_module
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store.records import CLAIM_VERSION
from vflpriv.store.sqlite import Store, read_store


def _configs():
    return ExperimentConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1}, "attack": {"name": "mc", "prior": "none"},
        "defenses": [{"name": "label-dp", "sweep": True}], "strengths": [2.0], "seeds": [0]}).runs()


def _written_by_older_code(path):
    """The stored record as vflpriv wrote it before the field: no claim_version."""
    with sqlite3.connect(path) as db:
        key, text = db.execute("SELECT key, record FROM runs").fetchone()
        data = json.loads(text)
        del data["claim_version"]
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(data), key))


def test_an_epsilon_of_earlier_claim_rules_is_withheld_on_read_and_recomputed_on_resume(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    with Store(path) as store:
        sweep_module.sweep(_configs(), store)
    (fresh,) = read_store(path).records
    assert fresh.epsilon == 2.0 and fresh.claim_version == CLAIM_VERSION
    _written_by_older_code(path)
    (old,) = read_store(path).records
    assert math.isnan(old.epsilon) and math.isnan(old.epsilon_delta) and "epsilon withheld" in old.notes
    assert old.utility == fresh.utility
    calls = []
    real = sweep_module.run_safely
    monkeypatch.setattr(sweep_module, "run_safely", lambda runs: calls.append(runs) or real(runs))
    with Store(path) as store:
        sweep_module.sweep(_configs(), store)
    (again,) = read_store(path).records
    assert len(calls) == 1 and again.epsilon == 2.0 and "withheld" not in again.notes


#: What of a DP defense's classes decides its claim: its mechanism's accounting and the counts it composes
#: (embedding-dp's steps and releases, dp-gaussian's backward: review eps5 R6), where it holds, what it names, its
#: notes (embedding-dp's test-row claim); of a method's, what it declares it uses (review final14 F7).
DP_MEMBERS = ("covers", "covers_data", "privacy_spent", "privacy_delta", "claimed_epsilon", "requested_claim", "uses",
              "steps", "releases", "backward", "notes", "secrets", "guards", "acts_for", "_released", "bind",
              "passive_backward")
METHOD_MEMBERS = ("label_uses", "feature_uses", "undeclared_label_uses", "undeclared_feature_uses",
                  "pretrain_reads_labels")


def _text(value) -> str:
    """A class member as pinned: a function's (a property's getter's) source, else its value (a set's sorted)."""
    import inspect

    function = getattr(getattr(value, "fget", value), "__func__", getattr(value, "fget", value))
    if inspect.isfunction(function):
        return inspect.getsource(function)
    return repr(sorted(value)) if isinstance(value, (set, frozenset)) else repr(value)


def _claim_sources() -> dict[str, str]:
    """The source of what decides where an epsilon is claimed: every DP defense's :data:`DP_MEMBERS` and every built-in
    method's :data:`METHOD_MEMBERS` along their MROs, the accountants, the undeclared-code rules of methods, defenses
    and pretraining keys, the planner's checks and read-arounds, and what a run records of the claims."""
    import inspect
    from importlib.metadata import entry_points

    from vflpriv.defenses.dp_gaussian import spent
    from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
    from vflpriv.common import declarations as common
    from vflpriv.defenses import declarations
    from vflpriv.defenses.base import Protection
    from vflpriv.methods.base import _undeclared, own_code, pretraining_reads_labels
    from vflpriv.runner import accountants, claims
    from vflpriv.config.keys import loaded_code
    from vflpriv.runner import defense_planning as planning

    dp = [cls for cls in (entry.load() for entry in entry_points(group="vflpriv.defenses"))
          if cls.privacy_spent is not Protection.privacy_spent]
    methods = [entry.load() for entry in entry_points(group="vflpriv.methods")]
    members = {f"{k.__module__}.{k.__qualname__}.{name}": _text(vars(k)[name])
               for classes, names in ((dp, DP_MEMBERS), (methods, METHOD_MEMBERS))
               for cls in classes for k in cls.__mro__ for name in names if name in vars(k)}
    parts = [spent, gaussian_epsilon, common, declarations, own_code, _undeclared, pretraining_reads_labels,
             Protection.label_reads, Protection.feature_reads, Protection.undeclared_reads, planning._read_around,
             planning._reads, planning._check_label_readers, planning.plan_defenses, planning._check_backward,
             claims.judged, claims.claiming, claims.composed, claims._voiding, claims.withheld, claims.record_claims,
             claims.guards_victim, claims.foreign_accounting, claims._foreign_member, claims._holds, claims._padded,
             claims.claim_secrets, claims.accounting_class, claims._unrecorded, claims._uncovered, claims.made_types,
             claims.altered, claims._unmade, claims._shown, claims._vflpriv_code, loaded_code, accountants.recounted,
             accountants._finetuned_by, accountants._label_uses, accountants._row_mechanisms,
             accountants.accounting_of]  # the key reads a plugin's class before the first look
    members |= {f"vflpriv.runner.claims.{name}": repr(sorted(map(str, getattr(claims, name))))
                for name in ("ACCOUNTING", "CLAIM_KEEPING", "_PYTHONS", "_TORCH_STATE", "_MODULE_STORAGE", "_NAMES")}
    members["vflpriv.runner.claims._DEPTH"] = str(claims._DEPTH)
    members["vflpriv.runner.accountants.SHARED_ONCE"] = repr([f.__qualname__ for f in accountants.SHARED_ONCE])
    members["vflpriv.runner.claims._PYTHON_MEMBERS"] = repr(sorted(claims._PYTHON_MEMBERS.items(), key=str))
    members["vflpriv.data declarations"] = _loader_declarations()
    return members | {f"{getattr(p, '__module__', p.__name__)}.{getattr(p, '__qualname__', '')}": inspect.getsource(p)
                      for p in parts}


def _loader_declarations() -> str:
    """What the built-in loaders declare of fitted preprocessings (``VerticalDataset.fitted_features``: it decides a
    feature epsilon, and unlike a plugin's it is not in the data fingerprint, review fe2 R3): each ``fitted=`` or
    ``fitted_features=`` given in vflpriv.data's modules, the texts it names, and how the CTR loaders compose them."""
    import ast
    import inspect
    from pathlib import Path

    import vflpriv.data
    from vflpriv.data import ctr, prep

    found = []
    for path in sorted(Path(vflpriv.data.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            found += [f"{path.stem}: {k.arg}={ast.unparse(k.value)}" for k in getattr(node, "keywords", [])
                      if k.arg in ("fitted", "fitted_features")]
    texts = [repr(getattr(prep, n)) for n in ("STANDARDISED", "MIN_MAX", "VOCABULARY")]
    return "\n".join(found + texts + [inspect.getsource(ctr._fitted), repr(ctr.AVAZU_FIELDS)])


#: CLAIM_VERSION and the digest of :func:`_claim_sources` it was last checked against (review eps2 G5).
PINNED_CLAIM_RULES = (7, "a2a752adbe029897")


def _digest() -> str:
    sources = _claim_sources()
    return hashlib.sha256("\n".join(f"{k}\n{sources[k]}" for k in sorted(sources)).encode()).hexdigest()[:16]


def test_the_claim_deciding_code_is_pinned_beside_claim_version():
    digest = _digest()
    assert (CLAIM_VERSION, digest) == PINNED_CLAIM_RULES, (
        f"the code deciding where an epsilon is claimed changed (digest {digest}): bump CLAIM_VERSION if a claim can "
        "change, then update this hash (PINNED_CLAIM_RULES)")


def _uses(self):
    return 1


def test_the_pin_sees_each_member_that_decides_a_claim(monkeypatch):
    """Review final14 F7 (and eps5 R6): each of these was changed in process and the digest stayed the same."""
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.defenses.embedding_dp import EmbeddingDP
    from vflpriv.defenses.label_dp import LabelDP
    from vflpriv.methods.base import Method
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.runner import claims
    from vflpriv.runner import defense_planning as planning

    before = _digest()
    for owner, name in ((EmbeddingDP, "uses"), (EmbeddingDP, "steps"), (EmbeddingDP, "releases"),
                        (GaussianDP, "backward"), (EmbeddingDP, "notes"), (LabelDP, "secrets"),
                        (GaussianDP, "privacy_delta"), (Method, "undeclared_label_uses"), (SplitNN, "label_uses"),
                        (planning, "plan_defenses"), (planning, "_check_backward"), (claims, "record_claims"),
                        (claims, "withheld"), (claims, "CLAIM_KEEPING")):
        with monkeypatch.context() as patch:
            patch.setattr(owner, name, frozenset() if name in ("secrets", "CLAIM_KEEPING") else _uses, raising=False)
            assert _digest() != before, f"{owner.__name__}.{name}"


def test_the_pin_sees_the_built_in_loaders_declarations(monkeypatch):
    """Review fe2 R3: a built-in loader's declaration of fitted preprocessings decides its feature epsilon."""
    from vflpriv.data import ctr, prep

    before = _digest()
    for owner, name, value in ((prep, "STANDARDISED", ""), (ctr, "_fitted", lambda sparse, dense: "")):
        with monkeypatch.context() as patch:
            patch.setattr(owner, name, value)
            assert _digest() != before, name
