"""Hostile or careless input to sweep, table, report, audit, tune and the cluster backends: one ``error:`` line
naming the problem, exit code 2, no traceback, and nothing written (no output folder, the given store unchanged)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.store.sqlite import Store

GRIDS = {
    "method_and_methods": ("method: {name: splitnn}\nmethods: [fedhssl]\n", "both method and methods are given"),
    "dataset_and_datasets": ("dataset: {name: digits}\ndatasets: [letter]\n", "both dataset and datasets are given"),
    "attack_and_attacks": ("attack: {name: mc}\nattacks: [gc]\n", "both attack.name and attacks are given"),
    "repeated_method": ("methods: [splitnn, fedhssl, splitnn]\n", "methods repeat: splitnn"),
    "repeated_attack": ("attacks: [mc, gc, mc]\n", "attacks repeat: mc"),
    "duplicate_yaml_key": ("partition: {labeled: 100}\nseeds: [0]\npartition: {labeled: 200}\n",
                           "key 'partition' is given twice in one section (first on line 1) (line 3"),
    "nested_duplicate_key": ("partition: {labeled: 100, labeled: 200}\n", "key 'labeled' is given twice"),
    "unmatched_method_options": ("methods: [splitnn, local-simsiam]\nmethod_options: {fedhsl*: {gamma: 0.1}}\n",
                                 "pattern(s) 'fedhsl*' match no method of this run (local-simsiam, splitnn)"),
    "attack_entry_with_a_shared_setting": ("methods: [splitnn]\nattacks: [{name: mc, prior: none}]\n",
                                           "an entry takes name and options only, got prior"),
    "stregths": ("methods: [splitnn]\nstregths: [1, 5]\n", "did you mean strengths?"),
    "method_list": ("method: [splitnn, fedhssl]\n", "list several under methods:"),
    "tens_of_millions": ("axes: {finetune.epochs: " + str(list(range(1, 3001))) + ", model.hidden: "
                         + str(list(range(1, 5001))) + "}\n", "15,000,000 cells and 135,000,000 runs exceed the limit"),
}


def _refused(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


@pytest.mark.parametrize("case", sorted(GRIDS))
def test_a_grid_file_in_conflict_or_too_large_is_refused_and_nothing_is_written(case, tmp_path):
    text, needle = GRIDS[case]
    grid = tmp_path / "grid.yaml"
    grid.write_text(text)
    _refused(["sweep", str(grid), "--out", str(tmp_path / "out")], needle)
    assert not (tmp_path / "out").exists()


def test_a_method_options_pattern_of_the_user_must_match_but_a_presets_need_not(tmp_path):
    _refused(["evaluate", "--method", "splitnn", "--set", "method_options.fedhssl*.gamma=0.1",
              "--out", str(tmp_path / "o")], "pattern(s) 'fedhssl*' match no method of this run (splitnn)")
    from vflpriv.cli.evaluate import build_experiment

    built = build_experiment(config=None, method="splitnn", attack=None, defense=None, dataset=None, strengths=None,
                             seeds=None, phase=None, jobs=None, backend=None, device=None, overrides=[],
                             preset="fedhssl-paper")  # its fedhssl* and local-* patterns serve other methods
    assert built.method.name == "splitnn"


@pytest.mark.parametrize(("args", "needle"), [
    (["--attacks", ""], "--attacks is empty"),
    (["--attacks", " , "], "--attacks is empty"),
    (["--defenses", ","], "--defenses is empty"),
    (["--phases", ""], "--phases is empty"),
    (["--attacks", "gc,bli", "--set", "method.options.epochs=1", "--method", "ssvfl-i"],
     "nothing to audit: no attack applies; gc x none (finetune): attack 'gc' needs the gradient messages"),
    (["--attacks", "mc,gc,mc"], "attacks repeat: mc; give each once"),
    (["--defenses", "iso,max-norm,iso"], "defenses repeat: iso; give each once"),
    (["--phases", "finetune,finetune"], "phases repeat: finetune; give each once"),
    (["--seeds", "0,1,0"], "seeds repeat: 0; give each once"),
    (["--seeds", "-1"], "invalid seeds[0]=-1"),
    (["--defenses", "iso", "--set", "audit.defenses.0.strengths=[1,5,1.0]"], "strengths of iso repeat: 1"),
    (["--set", "audit.attack_options.mcc.epochs=3", "--attacks", "mc"],
     "audit.attack_options names mcc, not an attack of this audit; its attacks: mc"),
    # bad input is refused, not set aside as "not applicable"
    (["--attacks", "mc", "--defenses", "iso", "--set", "audit.defenses.0.options.x=3"],
     "unknown setting audit.defenses[0].options.x"),
    (["--attacks", "mc", "--defenses", "iso", "--set", "audit.defenses.0.party=7"], "party 7 does not exist (0..1)"),
    # the user's option for an attack that this data leaves unread (review lo5 F5), named or of the default battery
    (["--quick", "--attacks", "mc,mc-mixmatch", "--defenses", "none", "--set",
      "audit.attack_options.mc-mixmatch.augment_rate=0.2"],
     "attack 'mc-mixmatch' run by party 1 (the passive party): audit.attack_options.mc-mixmatch.augment_rate=0.2 "
     "resamples tabular features"),
    (["--quick", "--defenses", "none", "--set", "audit.attack_options.mc-mixmatch.augment_rate=0.2"],
     "audit.attack_options.mc-mixmatch.augment_rate=0.2 resamples tabular features; the adversary's are images"),
    (["--attacks", "mc", "--defenses", "iso", "--set", "audit.defenses.0.kinds=[nope]"],
     "defense 'iso' cannot protect nope messages; valid kinds:"),
    (["--attacks", "mc", "--defenses", "iso", "--set", "partition.canaries=5"], "the audit plants its own canaries"),
    (["--attacks", "mc", "--defenses", "iso", "--canaries", "-2"], "audit.canaries"),
    (["--attacks", "mc", "--defenses", "iso", "--no-tune-attacks", "--search-budget", "4"],
     "search_budget set, but nothing is tuned"),
    # a problem of the training itself is said once, not once per pair
    (["--device", "tpu"], "unknown device 'tpu'; valid devices here: cpu"),  # cpu comes first on every machine
    (["--dataset", "nope"], "unknown dataset 'nope'; valid datasets:"),
])
def test_audit_refuses_bad_input_and_an_audit_with_nothing_to_do_before_any_training(args, needle, tmp_path,
                                                                                      monkeypatch):
    base = [] if "--method" in args else ["--method", "splitnn"]
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["audit", *base, *args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)
    assert needle.startswith("nothing to audit") or "nothing to audit" not in result.output


def test_a_name_with_a_control_character_is_echoed_escaped_on_one_line(tmp_path):
    _refused(["evaluate", "--method", "split\nnn", "--out", str(tmp_path / "o")], "unknown method 'split\\nnn'")
    _refused(["describe", "mc\x1b[31m"], "nothing is registered as 'mc\\x1b[31m'")


@contextlib.contextmanager
def _closed_port():
    """A port nothing listens on, held bound (not listening: a connection is refused) while the test uses it, so no
    other process, the other xdist worker's cluster say, can take it between its choice and its use."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.mark.parametrize("backend", ["dask", "ray"])
