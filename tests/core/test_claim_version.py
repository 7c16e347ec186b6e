"""Review eps F3: a stored epsilon decided by earlier claim rules (``RunRecord.claim_version``) is never shown (read as
none, the note says why) and never resumed (the sweep deletes and recomputes it); an old store still opens."""

import functools
import hashlib
import inspect
import json
import math
import sqlite3

import vflpriv.tradeoff.sweep as sweep_module
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store.records import CLAIM_VERSION
from vflpriv.store.sqlite import Store, read_store

#: A function's, class's or module's source, read once per object (the files do not change while the tests run; a
#: patched member is another object): each digest reads some 300 sources.
_source = functools.lru_cache(maxsize=None)(inspect.getsource)


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
    function = getattr(getattr(value, "fget", value), "__func__", getattr(value, "fget", value))
    if inspect.isfunction(function):
        return _source(function)
    return repr(sorted(value)) if isinstance(value, (set, frozenset)) else repr(value)


#: Modules each of whose own functions, classes and constants decides a claim, its value or its reading (review tidy
#: F2): the DP defenses' mechanisms, counts and noise, the accountants that judge a stored epsilon, the claims' rules,
#: the planner's checks.
CLAIM_MODULES = ("vflpriv.defenses.dp_gaussian", "vflpriv.defenses.embedding_dp",
                 "vflpriv.defenses.embedding_dp_accounting", "vflpriv.defenses.label_dp", "vflpriv.runner.accountants",
                 "vflpriv.runner.claims", "vflpriv.runner.defense_planning")


def _stable(value) -> str | None:
    """A module member's text: a function's or class's source, a container's items' (a class inside it named), a
    constant's repr; None for what has no text but an address (a registry: its classes are pinned where defined)."""
    import dataclasses

    if isinstance(value, (set, frozenset)):
        return repr(sorted(map(str, map(_stable, value))))
    if isinstance(value, dict):
        return repr([(_stable(k), _stable(v)) for k, v in value.items()])
    if isinstance(value, (tuple, list)):
        return repr([_stable(v) for v in value])
    if inspect.isclass(value):
        return f"{value.__module__}.{value.__qualname__}"
    if dataclasses.is_dataclass(value):  # an accountant: its functions
        return repr([(f.name, _stable(getattr(value, f.name))) for f in dataclasses.fields(value)])
    function = inspect.unwrap(value) if callable(value) else value  # an lru_cache's function
    if inspect.isfunction(function):
        return _source(function)
    text = repr(value)
    return None if " at 0x" in text else text


def _module_sources(name: str) -> dict[str, str]:
    """What module ``name`` itself defines (its functions and classes by source) and holds (its constants: builtin
    values, a dict of accountants included)."""
    import importlib

    found = {}
    for attr, value in vars(importlib.import_module(name)).items():
        if attr.startswith("__") or inspect.ismodule(value):
            continue
        if inspect.isclass(value) or callable(value):  # what it imports is pinned where defined, if at all
            own = getattr(value, "__module__", None) == name
            text = (_source(value) if inspect.isclass(value) else _stable(value)) if own else None
        else:  # a constant of builtin types (a registry's loaded entries are no constant)
            text = _stable(value) if type(value).__module__ == "builtins" else None
        if text is not None:
            found[f"{name}.{attr}"] = text
    return found


def _claim_sources() -> dict[str, str]:
    """The source of what decides where an epsilon is claimed: every DP defense's :data:`DP_MEMBERS` and every built-in
    method's :data:`METHOD_MEMBERS` along their MROs, :data:`CLAIM_MODULES`, the undeclared-code rules of methods,
    defenses and pretraining keys, the planner's read-arounds, what a run records of the claims and what a read
    withholds."""
    from importlib.metadata import entry_points

    from vflpriv.common import declarations as common
    from vflpriv.defenses import declarations
    from vflpriv.defenses.base import Protection
    from vflpriv.methods.base import _undeclared, own_code, pretraining_reads_labels
    from vflpriv.config.keys import loaded_code
    from vflpriv.runner import naming
    from vflpriv.store import records
    from vflpriv.tradeoff import spelling

    dp = [cls for cls in (entry.load() for entry in entry_points(group="vflpriv.defenses"))
          if cls.privacy_spent is not Protection.privacy_spent]
    methods = [entry.load() for entry in entry_points(group="vflpriv.methods")]
    members = {f"{k.__module__}.{k.__qualname__}.{name}": _text(vars(k)[name])
               for classes, names in ((dp, DP_MEMBERS), (methods, METHOD_MEMBERS))
               for cls in classes for k in cls.__mro__ for name in names if name in vars(k)}
    for name in CLAIM_MODULES:
        members |= _module_sources(name)
    parts = [common, declarations, own_code, _undeclared, pretraining_reads_labels, Protection.label_reads,
             Protection.feature_reads, Protection.undeclared_reads, loaded_code, records.stale_claim,
             records.without_stale_claim, records._claim_problem, records._non_finite, naming.unclaimable,
             spelling.withheld]  # _non_finite: how an infinite epsilon is stored (and so read back)
    members["vflpriv.store.records.CLAIM_PAIRS"] = repr(records.CLAIM_PAIRS)
    members["vflpriv.store.records._INFINITIES"] = repr(records._INFINITIES)
    members["vflpriv.runner.naming.CLAIMS"] = _stable(naming.CLAIMS)
    members["vflpriv.data declarations"] = _loader_declarations()
    return members | {f"{getattr(p, '__module__', p.__name__)}.{getattr(p, '__qualname__', '')}": _source(p)
                      for p in parts}


