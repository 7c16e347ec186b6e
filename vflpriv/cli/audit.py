"""``vflpriv audit``: the whole battery of attacks and defenses on one method, with verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional, get_args

import typer

from vflpriv.cli.app import DRY_RUN, QUIET, STORE_PATH, app, command_line
from vflpriv.cli.evaluate import SEARCH_BUDGET, numbers
from vflpriv.common.console import make_console
from vflpriv.common.progress import stage
from vflpriv.common.errors import ConfigError, IncompatibleError
from vflpriv.common.lazy import importing
from vflpriv.config.parse import (
    DATASET_SETTINGS,
    apply_options,
    check_shape,
    resolve_dataset_settings,
    resolve_method_options,
    validate,
)
from vflpriv.config.presets import settings, user_patterns
from vflpriv.config.registry import ATTACKS, DEFENSES
from vflpriv.config.schema import Phase
from vflpriv.store import cache
from vflpriv.store.folders import DEFAULT_OUT
from vflpriv.store.provenance import versions
from vflpriv.workflows.audit_config import AUTO_CANARIES, AUTO_SHARE, AuditConfig

if TYPE_CHECKING:
    import pandas as pd


#: Each comma-separated option's valid names (read only when it is refused as empty) and what leaving it out gives.
CHOICES = {"--attacks": (lambda: ATTACKS.names(), "the default battery"),
           "--defenses": (lambda: ["none", *DEFENSES.names()], "every registered one"),
           "--phases": (lambda: list(get_args(Phase)), "finetune (and pretrain where the method pretrains)")}


def _names(text: str | None, option: str) -> list[str] | None:
    """Comma-separated names, or None when the option is left out; given empty, it is refused (it would otherwise
    read as "every one"), naming the valid ones."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",")]
    choices, default = CHOICES[option]
    if not any(names):
        raise ConfigError(f"{option} is empty; give names, comma-separated ({', '.join(choices())}), or leave it out "
                          f"for {default}")
    if not all(names):  # 'mc,': as evaluate's --attack (review lo3 F5), not a name dropped in silence
        raise ConfigError(f"{option} '{text}' names an empty item; give names, comma-separated "
                          f"({', '.join(choices())})")
    return names


def build_audit(*, config: Optional[Path], method: str, dataset: Optional[str], attacks: Optional[str],
                defenses: Optional[str], phases: Optional[str], seeds: Optional[str], jobs: Optional[int],
                backend: Optional[str], device: Optional[str], all_adversaries: bool, overrides: list[str],
                preset: Optional[str] = None, tune_attacks: Optional[bool] = None,
                search_budget: Optional[int] = None, canaries: Optional[int] = None,
                quick: bool = False) -> AuditConfig:
    """defaults <- preset <- config file <- command-line options <- ``--set key=value``; a ``--set`` that replaces
    what an option given beside it set is refused (``--quick --set audit.profile=full`` ran the full audit)."""
    data = settings(preset=preset, config=config)
    per_dataset = data.pop(DATASET_SETTINGS, None)
    check_shape(AuditConfig, data, source=f"config file {config}" if config else f"preset {preset}")
    given = [("--method", ("method", "name"), method),
             ("--attacks", ("audit", "attacks"), _names(attacks, "--attacks")),
             ("--phases", ("audit", "phases"), _names(phases, "--phases")),
             ("--defenses", ("audit", "defenses"),
              None if defenses is None else [{"name": n} for n in _names(defenses, "--defenses")]),
             ("--all-adversaries", ("audit", "adversaries"), "all" if all_adversaries else None),
             ("--quick", ("audit", "profile"), "quick" if quick else None),
             ("--tune-attacks/--no-tune-attacks", ("audit", "tune"), tune_attacks),
             ("--search-budget", ("audit", "search_budget"), search_budget),
             ("--canaries", ("audit", "canaries"), canaries), ("--dataset", ("dataset", "name"), dataset),
             ("--jobs", ("jobs",), jobs), ("--backend", ("backend",), backend), ("--device", ("device",), device),
             ("--seeds", ("seeds",), None if seeds is None else numbers(seeds, int, "--seeds"))]
    apply_options(data, given, overrides)
    resolve_method_options(data, must_match=user_patterns(data, preset))
    resolve_dataset_settings(data, per_dataset)
    return validate(AuditConfig, data)


