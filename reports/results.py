"""Results of a store as a DataFrame, and the tables, figures and HTML report written from them
(``vflpriv table``, ``vflpriv report``, ``vflpriv.load_results``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from vflpriv.common.errors import ConfigError
from vflpriv.reports.canaries import canary_controls, epsilon_tables
from vflpriv.reports.features import feature_html
from vflpriv.reports.html import Section, render_report
from vflpriv.reports.leakage import leakage_rows, leakage_tables, prior_strength_tables
from vflpriv.reports.paper_tables import Table, cap_csv, cap_tables, reference_table, strength_tables, t_dcs_tables
from vflpriv.reports.plots import tradeoff_figures
from vflpriv.reports.secret_labels import labels_section
from vflpriv.reports.tables import strength_rows
from vflpriv.store.folders import STORE_NAME, default_store, kind_of, shown
from vflpriv.store.provenance import versions
from vflpriv.store.records import RunRecord, without_epsilon
from vflpriv.store.sqlite import read_store
from vflpriv.store.trainings import mixed_trainings
from vflpriv.tradeoff.cap import cap_table, strength_summary
from vflpriv.tradeoff.worst_case import with_worst_case
from vflpriv.tradeoff.epsilon import epsilon_table
from vflpriv.tradeoff.variants import with_variants


def load_results(store: Path | str) -> pd.DataFrame:
    """Every record of a results store (the file, or an output directory holding ``results.sqlite``), one row
    per run, with a ``variant`` column (see ``tradeoff.variants``). The store is only read. Damaged records are
    left out and listed as (key, what is wrong) in ``frame.attrs["damaged"]``, so are the records of a secure-noise
    training key written by two trainings (``frame.attrs["mixed"]``: their keys); a record whose epsilon no read here
    can judge is kept without it (``frame.attrs["withheld"]``: key, why); a store with no run that checks out is a
    ConfigError."""
    path = Path(store)
    if kind_of(path, what="results store") == "folder" and default_store(path).is_file():
        path = default_store(path)
    if kind_of(path, what="results store") != "file":
        raise ConfigError(f"no results store at {shown(path)} (give {STORE_NAME} or the directory that holds it)")
    found = read_store(path)
    if not found.records:
        if found.damaged:
            raise ConfigError(f"every record of results store {path} is damaged ({len(found.damaged)}; the first, "
                              f"run {found.damaged[0][0]}: {found.damaged[0][1]})")
        raise ConfigError(f"results store {path} holds no runs; write runs into it with evaluate, sweep or audit")
    readings = {id(r): _reading(r) for r in found.records}  # each record's settings parsed and spelled once
    damaged = found.damaged + [(r.key, readings[id(r)].problem) for r in found.records if readings[id(r)].problem]
    records = [r for r in found.records if not readings[id(r)].problem]
    if not records:
        raise ConfigError(f"every record of results store {path} is damaged ({len(damaged)}; the first, run "
                          f"{damaged[0][0]}: {damaged[0][1]})")
    records, superseded = current_records(records, written=found.written, readings=readings)
    mixed = {key for keys in mixed_trainings(records).values() for key in keys}  # two trainings: never pooled
    records = [r for r in records if r.key not in mixed]
    if not records:  # review fe3 F5: empty tables at exit 0 otherwise
        raise ConfigError(f"every run of results store {path} is of a secure-noise training stored from two trainings "
                          "(options.secure_noise: they cannot be pooled); rerun the command that wrote them, which "
                          "retrains each whole")
    frame = with_variants(pd.DataFrame([_as_run(r, readings[id(r)]).to_dict() for r in records],
                                       columns=RunRecord.columns()))
    frame.attrs["damaged"] = damaged
    frame.attrs["withheld"] = [(r.key, readings[id(r)].withheld) for r in records if readings[id(r)].withheld]
    frame.attrs["superseded"] = superseded
    frame.attrs["mixed"] = sorted(mixed)
    return frame


def as_read(results: pd.DataFrame) -> pd.DataFrame:
    """A command's own records (``tradeoff.sweep``'s frame) with each epsilon :func:`load_results` withholds shown as
    none (:func:`_reading`), (key, why) in ``attrs["withheld"]``: what evaluate, sweep, audit and tune print and write
    of their runs is what ``vflpriv table`` shows (stop18: a plugin method's dp-gaussian epsilon was printed)."""
    records = [RunRecord(**row) for row in results.to_dict("records")]
    why = [_reading(r).withheld for r in records]
    frame = pd.DataFrame([(without_epsilon(r, w) if w else r).to_dict() for r, w in zip(records, why)],
                         columns=results.columns, index=results.index)
    frame.attrs = {**results.attrs, "withheld": [(r.key, w) for r, w in zip(records, why) if w]}
    return frame


def withheld_warning(withheld: list[tuple[str, str]]) -> str:
    """The one warning line of records shown without their epsilon (``attrs["withheld"]``), or ''."""
    if not withheld:
        return ""
    return (f"warning: {len(withheld)} record(s) shown without their epsilon (the first, run {withheld[0][0]}: "
            f"{withheld[0][1]})")


#: How a record left out beside its run's kept one ends its reason, by what the current code reads of their settings
#: (current: its key is the one it gives them; earlier: it gives them another; unread: it cannot read them), with how
#: the warning counts each.
KEPT = {"current": ("kept: the current code's", "beside the current code's record of their run"),
        "earlier": ("kept: the one written last, none being the current code's",
                    "beside the one written last, where none is the current code's"),
        "unread": ("kept: the one written last; the current code cannot read their settings",
                   "beside the one written last, of settings the current code cannot read")}


def current_records(records: list[RunRecord], *, written: dict[str, float] | None = None,
                    readings: dict[int, Reading] | None = None) -> tuple[list[RunRecord], list[tuple[str, str]]]:
    """The records, one per run: where a store holds one run under several keys (its components' code revised between
    them, ``Protection.revision``, ``Attack.revision``; a setting written another way in one), the one the current
    code keys, else the one ``written`` last (key: when; else the last given), so a table never counts one seed twice;
    (key, why) for each left out. A run is its record's coordinates and its settings as the current code reads them
    (defaults of settings added since filled in, ``device`` left out, in ``tradeoff.spelling``'s one spelling: the key
    it gives them), wherever it ran (hand-made records share settings across seeds); its strength is the recorded one
    only where no option of its settings sets it (:func:`_point`). ``readings``: each record's :func:`_reading` by
    ``id``, where made already."""
    when, readings = written or {}, readings or {}
    by_place: dict[tuple, list[RunRecord]] = {}
    for r in records:
        by_place.setdefault((r.method, r.dataset, r.attack, r.defense, r.phase, _point(r), r.seed, r.secret,
                             r.adversary, r.victim), []).append(r)
    kept, superseded = [], []
    for place in by_place.values():  # settings are read only where two records share their coordinates
        same: dict[str, list[tuple[RunRecord, str]]] = {}
        for record in place:
            run, read = _run_of(record, readings.get(id(record)) or _reading(record)) if len(place) > 1 else (
                record.key, "current")
            same.setdefault(run, []).append((record, read))
        for run, runs in same.items():  # the current code's first, of them one with its defaults unset
            order = {id(r): i for i, (r, _) in enumerate(runs)}  # the order given, where no time is known
            runs = sorted(runs, key=lambda rr: (rr[1] == "current", rr[0].key == run,
                                                when.get(rr[0].key, float("-inf")), order[id(rr[0])]))
            last, read = runs[-1]
            superseded += [(r.key, f"{SAME[r_read].format(last.key)} ({KEPT[read][0]})") for r, r_read in runs[:-1]]
            kept.append(last)
    return kept, superseded


#: Why a left-out record is one run with the one kept, by what the current code reads of its settings (:data:`KEPT`):
#: its key is the current code's, a setting written otherwise (``tradeoff.spelling``); its components' code revised
#: since; or it cannot tell, their coordinates and the text of their settings the same.
SAME = {"current": "the same run as {}, a setting given otherwise (a default given, or one it does not read)",
        "earlier": "the same run as {}, written by other code of its components or with an option at its default",
        "unread": "the same coordinates and settings as {}"}


def _point(record: RunRecord) -> tuple:
    """Where on its sweep a record lies: its recorded strength, unless an option of its settings sets the swept
    defense's strength (dp-gaussian's ``target_epsilon``): that strength is what the code resolved, which a revision
    may change, so the settings (the option) place the record, and the strength column is left out."""
    from vflpriv.config.registry import DEFENSES

    try:
        swept = next((d for d in json.loads(record.config).get("defenses") or [] if d.get("sweep")), None)
        option = swept is not None and DEFENSES.get(swept["name"]).own_strength_option(swept.get("options") or {})
    except Exception:  # noqa: BLE001 - settings unreadable, or of a defense the current code lacks: as recorded
        option = ""
    return ("set by an option",) if option else ("recorded", record.strength)


@dataclass(frozen=True)
class Reading:
    """A record's settings as the current code reads them (``settings``) and in their one spelling (``spelled``,
    ``tradeoff.spelling``), both None where it cannot read them; what the record says that they do not (``problem``:
    a damaged record, ``tradeoff.spelling.disagreement``); why its epsilons are read as none (``withheld``:
    ``tradeoff.spelling.withheld``)."""

    settings: Any = None
    spelled: Any = None
    problem: str = ""
    withheld: str = ""


def _reading(record: RunRecord) -> Reading:
    """``record``'s settings parsed and spelled: once per record, for :func:`current_records` and :func:`_as_run`."""
    from vflpriv.config.schema import RunConfig
    from vflpriv.tradeoff.spelling import disagreement, one_spelling, withheld  # the registries: only where read

    try:
        settings = RunConfig.model_validate_json(record.config)
        problem = disagreement(record, settings)
        return Reading(settings, one_spelling(settings), problem, "" if problem else withheld(record, settings))
    except Exception:  # noqa: BLE001 - settings the current code cannot read
        return Reading()


def _as_run(record: RunRecord, reading: Reading) -> RunRecord:
    """``record`` with its settings as :func:`current_records` groups them (every record the current code reads, in
    its one spelling, with the defaults of settings added since filled in), so that the variants are named from one
    spelling of a run: a setting whose seeds were written two ways is one row, not two (reviews rec2 R1, l7 L7-6).
    Settings the current code cannot read stay as written; a withheld epsilon (:attr:`Reading.withheld`) as none."""
    record = without_epsilon(record, reading.withheld) if reading.withheld else record
    return record if reading.spelled is None else replace(record, config=reading.spelled.recorded())


def _run_of(record: RunRecord, reading: Reading) -> tuple[str, str]:
    """The run a record is of: the key the current code gives its settings in their one spelling (``device`` is not
    keyed), and how it reads them (:data:`KEPT`); where it cannot read them, their text without ``device``, and
    "unread"."""
    if reading.spelled is not None:
        return reading.spelled.key(), "current" if reading.settings.key() == record.key else "earlier"
    try:
        data = json.loads(record.config)
    except ValueError:
        return record.config, "unread"
    return json.dumps({k: v for k, v in data.items() if k != "device"} if isinstance(data, dict) else data,
                      sort_keys=True), "unread"


def select(results: pd.DataFrame, *, attack: str | None, defense: str | None, phase: str | None) -> pd.DataFrame:
    """The records of the given attack / defense / phase (None: all); refuses a filter that keeps nothing."""
    for column, value in (("attack", attack), ("defense", defense), ("phase", phase)):
        if value is not None:
            present = sorted(results[column].unique())
            if value not in present:
                raise ConfigError(f"no run with {column} '{value}' in the store; present: {', '.join(present) or 'none'}")
            results = results[results[column] == value]
    return results


def attack_runs(results: pd.DataFrame) -> pd.DataFrame:
    """The records the attack tables and figures are made of: the audit's canary-free controls (no prior, there for
    what the canaries cost, :func:`~vflpriv.reports.canaries.canary_controls`) left out and the variants named
    without them."""
    controls = canary_controls(results)
    if not controls.any():
        return results
    kept = with_variants(results[~controls].drop(columns=["variant"], errors="ignore"))
    kept.attrs = results.attrs
    return kept


@dataclass(frozen=True)
class Computed:
    """What the tables of one set of records are made of, computed once: the attack runs (:func:`attack_runs`) with
    their worst case (``tradeoff.worst_case.with_worst_case``), CAP, the per-strength summary, the leakage rows and the
    pooled empirical epsilons of the runs with canaries (``tradeoff.epsilon.epsilon_table``)."""

    runs: pd.DataFrame
    caps: pd.DataFrame
    summary: pd.DataFrame
    rows: pd.DataFrame
    empirical: pd.DataFrame | None  #: None where the records carry no canary column

    @classmethod
    def of(cls, results: pd.DataFrame) -> Computed:
        runs = attack_runs(results)
        worst = with_worst_case(runs)  # cap_table and strength_summary add it where absent: once here
        empirical = epsilon_table(runs[runs["canaries"] > 0]) if "canaries" in runs else None
        return cls(runs, cap_table(worst), strength_summary(worst), leakage_rows(runs), empirical)


def tables(results: pd.DataFrame, computed: Computed | None = None) -> list[Table]:
    """The tables of ``vflpriv table``: CAP (methods x datasets per attack, defense and phase; none without a defense),
    T-DCS, Table XI's strength rows, per secret the weakest strength at which each attack falls to the prior, the
    leakage of every setting, the references, the empirical epsilon."""
    done = computed or Computed.of(results)
    runs = done.runs
    found = [*cap_tables(done.caps), *t_dcs_tables(done.caps), *strength_tables(done.summary),
             *prior_strength_tables(runs)]
    leakage = leakage_tables(done.rows)
    reference = reference_table(runs)
    return (found + leakage + ([reference] if reference is not None else [])
            + epsilon_tables(runs, done.empirical))  # the variants named without the canary-free controls


def write_tables(results: pd.DataFrame, out: Path,
                 computed: Computed | None = None) -> tuple[list[Table], list[Path]]:
    """cap_tables.{md,tex,csv}: the CAP tables, the Table XI rows, the leakage and the references, in each format;
    leakage.csv and epsilon_table.csv beside where the records give them (from ``computed``, the records'
    :class:`Computed`, where given). Returns the tables and the files written; nothing else in ``out`` is touched."""
    out.mkdir(parents=True, exist_ok=True)
    done = computed or Computed.of(results)
    found = tables(results, done)
    (out / "cap_tables.md").write_text("\n".join(t.markdown() for t in found))
    (out / "cap_tables.tex").write_text("\n".join(t.latex() for t in found))
    cap_csv(done.caps).to_csv(out / "cap_tables.csv", index=False)
    strength_rows(done.summary).to_csv(out / "strength_rows.csv", index=False)
    written = [out / name for name in TABLE_FILES[:4]]
    for name, frame in (("leakage.csv", done.rows), ("epsilon_table.csv", done.empirical)):
        if frame is not None and not frame.empty:
            frame.to_csv(out / name, index=False)
            written.append(out / name)
    return found, written


def not_written(out: Path, written: list[Path]) -> list[Path]:
    """The table files in ``out`` that this write did not produce (an earlier write's, from other records): named to
    the user, never removed (they may be the user's)."""
    return [out / name for name in TABLE_FILES if out / name not in written and (out / name).exists()]


#: What :func:`write_tables` writes into its folder, the last two only where the records give them.
TABLE_FILES = ("cap_tables.md", "cap_tables.tex", "cap_tables.csv", "strength_rows.csv", "leakage.csv",
               "epsilon_table.csv")


#: Figure formats ``vflpriv report`` can write (PNG alone is embedded in the page).
FIGURE_FORMATS = ("png", "svg", "pdf")
#: One figure per (attack, phase) at this resolution keeps the page at a few hundred kB to a few MB.
REPORT_DPI = 100
#: The report's figure names, apart from evaluate's and sweep's ``tradeoff*.png``: a report into their folder
#: replaces none of theirs (review-hunt3 P14: it overwrote the sweep's ``tradeoff.png``).
REPORT_FIGURES = "report_tradeoff"
def labels_of(results: pd.DataFrame) -> pd.DataFrame:
    """The label attacks' records (a store written before the feature attacks holds no other)."""
    return results[results["secret"] != "features"] if "secret" in results else results


def _labels(results: pd.DataFrame, out: Path, formats: tuple[str, ...], computed: Computed) -> Section | None:
    """The labels' section, with one figure per (attack, phase) written in ``formats`` (PNG embedded); ``computed``
    (the records') serves where every record is a label attack's."""
    labels = labels_of(results)
    if labels.empty:
        return None
    done = computed if len(labels) == len(results) else Computed.of(labels)
    summary = done.summary
    written = tradeoff_figures(summary, out, stem=REPORT_FIGURES, formats=tuple(dict.fromkeys(("png", *formats))),
                               by_defense=True, dpi=REPORT_DPI) if not summary.empty else []
    figures = {_figure_key(path, summary): path for path in written if path.suffix == ".png"}
    return labels_section(labels, done.rows, done.caps, figures)


def _features(results: pd.DataFrame, out: Path, formats: tuple[str, ...], computed: Computed) -> Section | None:
    """The features' section (``reports.features``: it reads the records, not ``computed``)."""
    body = feature_html(results, out)
    return Section("features", "Secret: the victims' features", body) if body else None


#: The secrets a report has a section for, in the order of the page: each builds its section from the records and
#: their :class:`Computed` (None where the store holds none of its attacks).
SECRETS = [_labels, _features]


def write_report(results: pd.DataFrame, out: Path, *, store: Path, formats: tuple[str, ...] = ("png",)) -> Path:
    """report.html (self-contained), next to the tables and one figure per (attack, phase) in ``formats`` (PNG
    always: the page embeds it)."""
    done = Computed.of(results)
    write_tables(results, out, done)
    context = {"results store": str(store), "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "versions": versions()}
    damaged = results.attrs.get("damaged", [])
    if damaged:
        context["damaged records left out"] = "; ".join(f"run {key}: {problem}" for key, problem in damaged)
    if results.attrs.get("superseded"):
        context["records of earlier code left out"] = "; ".join(f"run {k}: {why}" for k, why in
                                                                results.attrs["superseded"])
    sections = [section for make in SECRETS if (section := make(results, out, formats, done)) is not None]
    reference = reference_table(done.runs)
    if reference is not None:
        sections.append(Section("references", "Non-federated references", reference.html()))
    page = render_report(results, title="vflpriv results", context=context, sections=sections)
    path = out / "report.html"
    path.write_text(page)
    return path


def _figure_key(path: Path, summary: pd.DataFrame) -> tuple[str, str]:
    """The (attack, phase) a figure file draws (its name ends with them, or it is the only one)."""
    pairs = list(dict.fromkeys(zip(summary["attack"], summary["phase"])))
    if len(pairs) == 1:
        return pairs[0]
    return next(pair for pair in pairs if path.stem.endswith(f"_{pair[0]}_{pair[1]}"))