def test_a_cluster_where_nothing_listens_is_refused_at_once_and_nothing_is_written(backend, tmp_path):
    import time

    pytest.importorskip("dask.distributed" if backend == "dask" else "ray",
                        reason=f"the {backend} extra is not installed: pip install 'vflpriv[{backend}]'")
    start = time.monotonic()
    with _closed_port() as port:
        _refused(["evaluate", "--method", "splitnn", "--backend", backend, "--address", f"127.0.0.1:{port}",
                  "--out", str(tmp_path / "o")], f"cannot reach a {backend} cluster at --address '127.0.0.1:")
    assert time.monotonic() - start < 15
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("backend", ["dask", "ray"])
def test_a_cluster_that_accepts_but_never_answers_is_refused_within_the_timeout(backend, tmp_path, monkeypatch):
    import time

    pytest.importorskip("dask.distributed" if backend == "dask" else "ray",
                        reason=f"the {backend} extra is not installed: pip install 'vflpriv[{backend}]'")

    import vflpriv.tradeoff.executors as executors

    monkeypatch.setattr(executors, "CLUSTER_TIMEOUT", 3.0)
    with socket.socket() as silent:  # the kernel accepts connections; nobody ever speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        _refused(["sweep", str(_grid(tmp_path)), "--backend", backend, "--address", address,
                  "--out", str(tmp_path / "o")], f"cannot reach a {backend} cluster at --address '{address}' within 3 s")
        assert time.monotonic() - start < 3.0 + 10  # the timeout, and the planning around it
    assert not (tmp_path / "o").exists()


