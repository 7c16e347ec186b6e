"""Records another sweep stores on a shared store after this sweep's start-up check: judged as that check judges them
before they are read in place of a computation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.runner import data_by_key
from vflpriv.store.records import RunRecord, parsed, stale_claim, stored_object
from vflpriv.store.secrets import ENV_VAR, current_fingerprint
from vflpriv.store.sqlite import Store
from vflpriv.store.trainings import mixed_trainings, secure_settings
from vflpriv.store.verification import other_canary_key, other_data
from vflpriv.tradeoff.spelling import resumed

#: What the start-up check (``sweep.drop_damaged``) and the gap find wrong with a stored record, each as the start-up
#: check's note counts it, in the order the gap says a key's first.
DAMAGED, OTHER_DATA, OTHER_KEY, STALE = ("damaged record(s)", "record(s) of other data",
                                         "record(s) of another canary key", "record(s) of earlier claim rules")
KINDS = (DAMAGED, OTHER_DATA, OTHER_KEY, STALE)


class GapCheck:
    """The start-up check's tests (``sweep.drop_damaged``, :func:`record_problems`: the record reads and is its run's;
    its data, canary key and claim rules are those of now; a secure-noise training's records come from one training)
    applied to every record another sweep wrote since ``since`` (the check's start). Other data or another canary key
    is refused as that check refuses it (:func:`refuse_other`) unless ``replace_other_data``; a record failing
    otherwise is not read but recomputed, each key at most once (a second failing version: ConfigError, no endless
    recomputing of each other's runs by two sweeps). What this sweep wrote (``ours``: key, when) is not judged again."""

    def __init__(self, store: Store, groups: dict[str, list[RunConfig]], since: float, *,
                 replace_other_data: bool = False) -> None:
        self.store, self.groups, self.since, self.replace = store, groups, since, replace_other_data
        self.runs = {c.key(): c for runs in groups.values() for c in runs}
        self.expected: dict[str, str] = {}  # the data's fingerprint by key, made at the first record written
        self.verdicts: dict[str, tuple[tuple, dict[str, str]]] = {}  # training: (its rows' keys and times, problems)
        self.ours: set[tuple[str, float]] = set()
        self.recomputed: dict[str, tuple[float | None, str]] = {}  # key: (the version refused, why), in order

    def refused(self, keys: list[str]) -> set[str]:
        """The keys among ``keys`` of each training whose records written since the check fail its tests."""
        by_training: dict[str, dict[str, float]] = {}
        for key, when in self.store.written_since(keys, self.since).items():
            if (key, when) not in self.ours:
                by_training.setdefault(self.runs[key].training_key(), {})[key] = when
        refused: set[str] = set()
        for training, written in by_training.items():
            seen = tuple(sorted(written.items()))
            if self.verdicts.get(training, ((),))[0] != seen:  # each version of its records judged once
                problems = self._problems(training, list(written))
                self.verdicts[training] = (seen, problems)
                for key, why in problems.items():
                    self._once(key, written.get(key), why)
            refused |= set(self.verdicts[training][1])
        return refused

    def note(self) -> str | None:
        """One note for every record recomputed here: their count and the first, or None."""
        if not self.recomputed:
            return None
        key, (_, why) = next(iter(self.recomputed.items()))
        return (f"{len(self.recomputed)} record(s) another sweep stored after this sweep's start-up check failed that "
                f"check and were recomputed (the first, run {key}: {why})")

    def _once(self, key: str, version: float | None, why: str) -> None:
        """Record that ``key``'s ``version`` is recomputed; ConfigError where another version of it was already."""
        first = self.recomputed.setdefault(key, (version, why))
        if first[0] != version:
            again = "" if why == first[1] else f" (the first time: {first[1]})"
            mine = {k for k, _ in self.ours}  # what this sweep stored, and what of it the store still holds
            kept = sum((k, w) in self.ours for k, w in self.store.written_since(list(mine), self.since).items())
            raise ConfigError(f"results store {self.store.path}: run {key} was stored again failing this sweep's "
                              f"start-up check, {why}, after this sweep recomputed it once{again}; another sweep "
                              f"on this store keeps replacing its runs ({len(self.recomputed)} recomputed here; of "
                              f"the {len(mine)} runs this sweep stored, {kept} are still the store's, the others "
                              "replaced): run the sweeps one after the other, or give each its own --out or --store")

    def _problems(self, training: str, written: list[str]) -> dict[str, str]:
        """Key: what is wrong (:func:`record_problems`, the first found), for the records of keys ``written`` of
        ``training``; all its runs where it is a secure-noise training whose final records came from two trainings.
        ConfigError for other data or another canary key without ``replace_other_data``, as the start-up check."""
        if not self.expected:
            self.expected = data_by_key(self.runs.values())
        if not self.replace:  # another sweep's results of other data: never deleted by mistake
            refuse_stored_other(self.store, written, self.expected)
        found = record_problems(self.store.texts(written), self.runs, self.expected, current_fingerprint())
        if not self.replace:
            refuse_other(found, where=str(self.store.path))
        problems: dict[str, str] = {}
        for kind in KINDS:
            for key, why in found[kind]:
                problems.setdefault(key, why)
        runs = self.groups[training]
        mine = {c.key() for c in runs}
        if secure_settings(runs[0]) and mixed_trainings(r for r in self.store.final_records(training) if r.key in mine):
            problems |= {c.key(): "its secure-noise training's records came from two trainings" for c in runs}
        return problems


def record_problems(rows: Iterable[tuple[str, object]], runs: dict[str, RunConfig], expected: dict[str, str],
                    canary_key: str) -> dict[str, list[tuple[str, str]]]:
    """The start-up check's and the gap's tests of stored records ((key, its text), read once, one at a time) of
    ``runs`` (by key): (key, what is wrong) by kind (:data:`KINDS`). ``expected``: the data's fingerprint by key;
    ``canary_key``: the key's now. Each text is parsed once, strictly (``records.parsed``), and its fingerprint and
    canary key are read from that parse: none where it is no object or lacks the field (written before it)."""
    found: dict[str, list[tuple[str, str]]] = {kind: [] for kind in KINDS}
    fingerprints, canary_keys = [], []
    for key, text in rows:
        data, problem = parsed(text)
        record, problem = (None, problem) if problem else stored_object(key, data, lists=True)
        if problem or (problem := resumed(record, runs[key])):
            found[DAMAGED].append((key, problem))
        elif why := stale_claim(RunRecord.from_object(data)):  # as written: never resumed, other rules decided it
            found[STALE].append((key, why))
        fields = data if isinstance(data, dict) else {}
        fingerprints.append((key, fields.get("data_fingerprint")))
        canary_keys.append((key, fields.get("canary_key")))
    found[OTHER_DATA] = other_data(fingerprints, expected)
    found[OTHER_KEY] = other_canary_key(canary_keys, canary_key)
    return found


def refuse_stored_other(store: Store, keys: list[str], expected: dict[str, str]) -> None:
    """ConfigError where ``store`` holds records of ``keys`` of other data or another canary key, by two fields as
    SQLite reads them (``Store.field``), before a record is parsed: a refusal parses none (review tidy F1). They are
    :func:`record_problems`' strict reading of every record it accepts; one it does not (bytes, a key given twice)
    is refused here too where such a field reads so, by the start-up check and the gap alike."""
    where = str(store.path)
    refuse_other_data(other_data(store.field(keys, "data_fingerprint"), expected), where=where)
    refuse_other_canary_key(other_canary_key(store.field(keys, "canary_key"), current_fingerprint()), where=where)


def refuse_other(found: dict[str, list[tuple[str, str]]], *, where: str) -> None:
    """ConfigError where :func:`record_problems` found records of other data or another canary key."""
    refuse_other_data(found[OTHER_DATA], where=where)
    refuse_other_canary_key(found[OTHER_KEY], where=where)


def refuse_other_data(other: Sequence[tuple[str, str]], *, where: str) -> None:
    """ConfigError where a store holds runs of these configs computed on other data: the stored results are not
    deleted by mistake (a data folder pointed elsewhere); the user says to recompute them, or gives another store."""
    if other:
        raise ConfigError(f"results store {where} holds {len(other)} of these runs computed on other data (or under "
                          "another fitted_features declaration) than the dataset holds now (the first, run "
                          f"{other[0][0]}: {other[0][1]}); give another --out or --store to keep them, or --overwrite "
                          "to recompute them on the data as it is now")


def refuse_other_canary_key(other: Sequence[tuple[str, str]], *, where: str) -> None:
    """ConfigError where a store holds runs of these configs whose canaries were drawn with another canary key (a
    key rotated, another cache root): their guesses were scored against other labels than this key draws."""
    if other:
        raise ConfigError(f"results store {where} holds {len(other)} of these runs with canaries drawn from another "
                          f"canary key (the first, run {other[0][0]}: {other[0][1]}); set ${ENV_VAR} to the key they "
                          "used (vflpriv.store.secrets), give another --out or --store to keep them, or --overwrite "
                          "to recompute them with the key now")