def _loader_declarations() -> str:
    """What the built-in loaders declare of fitted preprocessings (``VerticalDataset.fitted_features``: it decides a
    feature epsilon, and unlike a plugin's it is not in the data fingerprint, review fe2 R3): each ``fitted=`` or
    ``fitted_features=`` given in vflpriv.data's modules, the texts it names, and how the CTR loaders compose them."""
    import ast
    from pathlib import Path

    import vflpriv.data
    from vflpriv.data import ctr, prep

    found = []
    for path in sorted(Path(vflpriv.data.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            found += [f"{path.stem}: {k.arg}={ast.unparse(k.value)}" for k in getattr(node, "keywords", [])
                      if k.arg in ("fitted", "fitted_features")]
    texts = [repr(getattr(prep, n)) for n in ("STANDARDISED", "MIN_MAX", "VOCABULARY")]
    return "\n".join(found + texts + [_source(ctr._fitted), repr(ctr.AVAZU_FIELDS)])


#: CLAIM_VERSION and the digest of :func:`_claim_sources` it was last checked against (review eps2 G5).
PINNED_CLAIM_RULES = (7, "eb93d363d28124aa")


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


def _claim_deciders():
    """Review tidy F2: module functions and constants that decide a claim, its value or its reading, that the pin
    missed (a change to each left the digest as it was)."""
    from vflpriv.defenses import dp_gaussian, embedding_dp, label_dp
    from vflpriv.runner import accountants, claims, naming
    from vflpriv.runner import defense_planning as planning
    from vflpriv.store import records

    return ((dp_gaussian, "label_reads"), (dp_gaussian, "noise_for"), (claims, "tampered"),
            (accountants, "_label_void"), (accountants, "_feature_void"), (accountants, "_settings_void"),
            (accountants, "ACCOUNTANTS"), (records, "stale_claim"), (planning, "_check_secrets"),
            (label_dp, "randomised_response"), (embedding_dp, "_scale"), (naming, "unclaimable"))


CLAIM_DECIDERS = _claim_deciders()


def test_the_pin_sees_each_member_that_decides_a_claim(monkeypatch):
    """Review final14 F7 (and eps5 R6): each of these was changed in process and the digest stayed the same."""
    from vflpriv.defenses import dp_gaussian
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
                        (claims, "withheld"), (claims, "CLAIM_KEEPING"), (dp_gaussian, "uses_outside_loop"),
                        *CLAIM_DECIDERS):
        with monkeypatch.context() as patch:
            patch.setattr(owner, name, frozenset() if name in ("secrets", "CLAIM_KEEPING", "ACCOUNTANTS") else _uses,
                          raising=False)
            assert _digest() != before, f"{owner.__name__}.{name}"


def test_the_pin_sees_a_doubled_count_of_label_reads(monkeypatch):
    """Review tidy F2's example: twice dp-gaussian's label reads moves its claimed epsilon, and so the digest."""
    from vflpriv.config.schema import FinetuneConfig
    from vflpriv.defenses import dp_gaussian

    finetune, before = FinetuneConfig(epochs=20), _digest()
    claimed = dp_gaussian.GaussianDP.claimed_epsilon(10.37, finetune=finetune, options={})
    real = dp_gaussian.label_reads
    monkeypatch.setattr(dp_gaussian, "label_reads", lambda finetune: 2 * real(finetune))
    assert dp_gaussian.GaussianDP.claimed_epsilon(10.37, finetune=finetune, options={}) != claimed
    assert _digest() != before


def test_the_pin_sees_the_built_in_loaders_declarations(monkeypatch):
    """Review fe2 R3: a built-in loader's declaration of fitted preprocessings decides its feature epsilon."""
    from vflpriv.data import ctr, prep

    before = _digest()
    for owner, name, value in ((prep, "STANDARDISED", ""), (ctr, "_fitted", lambda sparse, dense: "")):
        with monkeypatch.context() as patch:
            patch.setattr(owner, name, value)
            assert _digest() != before, name
