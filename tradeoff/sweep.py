"""Run a grid of runs into the store: one training per group of runs sharing a training key.

Every training is planned (validated) before any starts. A training runs only the attacks whose
records are missing, so adding an attack to a finished sweep trains once more and computes only the
new records (a secure-noise training runs whole: its records must come from one training). Claims in
the store keep two sweeps on one store from computing a training twice: a sweep runs what it could
claim, then waits for what another live sweep holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import torch

from vflpriv.common.errors import ConfigError
from vflpriv.common.progress import Planned
from vflpriv.common.secret_kinds import FEATURES
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.runner import data_by_key
from vflpriv.runner.execution import pretrain_key, run_safely
from vflpriv.runner.planning import plan, refuse_unread_aux_features
from vflpriv.store.records import RunRecord
from vflpriv.store.secrets import current_fingerprint
from vflpriv.store.sqlite import Store
from vflpriv.store.trainings import partly_stored, secure_records, secure_settings
from vflpriv.tradeoff.executors import LOCAL_BACKENDS, run_all
from vflpriv.tradeoff.gap import GapCheck, record_problems, refuse_other, refuse_stored_other
from vflpriv.tradeoff.variants import told_apart

if TYPE_CHECKING:  # the frame is made once the runs are done: the trainings need no pandas
    import pandas as pd

#: Seconds between looks at trainings another sweep holds.
POLL_SECONDS = 1.0


def trainings(configs: Sequence[RunConfig]) -> dict[str, list[RunConfig]]:
    """Runs grouped by training key, in grid order."""
    groups: dict[str, list[RunConfig]] = {}
    for config in configs:
        groups.setdefault(config.training_key(), []).append(config)
    return groups


def shared_states(config: RunConfig) -> set[str]:
    """The costly shared states a training builds or reads from the cache: its pretraining, and each defense's
    (``Protection.shared_state``)."""
    method = METHODS.get(config.method.name)
    states = {f"pretrain:{pretrain_key(config.training(), method)}"} if method.pretrains else set()
    for d in config.defenses:
        state = DEFENSES.get(d.name).shared_state(strength=d.strength, options=d.options)
        if state is not None:
            states.add(f"defense:{state}")
    return states


def schedule(groups: dict[str, list[RunConfig]]) -> list[str]:
    """Training keys in the order to run them: the first training of each shared state (a pretraining, a CAE
    autoencoder) first, then the trainings that need no shared state, then the other users of the shared states;
    within each, one training of each kind of work first (:func:`samples_first`), then those computing more runs
    first (an audit's training with every passive attack before the trainings of an acting attack or of the canaries'
    control, each with one), else in grid order. The longest trainings start early (less idle time at the end of a
    parallel sweep: the last ones are short), and the users of a state start late, when it is in the cache (a worker
    would otherwise wait for another's)."""
    seen: set[str] = set()
    first, free, users = [], [], []
    for key, runs in groups.items():
        states = shared_states(runs[0])
        (first if states - seen else users if states else free).append(key)
        seen |= states
    return [key for part in (first, free, users) for key in samples_first(part, groups)]


def samples_first(part: list[str], groups: dict[str, list[RunConfig]]) -> list[str]:
    """``part`` with more runs first, except that one training of each kind (method, defense, acting attack) and of
    each attack kind (:func:`attack_kind`) comes before the rest, those bringing the most unseen attack kinds first:
    the progress estimate prices each kind by what its first training cost, so within the first minutes of an audit
    it has seen the active adversary's run, the canary controls and each defense, not only the passive attacks."""
    order = sorted(part, key=lambda k: -len(groups[k]))
    attacks = {k: {attack_kind(r) for r in groups[k]} for k in order}
    kinds = {k: training_kind(groups[k]) for k in order}
    seen_attacks: set[str] = set()
    seen_kinds: set[str] = set()
    sampled: list[str] = []
    while order:
        best = max(order, key=lambda k: (len(attacks[k] - seen_attacks), kinds[k] not in seen_kinds))
        if not attacks[best] - seen_attacks and kinds[best] in seen_kinds:
            break
        sampled.append(best)
        order.remove(best)
        seen_attacks |= attacks[best]
        seen_kinds.add(kinds[best])
    return sampled + order


def training_kind(runs: Sequence[RunConfig]) -> str:
    """``method|swept defense|acting attack``: trainings that cost alike."""
    swept = runs[0].swept
    acting = next((r.attack.name for r in runs if r.attack_acts()), "")
    return f"{runs[0].method.name}|{swept.name if swept else ''}|{acting}"


def planned_work(groups: dict[str, list[RunConfig]], order: list[str], apart: dict[str, str] | None = None
                 ) -> list[Planned]:
    """The trainings ``order`` names, as the progress estimate sees them: of one kind when method, swept defense and
    acting attack agree, building a shared state when none before it in ``order`` needs that state; each run named by
    its attack's cost class (:func:`attack_kind`); each training labelled with what tells it apart (``apart``)."""
    seen: set[str] = set()
    items = []
    for key in order:
        runs = groups[key]
        first, swept = runs[0], runs[0].swept
        acting = next((r.attack.name for r in runs if r.attack_acts()), "")
        states = shared_states(first)
        defense = f"{swept.name} {swept.strength:g}" if swept and swept.strength is not None else (
            swept.name if swept else "no defense")
        named = (apart or {}).get(key)
        label = (f"{first.method.name}{f' ({named})' if named else ''} {defense} seed {first.seed}"
                 + (f" ({acting} trains)" if acting else ""))
        items.append(Planned(key=key, kind=training_kind(runs),
                             builds=bool(states - seen), attacks=tuple(attack_kind(r) for r in runs), label=label,
                             runs=tuple(r.key() for r in runs)))
        seen |= states
    return items


def attack_kind(run: RunConfig) -> str:
    """An attack's cost class for the progress estimate: its name, tuned or not (a search of several candidates),
    with its prior or without (a canary control runs untuned, without one)."""
    attack = run.attack
    return f"{attack.name}{' tuned' if attack.tune else ''}{' no prior' if attack.prior == 'none' else ''}"


def on_gpus(groups: list[list[RunConfig]], count: int) -> list[list[RunConfig]]:
    """The trainings of a local sweep spread round-robin over ``count`` visible GPUs: ``cuda`` (no index) becomes
    ``cuda:0``, ``cuda:1``, ... in dispatch order; an explicit index, the CPU and one GPU are left as given. Keys
    leave the device out (every draw is made on the CPU), so the records are the ones any placement gives."""
    if count < 2:
        return groups
    return [[r.model_copy(update={"device": f"cuda:{i % count}"}) if r.device == "cuda" else r for r in runs]
            for i, runs in enumerate(groups)]


def gpu_share(configs: Sequence[RunConfig], *, backend: str, runs_per_gpu: int) -> float | None:
    """The share of a GPU each run asks a Dask or Ray scheduler for: 1 / ``runs_per_gpu`` where runs use CUDA;
    None locally (``on_gpus`` places them) or on the CPU."""
    cuda = any(r.device.split(":")[0] == "cuda" for r in configs)
    return 1.0 / runs_per_gpu if cuda and backend not in LOCAL_BACKENDS else None


def describe(runs: Sequence[RunConfig], apart: str = "") -> str:
    """What one training computes, for a progress line: its defense and seed, its pretraining, and its attacks (tuned:
    each selects among candidates; each scored beside the adversary's prior, computed once per seed and cached);
    ``apart``: the settings that tell it from the others (``variants.told_apart``)."""
    r = runs[0]
    defenses = ", ".join(f"{d.name} {d.strength:g}" if d.strength is not None else d.name for d in r.defenses)
    tuned = sum(run.attack.tune for run in runs)
    steps = ["pretraining"] if METHODS.get(r.method.name).pretrains else []
    steps.append("training")
    steps.append(f"{len(runs)} attack{'s' if len(runs) != 1 else ''}" + (f" ({tuned} tuned)" if tuned else "")
                 + (" and the prior" if any(run.attack.prior != "none" for run in runs) else ""))
    method = f"{r.method.name} ({apart})" if apart else r.method.name
    return f"{method}, {defenses or 'no defense'}, seed {r.seed}: {', '.join(steps)}"


def check(configs: Sequence[RunConfig]) -> int:
    """Plan every training and its attacks before any training: bad input fails fast, nothing half-done.
    Returns the number of trainings."""
    _check_canary_labels(configs)
    _check_canaries_guessed(configs)
    known = next((c.partition.aux_features for c in configs if c.partition.aux_features is not None), None)
    refuse_unread_aux_features(known, [c.attack.name for c in configs])
    groups = trainings(configs)
    for runs in groups.values():
        plan(runs)
    return len(groups)


def _check_canary_labels(configs: Sequence[RunConfig]) -> None:
    """``partition.canary_labels`` says how planted canaries' labels are drawn: refused where no run plants any. A
    grid's control cell (canaries 0) beside planted ones is the same training as without it (``config.keys``)."""
    named = next((c.partition.canary_labels for c in configs if c.partition.canary_labels != "uniform"), None)
    if named is not None and not any(c.partition.canaries for c in configs):
        raise ConfigError(f"partition.canary_labels={named} is set but partition.canaries is 0: plant canaries "
                          "(partition.canaries=N; vflpriv audit: --canaries N), or remove it")


def _check_canaries_guessed(configs: Sequence[RunConfig]) -> None:
    """Canaries are guessed by a label attack or by the training's auditor: refused where the command has neither
    (a feature attack guesses no label; they would only change the labels trained with)."""
    planted = next((c.partition.canaries for c in configs if c.partition.canaries), 0)
    if not planted or any(c.attack_secret() != FEATURES or c.finetune.auditor for c in configs):
        return
    names = sorted({c.attack.name for c in configs})
    raise ConfigError(f"partition.canaries={planted}: no attack here guesses labels ({', '.join(names)} infer"
                      f"{'s' if len(names) == 1 else ''} features) and no "
                      "auditor does (finetune.auditor); add a label attack or an auditor, or remove them")


def drop_damaged(store: Store, configs: Sequence[RunConfig], *, on_note: Callable[[str], None] | None,
                 replace_other_data: bool = False) -> list[str]:
    """Delete the stored records of ``configs`` that do not check out (their own fields, or what their run's settings
    say of them, or an entry their plugin method voids: ``spelling.resumed``), or whose epsilon earlier claim rules
    decided (``RunRecord.claim_version``), so they are recomputed; say so (the tests
    :func:`~vflpriv.tradeoff.gap.record_problems`, the gap's too). Records computed on other data than the dataset
    holds now (``data_by_key``: a changed data file) are deleted and recomputed too where ``replace_other_data``
    (``--overwrite``), else refused (``gap.refuse_stored_other``, ``gap.refuse_other``), nothing deleted. Returns the
    stored records of secure-noise trainings held in part or from two trainings (:func:`partly_stored`): kept, not
    deleted, until the loop (:func:`_replace_part`) runs their training whole and replaces them, or finds another
    sweep did (:class:`~vflpriv.tradeoff.gap.GapCheck`; review st S1: ``sweep``'s ``redo``)."""
    expected = data_by_key(configs)
    if not replace_other_data:
        refuse_stored_other(store, list(expected), expected)
    found = record_problems(store.texts(list(expected)), {c.key(): c for c in configs}, expected,
                            current_fingerprint())
    if not replace_other_data:
        refuse_other(found, where=str(store.path))
    store.forget([key for problems in found.values() for key, _ in problems])
    partial = partly_stored(configs, secure_records(store.path, configs))  # review fe2 R1: retrained whole
    if partial and on_note is not None:
        on_note(f"{len(partial)} record(s) of secure-noise trainings stored in part (or from two trainings) replaced "
                "by a recomputation of their whole training (options.secure_noise: a retraining draws other noise, "
                f"so one training key's records must come from one training; the first, run {partial[0]})")
    for what, problems in found.items():
        if problems and on_note is not None:
            on_note(f"{len(problems)} {what} in the store deleted and recomputed (the first, run {problems[0][0]}: "
                    f"{problems[0][1]})")
    return partial


def _replace_part(store: Store, training: str, runs: list[RunConfig], on_note: Callable[[str], None] | None, *,
                  known: Collection[str]) -> None:
    """Before a claimed secure-noise training runs whole: forget its stored records under other keys of the same
    settings (an attack's revision; the run overwrites the others); say which another sweep stored meanwhile (not
    ``known`` at the start); ConfigError where the store holds runs of other settings of it, which the retraining
    would leave beside another training (review fe3 F3). The one place such records are forgotten (review st S1)."""
    own = {c.key() for c in runs}
    held = partly_stored(runs, store.final_records(training))
    store.forget([key for key in held if key not in own])
    meanwhile = [key for key in held if key not in known]
    if meanwhile and on_note is not None:
        on_note(f"{len(meanwhile)} record(s) of secure-noise training {training} stored meanwhile in part, by "
                "another sweep, replaced by its whole training here (options.secure_noise: a retraining draws other "
                "noise, so one training key's records must come from one training)")


def _training_of(record: RunRecord) -> tuple[str, str]:
    """What one training gives all its records: its utility and training time (``mixed_trainings``'s test)."""
    return repr(record.utility), repr(record.train_seconds)


def sweep(
    configs: Sequence[RunConfig],
    store: Store,
    *,
    jobs: int = 1,
    backend: str = "loky",
    address: str | None = None,
    runs_per_gpu: int = 1,
    on_done: Callable[[list[RunRecord]], None] | None = None,
    on_wait: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_schedule: Callable[[list[Planned]], None] | None = None,
    on_start: Callable[[list[RunConfig]], None] | None = None,
    on_tail: Callable[[], None] | None = None,
    on_read: Callable[[list[str]], None] | None = None,
    checked: bool = False,
    redo: Collection[str] = (),
    replace_other_data: bool = False,
    since: float | None = None,
) -> pd.DataFrame:
    """Validate every config and drop the damaged records of the store first (unless ``checked``: the caller
    did both), then run the trainings the store lacks: locally spread over the visible GPUs (``on_gpus``), on a
    cluster each asking its scheduler for 1 / ``runs_per_gpu`` of a GPU (``gpu_share``), where they run on CUDA.

    A training's records are committed together as soon as they arrive. Failed records from an earlier
    sweep are retried; those written during this sweep (by it or by another sweep) are not. A stored record
    that does not check out (damaged) is deleted and recomputed, said through ``on_note``; one computed on other
    data is refused unless ``replace_other_data`` (:func:`drop_damaged`). ``on_schedule`` gets the
    trainings about to run, in dispatch order (``planned_work``), before they start. The returned
    frame holds one row per config, in grid order, including runs found done in the store. ``on_start(runs)``: a
    training (its runs) starts here or in a local worker; ``on_tail()``: locally, no more trainings wait than workers
    compute (``run_all``). ``redo``: with ``checked``, what :func:`drop_damaged` returned (stored, to be recomputed).
    Records of this sweep another sweep replaced before the frame's read are said through ``on_note`` (review st S3).
    ``on_read(keys)``: runs found done in the store that this sweep neither computed nor handed to its workers (each
    once; at first those stored before).
    A record written since the start-up check began (``since``, with ``checked``: when the caller's began) is read
    only where it passes that check's tests, else refused as that check refuses it or recomputed once, said in one
    note (:class:`~vflpriv.tradeoff.gap.GapCheck`; ``replace_other_data`` as for :func:`drop_damaged`).
    """
    started = time.time() if since is None else since
    if not checked:
        check(configs)
        redo = drop_damaged(store, configs, on_note=on_note, replace_other_data=replace_other_data)
    redo = set(redo)
    groups = trainings(configs)
    apart = told_apart(groups) if on_schedule is not None else {}
    secure = {k: secure_settings(runs[0]) for k, runs in groups.items()}
    share = gpu_share(configs, backend=backend, runs_per_gpu=runs_per_gpu)
    gpus = torch.cuda.device_count() if backend in LOCAL_BACKENDS else 0
    keys, gap = [c.key() for c in configs], GapCheck(store, groups, started, replace_other_data=replace_other_data)
    written: dict[str, tuple[str, str]] = {}  # what this sweep stored, by key: its training's (utility, train time)
    told: set[str] = set()  # the keys on_read was given
    ran: set[str] = set()  # the keys of the runs this process computed or handed to its workers: never read here

    def read(done: set[str]) -> None:
        fresh = sorted(done - told - ran)
        told.update(fresh)
        if fresh and on_read is not None:
            on_read(fresh)

    with store.lease():
        while True:
            settled = store.settled(keys, since=started, redo=redo) - gap.refused(keys)
            read(settled)
            todo = {k: [r for r in runs if r.key() not in settled] for k, runs in groups.items()}
            # a secure-noise training is run whole, never completed beside another sweep's records (review fe3 F3)
            todo = {k: groups[k] if secure[k] else runs for k, runs in todo.items() if runs}
            if not todo:
                # one snapshot: no training half rewritten by another sweep; a record deleted meanwhile (another
                # sweep's start-up check) is computed again (review st S1)
                stored = store.get_many([c.key() for c in configs])
                if gap.refused(keys) & stored.keys():  # written just before the read: judged as any gap record
                    continue  # (review misc3 M1: another sweep's records of other data were reported as ours)
                if all(c.key() in stored for c in configs):
                    break
                continue
            mine = [k for k in schedule(todo) if store.claim(k)]
            # A training another sweep stored and released between our read of ``settled`` and our claim:
            # its records were put before its release, so a second read after the claim sees them.
            claimed = [r.key() for k in mine for r in todo[k]]
            now_settled = store.settled(claimed, since=started, redo=redo) - gap.refused(keys)
            finished = [k for k in mine if all(r.key() in now_settled for r in todo[k])]
            read({r.key() for k in finished for r in todo[k]})
            if finished:  # no write transaction on the usual path
                store.release(finished)
                mine = [k for k in mine if k not in finished]
            if not mine and finished:
                continue  # those trainings are done: read the store again at once
            for k in mine:
                if secure[k]:
                    _replace_part(store, k, groups[k], on_note, known=redo)
            if not mine:
                if on_wait is not None:
                    on_wait(len(todo))
                time.sleep(POLL_SECONDS)
                continue
            workers = max(1, min(jobs, len(mine)))  # one pending training needs no worker pool
            if on_schedule is not None:
                on_schedule(planned_work(todo, mine, apart))

            def commit(records: list[RunRecord]) -> None:  # at once, from whichever thread has the result
                when = store.put_many(records)
                gap.ours.update((r.key, when) for r in records)
                store.release([records[0].training_key])
                written.update((r.key, _training_of(r)) for r in records)
                if on_done is not None:
                    on_done(records)

            ran.update(r.key() for k in mine for r in todo[k])
            run_all(run_safely, on_gpus([todo[k] for k in mine], gpus), jobs=workers, on_result=commit,
                    backend_name=backend, address=address, gpu_share=share, on_start=on_start, on_tail=on_tail)
    if (recomputed := gap.note()) is not None and on_note is not None:
        on_note(recomputed)
    replaced = [key for key, training in written.items() if _training_of(stored[key]) != training]
    if replaced and on_note is not None:
        on_note(f"{len(replaced)} record(s) this sweep computed were replaced in the store meanwhile by another "
                f"sweep's training of them (the first, run {replaced[0]}): these results are the store's, not this "
                "sweep's")
    import pandas as pd

    return pd.DataFrame([stored[c.key()].to_dict() for c in configs], columns=RunRecord.columns())
