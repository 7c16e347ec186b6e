"""What ``vflpriv describe NAME`` prints: a component's purpose and its options (type, default, description),
read from its options model, so the documentation cannot drift from what is validated."""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from vflpriv.common.components import built
from vflpriv.common.errors import UnknownNameError, VflprivError, class_named
from vflpriv.config import presets
from vflpriv.config.registry import ATTACKS, AUDITORS, DATASETS, DEFENSES, METHODS
from vflpriv.defenses.declarations import declared_secrets
from vflpriv.engine.hooks import PASSIVE_POINTS


@dataclass
class Description:
    kind: str
    name: str
    summary: str
    facts: dict[str, str] = field(default_factory=dict)
    options: list[tuple[str, str, str, str]] = field(default_factory=list)  # name, type, default, description
    prefix: str = ""


def type_name(annotation: Any) -> str:
    """A readable type: ``int``, ``float | None``, ``sgd | adam``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def options_of(model: type[BaseModel]) -> list[tuple[str, str, str, str]]:
    rows = []
    for name, info in model.model_fields.items():
        default = info.default_factory() if info.default_factory is not None else info.default
        shown = "required" if default is PydanticUndefined else repr(default)
        rows.append((name, type_name(info.annotation), shown, info.description or ""))
    return rows


def _summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring: a class without one borrows its nearest base's from outside vflpriv
    (a plugin's own base class), never vflpriv's (a plugin method would read "Base of registered methods")."""
    own = next((c.__dict__["__doc__"] for c in obj.__mro__ if (c is obj or not _vflprivs(c))
                and c.__dict__.get("__doc__")), None) if isinstance(obj, type) else obj.__doc__
    if not own:
        return f"{getattr(obj, '__name__', obj)} (no docstring)"
    return inspect.cleandoc(own).split("\n\n")[0].replace("\n", " ")


def _vflprivs(cls: type) -> bool:
    """Whether ``cls`` is one of vflpriv's own classes, or Python's ``object``."""
    return cls is object or cls.__module__.split(".")[0] == "vflpriv"


def one_line(kind: str, name: str) -> str:
    """What ``vflpriv list KINDs`` says of ``name``: its description's first paragraph, cut to a line (a plugin
    that fails to load says so instead of stopping the list)."""
    registry, describer = DESCRIBERS[kind]
    try:
        text = describer(name, registry.get(name)).summary
    except VflprivError as exc:
        return f"(cannot be loaded: {exc})"
    text = text.replace("``", "").rstrip(".")
    return text if len(text) <= 110 else text[:107].rsplit(" ", 1)[0] + " ..."


def _method(name: str, cls: Any) -> Description:
    supports = cls.supports
    facts = {"pretrains": str(cls.pretrains), "federated": str(cls.federated),
             "sends": ", ".join("/".join(t) for t in sorted(cls.sends)) or "nothing",
             "pretraining reads labels": str(cls.pretrain_reads_labels),
             "label uses outside the shared loop (default options)": _uses(cls, "label_uses"),
             **_undeclared(cls, "label_uses", "dp-gaussian records no epsilon for it"),
             "finetune.top": ", ".join(sorted(s.split(":")[1] for s in supports if s.startswith("top:"))),
             "finetune.local_updates > 1": str("local-updates" in supports),
             "hook points it calls": ", ".join(sorted(s for s in supports if ":" in s and not
                                                      s.startswith("top:"))) or "none",
             "feature uses outside the shared loop (default options)": _uses(cls, "feature_uses"),
             **_undeclared(cls, "feature_uses",
                           "embedding-dp records no training epsilon and no test-row claim for it")}
    return Description("method", name, _summary(cls), facts, options_of(cls.Options), "method.options.")


def _uses(cls: Any, declared: str) -> str:
    """What a method declares by ``declared`` (``label_uses``: what voids dp-gaussian's claim; ``feature_uses``:
    embedding-dp's) under the default options, or why it cannot be said."""
    try:
        uses = getattr(cls(cls.Options()), declared)()
    except Exception as exc:  # noqa: BLE001 - a plugin's constructor
        return f"unknown ({class_named(exc)} under the default options)"
    return "; ".join(uses) or "none"


def _undeclared(cls: Any, uses: str, follows: str) -> dict[str, str]:
    """What a method does not declare of ``uses`` (its own code without ``Method.label_uses``/``feature_uses`` beside
    it: ``Method.undeclared_label_uses``), and what follows; nothing where it declares all."""
    said = _uses(cls, f"undeclared_{uses}")
    return {} if said == "none" else {f"{uses.replace('_', ' ')} it does not declare": f"{said}: {follows}"}