def test_an_address_for_a_local_backend_is_refused_before_any_training(tmp_path):
    _refused(["audit", "--method", "splitnn", "--backend", "loky", "--address", "auto", "--out", str(tmp_path / "o")],
             "--address is for a dask or ray cluster; backend 'loky' runs locally")
    assert not (tmp_path / "o").exists()


def _grid(tmp_path: Path) -> Path:
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\nattacks: [mc]\nseeds: [0]\n")
    return grid


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    """A real store of 4 runs (2 strengths x 2 seeds) from a tiny evaluate."""
    out = tmp_path_factory.mktemp("small")
    result = CliRunner().invoke(app, ["evaluate", "--method", "splitnn", "--attack", "mc", "--strengths", "0,5",
                                      "--seeds", "0,1", "--set", "partition.labeled=60", "--set", "partition.aux=20",
                                      "--set", "finetune.epochs=1", "--set", "attack.prior=none", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "results.sqlite"


def _foreign_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    text = tmp_path / "notes.sqlite"
    text.write_text("hello\n")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE x (a)")
    blank = tmp_path / "blank.sqlite"
    with sqlite3.connect(blank) as db:
        db.execute("PRAGMA user_version = 1")
    no_runs = tmp_path / "no-runs.sqlite"
    Store(no_runs).close()
    return {"empty file": (empty, "is an empty file (0 bytes), not a vflpriv results store"),
            "not sqlite": (text, "cannot be read as a SQLite database (file is not a database)"),
            "another program's": (other, "is another program's SQLite database (tables: x)"),
            "empty database": (blank, "is an empty SQLite database, not a vflpriv results store"),
            "no runs": (no_runs, "holds no runs; write runs into it with evaluate, sweep or audit")}


@pytest.mark.parametrize("command", ["table", "report"])
def test_a_read_command_refuses_what_is_not_a_store_with_runs_and_writes_nothing(command, tmp_path):
    for case, (path, needle) in _foreign_files(tmp_path).items():
        before = _digest(path)
        _refused([command, str(path), "--out", str(tmp_path / "o")], needle)
        assert _digest(path) == before, case  # not turned into a store, not initialised
        assert not (tmp_path / "o").exists(), case


@pytest.mark.parametrize("command", ["table", "report"])
def test_a_damaged_record_is_named_and_the_rest_reported_without_writing_the_store(command, tmp_path, small_store):
    store = tmp_path / "r.sqlite"
    store.write_bytes(small_store.read_bytes())
    with sqlite3.connect(store) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM runs ORDER BY key")]
        db.execute("UPDATE runs SET record = '{\"key\": 3' WHERE key = ?", (keys[0],))
    before = _digest(store)
    result = CliRunner().invoke(app, [command, str(store), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert f"warning: damaged record left out: run {keys[0]}: not JSON" in result.output
    assert "Traceback" not in result.output and _digest(store) == before
    rows = (tmp_path / "o" / "strength_rows.csv").read_text()
    assert "splitnn" in rows  # the other three runs are reported
    with sqlite3.connect(store) as db:
        db.execute("UPDATE runs SET record = 'null'")
    _refused([command, str(store), "--out", str(tmp_path / "o2")], "every record of results store")


@pytest.mark.parametrize("command", ["table", "report"])
def test_a_read_command_checks_its_out_folder_before_writing(command, tmp_path, small_store):
    long_name = "a" * 300
    for out, needle in ((Path("/proc/vflpriv-out"), "--out /proc/vflpriv-out cannot be created"),
                        (tmp_path / long_name, "is 300 bytes; the file system allows"),
                        (small_store, "is a file")):
        _refused([command, str(small_store), "--out", str(out)], needle)
    assert not (tmp_path / long_name[:10]).exists()


@pytest.mark.parametrize(("where", "needle"), [
    ("long out", "--out"),
    ("long store", "results store"),
    ("store is another program's", "is another program's SQLite database (tables: x), not a vflpriv results store; "
                                   "give a new path"),
    ("store is a folder", "is a directory"),
    ("store under /proc", "cannot be created: /proc is not writable"),
])
def test_evaluate_refuses_an_unusable_destination_before_training_and_creates_nothing(where, needle, tmp_path):
    out, store = tmp_path / "o", None
    if where == "long out":
        out = tmp_path / ("b" * 300)
    elif where == "long store":
        store = tmp_path / "x" / ("c" * 300) / "r.sqlite"
    elif where == "store is another program's":
        store = _foreign_files(tmp_path)["another program's"][0]
    elif where == "store is a folder":
        store = tmp_path
    else:
        store = Path("/proc/r.sqlite")
    before = sorted(p.name for p in tmp_path.iterdir())
    _refused(["evaluate", "--method", "splitnn", "--out", str(out), *(["--store", str(store)] if store else [])],
             needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no out folder, no store, no parent made


@pytest.mark.parametrize(("args", "needle"), [
    (["--steps", "31"], "--steps must lie in [0, 30] (each step halves the interval), got 31"),
    (["--steps", "-1"], "--steps must lie in [0, 30]"),
    (["--tolerance", "nan"], "--tolerance must lie in [0, 1], got nan"),
])
def test_tune_refuses_unbounded_or_meaningless_searches(args, needle, tmp_path):
    _refused(["tune", "--method", "splitnn", *args, "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("backend", ["dask", "ray"])
@pytest.mark.parametrize("command", ["evaluate", "sweep", "audit"])
def test_a_cluster_backend_without_its_extra_is_refused_before_a_store_exists(command, backend, tmp_path,
                                                                              monkeypatch):
    import vflpriv.tradeoff.executors as executors

    monkeypatch.setitem(executors._NEEDS, backend, "vflpriv_no_such_module")  # as on a machine without the extra
    chosen = [str(_grid(tmp_path))] if command == "sweep" else ["--method", "splitnn"]
    with wrote_nothing(tmp_path):
        _refused([command, *chosen, "--backend", backend, "--out", str(tmp_path / "o")],
                 f"backend '{backend}' needs the {backend} extra: pip install 'vflpriv[{backend}]'")


def test_a_store_locked_by_another_process_is_named_as_locked_within_seconds(tmp_path, monkeypatch):
    import time

    import vflpriv.store.schema as store_schema

    monkeypatch.setattr(store_schema, "BUSY_WAIT", 0.5)
    path = tmp_path / "results.sqlite"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # as a database browser mid-transaction, or a stuck process, would
    try:
        start = time.monotonic()
        with wrote_nothing(tmp_path / "o"):
            _refused(["evaluate", "--method", "splitnn", "--store", str(path), "--out", str(tmp_path / "o")],
                     f"results store {path} is locked by another process (waited 0.5 s)")
        assert time.monotonic() - start < 10
    finally:
        holder.close()
    assert not (tmp_path / "o").exists()
