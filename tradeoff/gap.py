"""Records another sweep stores on a shared store after this sweep's start-up check: judged as that check judges them
before they are read in place of a computation."""

from __future__ import annotations

from collections.abc import Callable

from vflpriv.config.schema import RunConfig
from vflpriv.runner import data_by_key
from vflpriv.store.records import stored as stored_record
from vflpriv.store.secrets import current_fingerprint
from vflpriv.store.sqlite import Store
from vflpriv.store.trainings import mixed_trainings, secure_settings
from vflpriv.tradeoff.spelling import disagreement


class GapCheck:
    """The start-up check's tests (``sweep.drop_damaged``: the record reads and is its run's; its data, canary key
    and claim rules are those of now; a secure-noise training's records come from one training) applied to every
    record another sweep wrote since ``since`` (the check's start): one that fails is not read but recomputed. What
    this sweep wrote (``ours``: key, when) is not judged again."""

    def __init__(self, store: Store, groups: dict[str, list[RunConfig]], since: float,
                 on_note: Callable[[str], None] | None) -> None:
        self.store, self.groups, self.since, self.on_note = store, groups, since, on_note
        self.runs = {c.key(): c for runs in groups.values() for c in runs}
        self.expected: dict[str, str] = {}  # the data's fingerprint by key, made at the first record written
        self.verdicts: dict[str, tuple[tuple, dict[str, str]]] = {}  # training: (its rows' keys and times, problems)
        self.ours: set[tuple[str, float]] = set()

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
                self.verdicts[training] = (seen, self._problems(training, self.store.texts(list(written))))
                problems = self.verdicts[training][1]
                if problems and self.on_note is not None:
                    key, why = next(iter(problems.items()))
                    self.on_note(f"{len(problems)} record(s) another sweep stored after this sweep's start-up check "
                                 f"fail that check and are recomputed (the first, run {key}: {why})")
            refused |= set(self.verdicts[training][1])
        return refused

    def _problems(self, training: str, written: dict[str, object]) -> dict[str, str]:
        """Key: what is wrong, for the records ``written`` of ``training`` (key: its stored text); all its runs where
        it is a secure-noise training whose final records came from two trainings."""
        problems = {}
        for key, text in written.items():
            record, problem = stored_record(key, text, lists=True)
            if problem or (problem := disagreement(record, self.runs[key])):
                problems[key] = problem
        keys = list(written)
        if not self.expected:
            self.expected = data_by_key(self.runs.values())
        for key, why in (self.store.other_data({k: self.expected[k] for k in keys})
                         + self.store.other_canary_key(keys, current_fingerprint()) + self.store.stale_claims(keys)):
            problems.setdefault(key, why)
        runs = self.groups[training]
        mine = {c.key() for c in runs}
        if secure_settings(runs[0]) and mixed_trainings(r for r in self.store.final_records(training) if r.key in mine):
            problems |= {c.key(): "its secure-noise training's records came from two trainings" for c in runs}
        return problems