def _attack(name: str, cls: Any) -> Description:
    attack = built("attack", name, lambda: cls(cls.Options()))  # its declarations under the default options
    features = getattr(cls, "secret", "labels") == "features"
    knows = ({"infers": "a victim party's features (attack.victim)",
              "run by": ", ".join(ROLE_WORDS[r] for r in sorted(cls.roles)) + " (attack.adversary)",
              "knows": "the victim's features of partition.aux_features aligned training samples (default 10%)"}
             if features else {"infers": "the active party's labels",
                               "needs auxiliary labels": str(cls.needs_aux)})
    facts = {"follows": cls.anchor or "vflpriv's own", "needs": _needs(attack),
             "binary tasks only": str(cls.binary_only), **knows,
             "audit options": repr(cls.audit_options), "search space (attack.tune)": _space(attack),
             "kind": (cls.kind or "none declared") + (" (the strongest: run by audit --quick)"
                                                      if cls.strongest_of_kind else "")}
    return Description("attack", name, _summary(cls), facts, options_of(cls.Options), "attack.options.")


#: An adversary role in words (a feature attack's ``roles``).
ROLE_WORDS = {"active": "the active party", "passive": "a passive party", "server": "the server"}


def _space(attack: Any) -> str:
    """The candidates a tuned attack selects among, and what successive halving shortens; or why it has none."""
    space = attack.space()
    if not space:
        return f"none: {attack.untunable or 'it declares none'}"
    grid = "; ".join(f"{k} in {list(v)}" for k, v in space.items())
    return grid + (f"; early rounds shorten {attack.budget_option}" if attack.budget_option else "")


def _needs(attack: Any) -> str:
    """What the attack reads or does, under its default options (``<phase>``: the attacked phase)."""
    needs = ["the adversary's bottom snapshot of the attacked phase"] if attack.needs_encoder else []
    pairs = [*attack.needs_messages, *attack.required_messages("<phase>")]
    if pairs:
        needs.append("received " + ", ".join("/".join(p) for p in pairs) + " messages")
    if getattr(attack, "secret", "labels") == "features":
        needs.append("the rows it received from the victim about each sample (of the kinds "
                     + ", ".join(attack.observes) + ": the first the method sends that role in the attacked phase)")
    observation = attack.observation()
    if observation is not None:
        steps = "every exchange" if observation.steps is None else f"the first {observation.steps} exchange(s)"
        kept = "embedding, gradient" + (", a copy of its bottom" if observation.bottom else "")
        needs.append(f"observes its own training: {steps} of the {observation.epochs} epoch(s) ({kept})")
    if attack.acts:
        needs.append("acts during training (its runs train their own federation; utility measured under attack)")
    return "; ".join(needs) or "nothing"


def _defense(name: str, cls: Any) -> Description:
    axis = cls.axis
    kinds = (f"{', '.join(cls.default_kinds)} messages by default (supports {', '.join(cls.supported_kinds)})"
             if cls.supported_kinds and "labels" not in cls.supported_kinds else
             "no message in transit: what a passive party's embeddings carry, at that party's own points"
             if cls.hook_points & PASSIVE_POINTS else "no message")
    optional = getattr(cls, "optional_points", frozenset())
    acts = ", ".join(f"{p} (where the method's training calls it)" if p in optional else p
                     for p in sorted(cls.hook_points))
    facts = {"acts at": acts, "follows": cls.anchor or "vflpriv's own",
             "strength": f"{axis.name} in [{axis.low:g}, {axis.high:g}], {axis.stronger} protects more, "
                         f"identity {axis.identity:g}",
             "protects": kinds,
             "binary tasks only": str(cls.binary_only),
             "reads the active party's labels": "; ".join(cls.label_reads()) or "no",
             "reads a passive party's features": "; ".join(cls.feature_reads()) or "no",
             "audit strengths": "; ".join(f"{p}: {', '.join(f'{v:g}' for v in s)}" for p, s in cls.audit_strengths.items())
             or "none",
             "claims to protect": ", ".join(sorted(declared_secrets(cls)))}
    claims = getattr(cls, "audit_epsilons", {})
    if claims:
        delta = getattr(cls.Options.model_validate({}), "delta", 0.0)  # the claims' delta (its option's default)
        at = f" at delta {delta:g}" if delta else " (pure)"
        facts["audit strengths"] = "; ".join(
            f"{p}: the {axis.name} that spends epsilon {', '.join(f'{e:g}' for e in s)}{at} over the audited run's "
            "updates "
            f"({', '.join(f'{v:g}' for v in cls.audit_strengths.get(p, ()))} at the default finetuning)"
            for p, s in claims.items())
    if cls.embedding_audit_strengths:
        facts["audit strengths on embeddings"] = "; ".join(
            f"{p}: {', '.join(f'{v:g}' for v in s)}" for p, s in cls.embedding_audit_strengths.items())
    if getattr(cls, "phases", None):  # a passive party's defense: where it acts, and why not elsewhere
        facts["phases"] = " and ".join(cls.phases) + (f" ({cls.phase_reason})" if cls.phase_reason else "")
    if cls.cost:
        facts["extra cost per update"] = cls.cost
    if cls.pays:
        facts["when it pays"] = cls.pays
    return Description("defense", name, _summary(cls), facts, options_of(cls.Options), "defenses.N.options.")