def _context(cfg: AuditConfig) -> dict:
    from vflpriv.workflows.audit import canaries as planted_canaries
    from vflpriv.workflows.audit import prior_ssl, profile_note, resolved_options

    p = cfg.partition
    pretraining = "SimSiam" if prior_ssl(cfg) == "simsiam" else "the method's own pretraining"
    planted = planted_canaries(cfg)
    return {
        "method": cfg.method.name, "dataset": cfg.dataset.name, "prior": cfg.audit.prior, "seeds": cfg.seeds,
        "tuned": cfg.audit.tune, "search_budget": cfg.audit.search_budget,
        "settings": {
            "command": command_line(),
            "parties": p.parties, "aligned fraction": p.aligned_fraction, "labeled": p.labeled, "aux": p.aux,
            "adversary": "every passive party" if cfg.audit.adversaries == "all" else f"party {p.adversary}",
            "feature adversaries": (", ".join(cfg.audit.feature_adversaries) + " (the active party and the server "
                                    "attack party 1's features, the passive adversary the active party's), knowing "
                                    + (f"{p.aux_features}" if p.aux_features else "10% of the") + " aligned training "
                                    "samples' victim features (partition.aux_features)"),
            "seeds": ", ".join(map(str, cfg.seeds)),
            "profile": profile_note(cfg),
            "canaries": (f"{planted} random-label canaries among the labeled training samples (the trainings whose "
                         "labels the attacked phase reads)" if planted else "none"),
            "attacks": (f"tuned on the adversary's auxiliary labels, search budget {cfg.audit.search_budget}"
                        if cfg.audit.tune else "untuned (their options as given)"),
            "prior": (f"{cfg.audit.prior}, over the encoder the adversary pretrains alone with {pretraining}"
                      if cfg.audit.prior != "aux"
                      else "aux (a fresh encoder and head trained on the auxiliary labels)"),
            "versions": versions(),
        },
        "options": resolved_options(cfg),
    }


#: What the audit's report imports after its runs (pandas, scipy.stats for its tests and epsilons, matplotlib with its
#: Agg backend for the feature grids): the parent imports them while its workers compute the last trainings.
REPORT_MODULES = ("vflpriv.reports.audit", "vflpriv.reports.features", "vflpriv.reports.plots", "scipy.stats")


