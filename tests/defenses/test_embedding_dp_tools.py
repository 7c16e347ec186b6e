"""embedding-dp's book-keeping and benchmarks: the per-row counts fold into their totals as they go (memory bounded),
the parts benchmark reports each part over the baseline of the same repeat, and the overhead benchmark's
``--per-process`` is checked (only with ``--against``, at least 1) and stated in its header."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from vflpriv.defenses.embedding_dp import Counts

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_counts_fold_every_few_adds_and_count_each_id_once_per_add():
    """Never more than ``fold`` batches of ids held; the totals are each id's adds, whenever read."""
    counts, expected = Counts(10, fold=3), torch.zeros(10, dtype=torch.long)
    for step in range(11):
        ids = torch.tensor([step % 10, (3 * step) % 10, 7])
        counts.add(ids)
        ids.fill_(0)  # the caller reuses its buffer: what was added stays
        for i in (step % 10, (3 * step) % 10, 7):  # an id twice in a batch counts twice
            expected[i] += 1
        assert len(counts.pending) < 3
        if step in (4, 10):
            assert torch.equal(counts.counts(), expected)


def test_parts_are_ratios_to_the_baseline_of_the_same_repeat(monkeypatch):
    """A part costing half the baseline of its own repeat is 0.5 whatever the machine's speed does between and within
    repeats (here the part is slowed one repeat before the baseline: the ratio of the medians would say 5)."""
    parts = _load("embedding_dp_parts")
    now, marks = [0.0], [0]
    slowed = {parts.BASELINE: (1, 1, 10), "half": (1, 10, 10)}  # per repeat

    def repeat() -> int:  # one warm-up call of the marker, then 4 calls per repeat (calls=4)
        return max(0, marks[0] - 2) // 4

    def marker():
        marks[0] += 1

    def baseline():
        now[0] += 2.0 * slowed[parts.BASELINE][repeat()]

    def half():
        now[0] += 1.0 * slowed["half"][repeat()]

    monkeypatch.setattr(parts.time, "process_time", lambda: now[0])
    ratios, base = parts._ratios({"marker": marker, parts.BASELINE: baseline, "half": half}, 3, calls=4)
    assert ratios[parts.BASELINE] == 1.0 and ratios["half"] == 0.5 and base == 2000.0  # ms per call


def test_per_process_needs_against_and_a_whole_number_of_at_least_one(capsys):
    overhead = _load("feature_defense_overhead")
    for argv, says in ((["--per-process", "3"], "needs --against DIR"),
                       (["--per-process", "0", "--against", "x"], "0 is not a whole number of at least 1")):
        with pytest.raises(SystemExit) as exited:
            overhead.arguments(argv)
        assert exited.value.code == 2 and says in capsys.readouterr().err
    assert overhead.arguments(["--against", "x"]).per_process == 1
    assert overhead.arguments(["--against", "x", "--per-process", "4"]).per_process == 4


def test_the_a_b_header_states_the_repetitions_per_process(monkeypatch, capsys, tmp_path):
    overhead = _load("feature_defense_overhead")
    monkeypatch.setattr(overhead, "_layout", lambda tree, into: tmp_path)
    monkeypatch.setattr(overhead, "_child", lambda args, path: [["finetune embedding-dp", 1.5, 0.1]])
    overhead.against(overhead.arguments(["--against", str(tmp_path), "--per-process", "7", "--repeats", "2"]))
    header = capsys.readouterr().out.splitlines()[0]
    assert "median of 2 interleaved repetitions" in header and "median of its 7 interleaved repetitions" in header


def test_the_a_b_steps_do_the_same_work_with_each_tree_s_own_code():
    """``--against DIR`` times this checkout's step beside DIR's on equal bottoms, data and seeds: with DIR this
    checkout, both steps give the same gradients, and DIR's step runs DIR's own module, not this one's."""
    parts = _load("embedding_dp_parts")
    fns = parts.steps(BENCHMARKS.parent, batch=8, features=6, width=5)
    mine, theirs = (fns[k] for k in fns if k != parts.BASELINE)
    assert mine.__defaults__[0].__class__.__module__ == "vflpriv.defenses.embedding_dp"
    assert theirs.__defaults__[0].__class__.__module__ == "against_embedding_dp"
    grads = []
    for step in (mine, theirs):
        wrapped = step.__defaults__[1]
        sent = wrapped(torch.ones(8, 6))
        step.__defaults__[0].passive_backward(1, wrapped, torch.ones(8, 6), sent, torch.ones(8, 5), torch.arange(8))
        grads.append([p.grad.clone() for p in wrapped.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))