def _auditor(name: str, cls: Any) -> Description:
    facts = {"threat model": cls.threat_model, "reads beyond a party's view": "; ".join(cls.privileges),
             "audits": ", ".join(n for n in DEFENSES.names() if cls.audits(DEFENSES.get(n))) or "no registered defense",
             "records": "auditor_* fields and the canary audit's auditor lines, never leakage, CAP, verdicts or the "
                        "attacks' worst case",
             "follows": cls.anchor or "vflpriv's own"}
    return Description("auditor", name, _summary(cls), facts, options_of(cls.Options),
                       "finetune.auditor_options.")


def _dataset(name: str, loader: Any) -> Description:
    from vflpriv.config.schema import PartitionConfig
    from vflpriv.data.catalog import DATASET_INFO, status

    info = DATASET_INFO.get(name)

    own = getattr(loader, "default_partition", {})
    base = PartitionConfig()
    facts = {"default partition": repr(own) if own else (
        f"none of its own (vflpriv's: aligned_fraction {base.aligned_fraction}, labeled {base.labeled}, "
        f"aux {base.aux})")}
    if info is not None:
        present, where, how = status(name)
        facts |= {"kind": info.kind, "files": where if present else (f"present but unreadable here; {how}" if where
                                                                      else f"missing; {how}")}
        if info.layout:
            facts["layout"] = info.layout
    summary = info.description if info is not None else _summary(loader)
    return Description("dataset", name, summary, facts)


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = repr(value)
    return out


def _preset(name: str, data: dict[str, Any]) -> Description:
    return Description("preset", name, presets.description(name), _flat(data))


def _unregistered(path: str) -> list[Description]:
    """``package.module:Object`` described as each kind it fits; an import failure is said as such, and so is a
    declaration of a class of that kind (review hunt2 N5: a bad axis crashed here)."""
    found, problems, declared = [], [], []
    for kind, (registry, describer) in DESCRIBERS.items():
        if registry is presets:
            continue
        try:
            found.append(describer(path, registry.get(path)))
        except UnknownNameError as exc:
            if str(exc).startswith("cannot import"):
                raise
            problems.append(kind)
            declared += [str(exc)] if f"{kind}: expected " not in str(exc) else []
    if not found and declared:
        raise UnknownNameError(declared[0])
    if not found:
        raise UnknownNameError(f"'{path}' is not a vflpriv {', '.join(problems[:-1])} or {problems[-1]}")
    return found


DESCRIBERS: dict[str, tuple[Any, Any]] = {
    "method": (METHODS, _method), "attack": (ATTACKS, _attack), "defense": (DEFENSES, _defense),
    "dataset": (DATASETS, _dataset), "auditor": (AUDITORS, _auditor), "preset": (presets, _preset),
}


def describe(name: str) -> list[Description]:
    """Every registered component called ``name`` (a name can be, say, both a method and a dataset), or the
    unregistered ``package.module:Object`` as whatever kind of component it is."""
    if ":" in name:
        return _unregistered(name)
    found = [describer(name, registry.get(name)) for registry, describer in DESCRIBERS.values()
             if name in registry.names()]
    if not found:
        valid = "; ".join(f"{kind}s: {', '.join(registry.names())}" for kind, (registry, _) in DESCRIBERS.items())
        raise UnknownNameError(f"nothing is registered as '{name}'; {valid}")
    return found