@app.command()
def audit(
    method: str = typer.Option(..., help="method to audit: a registered name or package.module:Class"),
    dataset: Optional[str] = typer.Option(None, help="dataset (vflpriv list datasets); default digits"),
    attacks: Optional[str] = typer.Option(None, help="attacks, comma-separated; default every registered attack"),
    defenses: Optional[str] = typer.Option(None, help="defenses, comma-separated (or none); default every registered one"),
    phases: Optional[str] = typer.Option(None, help="attacked phases: finetune,pretrain; default both when the method pretrains"),
    seeds: Optional[str] = typer.Option(None, help="seeds, e.g. 0,1,2 (the paired test needs at least 2)"),
    out: Path = typer.Option(Path(DEFAULT_OUT["audit"]), help="output directory (audit.md, audit.json, results.csv)"),
    config: Optional[Path] = typer.Option(None, help="YAML or TOML audit file"),
    preset: Optional[str] = typer.Option(None, help="named settings under --config (vflpriv list presets)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a setting: key.path=value (repeatable)"),
    all_adversaries: bool = typer.Option(False, "--all-adversaries", help="every passive party as the adversary in turn"),
    check_only: bool = typer.Option(False, "--check-only", help="only run the conformance checks of the method"),
    quick: bool = typer.Option(False, "--quick", help="the development loop's smoke check: one seed, the strongest "
                               "attack of each kind (untuned unless --tune-attacks), each defense at its middle "
                               "strength (audit.profile: quick)"),
    jobs: Optional[int] = typer.Option(None, help="parallel trainings"),
    backend: Optional[str] = typer.Option(None, help="loky (local), threading, dask or ray"),
    address: Optional[str] = typer.Option(None, help="Dask scheduler / Ray cluster address"),
    store: Optional[Path] = STORE_PATH,
    device: Optional[str] = typer.Option(None, help="torch device, e.g. cpu or cuda"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace another experiment's results.csv in --out; recompute stored runs of other data"),
    tune_attacks: Optional[bool] = typer.Option(None, "--tune-attacks/--no-tune-attacks", help="select each attack's "
                                                "settings on the adversary's auxiliary labels (default: on)"),
    search_budget: Optional[int] = SEARCH_BUDGET,
    canaries: Optional[int] = typer.Option(None, help="random-label canaries for the empirical epsilon (audit.canaries; "
                                           f"default one in {AUTO_SHARE} of partition.labeled, at most {AUTO_CANARIES}; 0: none)"),
    quiet: bool = QUIET,
    dry_run: bool = DRY_RUN,
) -> None:
    """Audit a VFL method: conformance, then every applicable attack x defense x strength x seed, and a report."""
    from vflpriv.workflows.audit import audit_grid
    from vflpriv.workflows.audit_recipes import WEAKEST, active_summary, defer_active, escalate, mark_partial
    from vflpriv.workflows.conformance import check_conformance
    from vflpriv.workflows.experiment import check_destination, guard_outputs, run_into_store

    cfg = build_audit(config=config, method=method, dataset=dataset, attacks=attacks, defenses=defenses, phases=phases,
                      seeds=seeds, jobs=jobs, backend=backend, device=device, all_adversaries=all_adversaries,
                      overrides=set_, preset=preset, tune_attacks=tune_attacks, search_budget=search_budget,
                      canaries=canaries, quick=quick)
    console, status = make_console(), make_console(stderr=True, quiet=quiet)
    planning = (f"audit of {cfg.method.name}: planning every attack x defense x strength (each pair checked before any "
                "training)")
    with cache.held_back(keep=not dry_run), stage(status, planning):
        runs, skipped = audit_grid(cfg) if not check_only else ([], [])  # refused before training, cache untouched
        if not check_only and not runs:  # inside: the dataset planning loaded is not kept either
            raise IncompatibleError("nothing to audit: no attack applies; " + "; ".join(
                f"{s.attack} x {s.defense} ({s.phase}): {s.reason}" for s in skipped))
    if not check_only:  # before the conformance trainings
        check_destination(out, store_path=store, backend=cfg.backend, address=address)
        if not overwrite:  # another experiment's results.csv in --out: refused before minutes of conformance
            guard_outputs(out, owns={r.key() for r in runs}.__contains__)
    if dry_run:  # the conformance checks train: named, not run
        console.print(f"conformance of {cfg.method.name}: a few short trainings before the audit's (dry run: not run)")
    else:
        with stage(status, f"conformance checks of {cfg.method.name}: a few short trainings (it sends only what it "
                           "declares; no party's data reaches another around the channel)"):
            passed = check_conformance(cfg.training())
        console.print(f"conformance of {cfg.method.name}: " + "; ".join(passed))
    if check_only:
        return
    now, deferred = defer_active(runs) if cfg.audit.active == WEAKEST else (runs, [])

    def into_store(todo: list, *, dry: bool = False) -> pd.DataFrame | None:
        return run_into_store(todo, out, jobs=cfg.jobs, backend=cfg.backend, address=address,
                              runs_per_gpu=cfg.runs_per_gpu, store_path=store, console=console, overwrite=overwrite,
                              show_progress=not quiet, owns={r.key() for r in runs}.__contains__, dry_run=dry,
                              prepare=importing(*REPORT_MODULES), warn_withheld=False)  # once, below

    if dry_run:  # every run it may train is checked, the active adversary's deferred ones too
        into_store(runs, dry=True)
        if deferred:
            console.print(f"of them, {len(deferred)} run(s) of the active adversary at the defenses' other strengths "
                          "only where, at the weakest, it beats the passive attacks of its kind (audit.active)")
        for s in skipped:
            console.print(f"not run: {s.attack} x {s.defense} ({s.phase}): {s.reason}", markup=False)
        return
    results = into_store(now)
    more, decisions = escalate(results, deferred, margin=cfg.audit.margin) if deferred else ([], [])
    if more:
        console.print(f"the active adversary beat the passive attacks of its kind at the weakest strength of "
                      f"{len({d.defense for d in decisions if d.escalated})} defense(s): its runs at their other strengths")
        results = into_store(now + more)
    from vflpriv.reports.results import withheld_warning

    if withheld := withheld_warning(results.attrs["withheld"]):  # once, of every run (into_store twice: escalated)
        console.print(withheld, markup=False)
    from vflpriv.reports.audit import audit_markdown, audit_summary  # imported while the last trainings ran
    from vflpriv.reports.features import example_grids

    context = {**_context(cfg), "active": active_summary(cfg.audit.active, decisions, margin=cfg.audit.margin)}
    summary = audit_summary(results, [vars(s) for s in skipped], margin=cfg.audit.margin, context=context,
                            feature_margin=cfg.audit.feature_margin)
    mark_partial(summary["defenses"], decisions)
    grids = example_grids(results, out)
    summary["features"]["grids"] = [p.name for p in grids]
    (out / "audit.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    (out / "audit.md").write_text(audit_markdown(summary))
    for line in verdict_lines(summary):
        console.print(line)
    for s in skipped:
        if s.left_out:
            console.print(f"{s.attack} ({s.phase}): {s.reason}", markup=False)
    if summary["inapplicable"]:  # planning's and those the runs found, as audit.md lists them
        console.print(f"{len(summary['inapplicable'])} pair(s) not applicable, listed with the reason in "
                      f"{out / 'audit.md'}")
    console.print(f"wrote {out / 'audit.md'}, {out / 'audit.json'}")


def verdict_lines(summary: dict) -> list[str]:
    """The console's verdict lines: the label verdicts name their adversary where several were audited
    (``--all-adversaries``: three "gc (finetune)" lines could not be told apart), as ``audit.md`` does; the feature
    verdicts name theirs always."""
    labels = summary["verdicts"]
    several = len({v["adversary"] for v in labels}) > 1
    return [*(f"adversary party {v['adversary']}: {v['line']}" if several else v["line"] for v in labels),
            *(v["line"] for v in summary["features"]["verdicts"])]
