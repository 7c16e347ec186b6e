"""Records another sweep stores on a shared store after this sweep's start-up check: judged as that check judges them
before they are read in place of a computation."""

from __future__ import annotations

from collections.abc import Sequence

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.runner import data_by_key
from vflpriv.store.records import stored as stored_record
from vflpriv.store.secrets import ENV_VAR, current_fingerprint
from vflpriv.store.sqlite import Store
from vflpriv.store.trainings import mixed_trainings, secure_settings
from vflpriv.tradeoff.spelling import resumed


class GapCheck:
    """The start-up check's tests (``sweep.drop_damaged``: the record reads and is its run's; its data, canary key
    and claim rules are those of now; a secure-noise training's records come from one training) applied to every
    record another sweep wrote since ``since`` (the check's start). Other data or another canary key is refused as
    that check refuses it (:func:`refuse_other_data`) unless ``replace_other_data``; a record failing otherwise is
    not read but recomputed, each key at most once (a second failing version: ConfigError, no endless recomputing of
    each other's runs by two sweeps). What this sweep wrote (``ours``: key, when) is not judged again."""

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
                problems = self._problems(training, self.store.texts(list(written)))
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
            raise ConfigError(f"results store {self.store.path}: run {key} was stored again failing this sweep's "
                              f"start-up check, {why}, after this sweep recomputed it once{again}; another sweep "
                              f"on this store keeps replacing its runs ({len(self.recomputed)} recomputed here, kept "
                              "in the store): run the sweeps one after the other, or give each its own --out or "
                              "--store")

    def _problems(self, training: str, written: dict[str, object]) -> dict[str, str]:
        """Key: what is wrong, for the records ``written`` of ``training`` (key: its stored text); all its runs where
        it is a secure-noise training whose final records came from two trainings. ConfigError for other data or
        another canary key without ``replace_other_data``."""
        problems = {}
        for key, text in written.items():
            record, problem = stored_record(key, text, lists=True)
            if problem or (problem := resumed(record, self.runs[key])):
                problems[key] = problem
        keys = list(written)
        if not self.expected:
            self.expected = data_by_key(self.runs.values())
        other = self.store.other_data({k: self.expected[k] for k in keys})
        other_key = self.store.other_canary_key(keys, current_fingerprint())
        if not self.replace:  # another sweep's results of other data: never deleted by mistake
            refuse_other_data(other, where=str(self.store.path))
            refuse_other_canary_key(other_key, where=str(self.store.path))
        for key, why in other + other_key + self.store.stale_claims(keys):
            problems.setdefault(key, why)
        runs = self.groups[training]
        mine = {c.key() for c in runs}
        if secure_settings(runs[0]) and mixed_trainings(r for r in self.store.final_records(training) if r.key in mine):
            problems |= {c.key(): "its secure-noise training's records came from two trainings" for c in runs}
        return problems


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
