"""What a run's header says before it trains: what is measured, the partition, who attacks whose features."""

from __future__ import annotations

from vflpriv.config.registry import METHODS
from vflpriv.config.schema import RunConfig, TrainingConfig, dataset_partition_defaults
from vflpriv.config.sweep import ExperimentConfig


def partition_line(config: TrainingConfig, *, labels: bool = True) -> str:
    """The partition in use, naming the fields that came from the dataset's own defaults; the label adversary and its
    auxiliary labels only where a label attack runs (``labels``: a feature attack names its own roles)."""
    p = config.partition
    defaults = dataset_partition_defaults(config.dataset.name)
    own = [k for k, v in defaults.items() if getattr(p, k) == v]
    source = ("drawn from its unlabeled local samples" if p.aux_source == "unlabeled"
              else "drawn from the labeled aligned samples, which are then not scored")
    method = METHODS.get(config.method.name)
    every = p.active_labels_local if p.active_labels_local is not None else method.default_active_labels_local
    labeled = ("every aligned and unaligned sample labeled at the active party (party 0; the VFLHLP setting)"
               if every else f"{p.labeled} labeled at the active party (party 0)")
    line = f"partition: {p.parties} parties, {p.aligned_fraction:.0%} of the training samples aligned, {labeled}"
    if labels:
        line += f"; adversary: party {p.adversary}, which knows {p.aux} auxiliary labels ({source})"
    return line + (f" ({', '.join(own)}: {config.dataset.name}'s defaults)" if own else "")


def secrets_of(runs: list[RunConfig]) -> set[str]:
    """The secrets ``runs`` attack: ``labels`` (the active party's) and ``features`` (a party's)."""
    from vflpriv.runner.naming import roles_of

    return {roles_of(run)[0] for run in runs}


def feature_lines(runs: list[RunConfig]) -> list[str]:
    """Who attacks whose features, and what it knows, for each feature attack among ``runs``."""
    from vflpriv.runner.naming import roles_of

    seen = {}
    for run in runs:
        secret, adversary, victim = roles_of(run)
        if secret == "features":
            seen.setdefault((run.attack.name, adversary, victim), run.partition.aux_features)
    return [f"feature attack {name}: {'the server' if who == 'server' else f'party {who}'} attacks party {victim}'s "
            f"features, knowing them on {known if known else '10% of the'} aligned training samples "
            "(partition.aux_features)" for (name, who, victim), known in seen.items()]


def experiment_line(experiment: ExperimentConfig) -> str:
    """What is measured: method, dataset and its utility metric, attacks, the swept defense and the fixed ones, seeds."""
    from vflpriv.reports.tables import utility_label

    swept, defense = experiment.swept, "no defense"
    if swept and experiment.strengths:
        defense = f"defense {swept.name} ({swept.phase}) swept over {', '.join(f'{s:g}' for s in experiment.strengths)}"
    elif swept:
        own = ", ".join(f"{k}={v}" for k, v in swept.options.items() if v is not None)
        defense = f"defense {swept.name} ({swept.phase}) at {own}"
    fixed = [f"{d.name} ({d.phase}) at {'its identity' if d.strength is None else f'{d.strength:g}'}"
             for d in experiment.defenses if not d.sweep]  # acting in every run: said, not hidden (review l5)
    if fixed:
        defense = f"{'no defense swept' if swept is None else defense}; fixed: {', '.join(fixed)}"
    metric = _dataset_metric(experiment)
    return (f"{experiment.method.name} on {experiment.dataset.name} (utility: {utility_label(metric)}); attack "
            f"{', '.join(experiment.attack.names())} ({experiment.attack.phase}); {defense}; seeds "
            f"{', '.join(map(str, experiment.seeds))}")


def _dataset_metric(config: TrainingConfig) -> str:
    from vflpriv.data.load import load_dataset

    return load_dataset(config.dataset, parties=config.partition.parties).metric
