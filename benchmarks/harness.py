"""vflpriv's speed figures, all measured in one run on this machine (issue 16's benchmark harness).

1. The README's main command (``vflpriv evaluate --method fedhssl --attack mc --defense iso``): wall time
   from a cold cache with the default jobs and with ``--jobs 1``, and the peak memory of its process tree.
2. Engine overhead: FedSplitNN finetuning through the channel and one FedHSSL pretraining iteration,
   each against a bare PyTorch loop doing the same work (``engine_overhead.py``, ``pretrain_overhead.py``).
3. A v-point finetune-phase sweep vs the work it cannot avoid: one pretraining and v finetunings.
4. Growth: one training's time at x1, x2, x4 training samples (fitted log-log slope: 1.0 = linear) and
   with 2 vs 4 parties.
5. The 2-worker speedup: a 3 methods x 3 strengths x 3 seeds grid on digits with ``vflpriv sweep``,
   ``--jobs 1`` vs ``--jobs 2`` from cold caches; the two stores must hold the same numbers.
6. The default audit of FedSplitNN on digits (every registered attack and defense) against the same audit
   with only the attacks vflpriv had before issue 28 (mc, mc-mixmatch, gc, norm, direction), cold caches.
7. The default audit of FedSplitNN on digits tuned (the default, search budget 8) vs ``--no-tune-attacks``.

    python benchmarks/harness.py [--record benchmarks/results/harness.md] [--repeats 3] [--only audit|tuned]

Every figure is a ratio or slope of timings taken in this one run (these machines are noisy).
"""

from __future__ import annotations

import argparse
import copy
import io
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import engine_overhead
import pretrain_overhead
import torch

from vflpriv.config.schema import RunConfig
from vflpriv.runner import prior
from vflpriv.runner.execution import build_federation, run
from vflpriv.runner.planning import plan
from vflpriv.store.folders import default_store
from vflpriv.store.sqlite import Store

MAIN_COMMAND = ["evaluate", "--method", "fedhssl", "--attack", "mc", "--defense", "iso"]
GRID = """\
methods: [splitnn, local-simsiam, fedhssl]
datasets: [digits]
attacks: [mc]
defenses: [{name: iso, phase: finetune, sweep: true}]
strengths: [1, 5, 25]
seeds: [0, 1, 2]
"""


def vflpriv_cli() -> list[str]:
    return [sys.executable, "-m", "vflpriv"]


def tree_rss_mb(session: int) -> float:
    """Resident memory of every process in ``session`` (the command and its workers), from /proc."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[3]) != session:
                continue
            total += int((entry / "statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def measured(args: list[str], *, cwd: Path, cache: Path) -> tuple[float, float]:
    """(wall seconds, peak resident MB of the process tree) of one vflpriv command from a cold cache."""
    env = {**os.environ, "VFLPRIV_CACHE": str(cache)}
    start = time.perf_counter()
    proc = subprocess.Popen([*vflpriv_cli(), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_rss_mb(proc.pid))
        time.sleep(0.25)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr.read().decode()}")
    return wall, peak


def main_command(tmp: Path, repeats: int, say) -> None:
    say("## 1. The README's main command, cold cache (median of the repeats, alternating jobs)")
    default_jobs = min(2, os.cpu_count() or 1)
    walls: dict[int, list[float]] = {default_jobs: [], 1: []}
    peaks: dict[int, float] = {default_jobs: 0.0, 1: 0.0}
    for r in range(repeats):
        for jobs in walls:
            wall, peak = measured([*MAIN_COMMAND, "--jobs", str(jobs), "--out", str(tmp / f"main{jobs}-{r}")],
                                  cwd=tmp, cache=tmp / f"cache-main{jobs}-{r}")
            walls[jobs].append(wall)
            peaks[jobs] = max(peaks[jobs], peak)
    for jobs, times in walls.items():
        say(f"--jobs {jobs}: {statistics.median(times):.1f} s wall (runs: {', '.join(f'{t:.1f}' for t in times)}), "
            f"peak memory of the process tree {peaks[jobs]:.0f} MB")


def engine_overhead_ratios(repeats: int, say) -> None:
    say("## 2. Engine overhead (vflpriv / bare PyTorch loop, same work; 1.00 = none)")
    cfg = RunConfig.model_validate({"finetune": {"epochs": 20}})
    fed = engine_overhead.federation(cfg)
    init = [engine_overhead.build_encoder(p.spec, fed.model, generator=fed.generator) for p in fed.parties]
    top = engine_overhead.new_top(fed, init)
    engine, bare = [], []
    for _ in range(repeats):
        engine.append(engine_overhead.engine_time(fed, copy.deepcopy(init), copy.deepcopy(top)))
        bare.append(engine_overhead.bare_time(fed, copy.deepcopy(init), copy.deepcopy(top)))
    say(f"FedSplitNN finetuning (digits, 20 epochs): {statistics.median(engine):.3f} s vs "
        f"{statistics.median(bare):.3f} s, ratio {statistics.median(engine) / statistics.median(bare):.2f}")
    config = RunConfig.model_validate({"method": {"name": "fedhssl", "options": {"global_iterations": 1}}})
    ours, plain = [], []
    for r in range(repeats + 1):  # the first round warms up
        p, fed = pretrain_overhead.federation(config)
        t = time.perf_counter()
        p.method.pretrain(fed)
        t_ours = time.perf_counter() - t
        p, fed = pretrain_overhead.federation(config)
        t = time.perf_counter()
        pretrain_overhead.bare_fedhssl(fed, p.method, 1)
        if r:
            ours.append(t_ours)
            plain.append(time.perf_counter() - t)
    say(f"FedHSSL pretraining (digits, 1 global iteration): {min(ours):.3f} s vs {min(plain):.3f} s, "
        f"ratio {min(ours) / min(plain):.2f}")


def run_config(**sections) -> RunConfig:
    return RunConfig.model_validate({"attack": {"name": "gc", "prior": "none"}, **sections})


def sweep_vs_necessary(tmp: Path, say) -> None:
    """A finetune-phase sweep of v strengths (one seed) vs one pretraining + v finetunings, done by hand."""
    say("## 3. A v-point finetune sweep vs 1 pretraining + v finetunings")
    strengths = [0.5, 1.0, 2.0, 5.0, 10.0]
    configs = [run_config(method={"name": "fedhssl"},
                          defenses=[{"name": "iso", "phase": "finetune", "strength": s, "sweep": True}])
               for s in strengths]
    os.environ["VFLPRIV_CACHE"] = str(tmp / "cache-sweep")
    prior._PRIORS.clear()
    start = time.perf_counter()
    for c in configs:
        run([c])
    swept = time.perf_counter() - start
    plans = [plan(c) for c in configs]
    fed = build_federation(plans[0])
    start = time.perf_counter()
    pretrained = plans[0].method.pretrain(fed)
    necessary = time.perf_counter() - start
    for p in plans:
        fed = build_federation(p)
        start = time.perf_counter()
        trained = p.method.finetune(fed, copy.deepcopy(pretrained))
        p.method.predict(fed, trained)
        necessary += time.perf_counter() - start
    v = len(strengths)
    say(f"fedhssl on digits, v = {v} ISO strengths, 1 seed, attack gc: sweep {swept:.2f} s, "
        f"1 pretraining + {v} finetunings by hand {necessary:.2f} s, ratio {swept / necessary:.2f}")


def train_seconds(config: RunConfig, cache: Path) -> float:
    os.environ["VFLPRIV_CACHE"] = str(cache)
    (record,) = run([config])
    assert record.status == "ok", record.error
    return record.train_seconds


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y on log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def growth(tmp: Path, say) -> None:
    say("## 4. Growth with samples and parties (one training, cold cache, 1 thread)")
    sizes = [350, 700, 1400]
    for method in ("splitnn", "fedhssl"):
        times = []
        for n in sizes:
            cfg = run_config(method={"name": method}, dataset={"name": "digits", "max_samples": n},
                             partition={"aligned_fraction": 0.5, "labeled": n // 4, "aux": 20,
                                        "aux_source": "labeled"})
            times.append(train_seconds(cfg, tmp / f"cache-growth-{method}-{n}"))
        per = ", ".join(f"x{n // sizes[0]} ({n}): {t:.2f} s" for n, t in zip(sizes, times))
        say(f"{method}: {per}; log-log slope {slope(sizes, times):.2f}")
    for method in ("splitnn", "fedhssl"):
        times = [train_seconds(run_config(method={"name": method}, partition={"parties": k}),
                               tmp / f"cache-parties-{method}-{k}") for k in (2, 4)]
        say(f"{method}: 2 parties {times[0]:.2f} s, 4 parties {times[1]:.2f} s, ratio {times[1] / times[0]:.2f}")


def store_numbers(store: Path) -> list[tuple]:
    """Every record's key and numbers (not its timings), in key order."""
    with Store(store) as s:
        return sorted((r.key, r.status, r.utility, r.attack_accuracy, r.prior_accuracy) for r in s.all())


def speedup(tmp: Path, repeats: int, say) -> None:
    say("## 5. Two workers vs one: 3 methods x 3 strengths x 3 seeds on digits (vflpriv sweep, cold caches, "
        "alternating)")
    grid = tmp / "grid.yaml"
    grid.write_text(GRID)
    walls: dict[int, list[float]] = {1: [], 2: []}
    stores: dict[int, list[tuple]] = {}
    for r in range(repeats):
        for jobs in walls:
            out = tmp / f"grid{jobs}-{r}"
            wall, peak = measured(["sweep", str(grid), "--jobs", str(jobs), "--out", str(out)], cwd=tmp,
                                  cache=tmp / f"cache-grid{jobs}-{r}")
            walls[jobs].append(wall)
            numbers = store_numbers(default_store(out))
            assert stores.setdefault(jobs, numbers) == numbers, "a repeat gave other numbers"
            say(f"repeat {r + 1}, --jobs {jobs}: {wall:.1f} s wall, peak memory {peak:.0f} MB, {len(numbers)} records")
    ratios = [one / two for one, two in zip(walls[1], walls[2])]
    say(f"median wall: --jobs 1 {statistics.median(walls[1]):.1f} s, --jobs 2 {statistics.median(walls[2]):.1f} s; "
        f"speedup per repeat {', '.join(f'{x:.2f}' for x in ratios)}, median {statistics.median(ratios):.2f}x; "
        f"numbers identical across jobs and repeats: {'yes' if stores[1] == stores[2] else 'NO'}")
    speedup_ceiling(tmp, grid, statistics.median(walls[1]), say)


def speedup_ceiling(tmp: Path, grid: Path, one_worker: float, say) -> None:
    """What bounds the 2-worker speedup on this machine, measured: the serial part S (the same sweep rerun on
    its complete store: start-up, planning, outputs) and the slowdown c of two single-thread sweeps running at
    once vs one alone (shared cores, caches, memory bandwidth). Ceiling: T1 / (S + c (T1 - S) / 2)."""
    serial, _ = measured(["sweep", str(grid), "--jobs", "1", "--out", str(tmp / "grid1-0")], cwd=tmp,
                         cache=tmp / "cache-grid1-0")
    start = time.perf_counter()
    procs = [subprocess.Popen([*vflpriv_cli(), "sweep", str(grid), "--jobs", "1", "--out", str(tmp / f"pair{i}")],
                              cwd=tmp, env={**os.environ, "VFLPRIV_CACHE": str(tmp / f"cache-pair{i}")},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in (0, 1)]
    for proc in procs:
        proc.wait()
    together = time.perf_counter() - start
    contention = (together - serial) / (one_worker - serial)
    ceiling = one_worker / (serial + contention * (one_worker - serial) / 2)
    say(f"what bounds it: serial part S = {serial:.1f} s (rerun on the complete store); two --jobs 1 sweeps at "
        f"once took {together:.1f} s vs {one_worker:.1f} s alone: contention c = {contention:.2f} on the parallel "
        f"part; ceiling T1 / (S + c (T1 - S) / 2) = {ceiling:.2f}x, {2 / contention:.2f}x with no serial part")


#: The attacks of the audit before issue 28 added the anchors' (dli, bli, mc-active, similarity, exploit).
EARLIER_ATTACKS = "mc,mc-mixmatch,gc,norm,direction"


def audit_walls(tmp: Path, repeats: int, variants: dict[str, list[str]], say) -> list[float]:
    """Median wall seconds of ``vflpriv audit --method splitnn`` with each variant's extra arguments, the variants
    interleaved over the repeats, each from a cold cache."""
    walls: dict[str, list[float]] = {label: [] for label in variants}
    for r in range(repeats):
        for i, (label, extra) in enumerate(variants.items()):
            wall, _ = measured(["audit", "--method", "splitnn", *extra, "--out", str(tmp / f"audit-{i}-{r}")],
                               cwd=tmp, cache=tmp / f"cache-audit-{i}-{r}")
            walls[label].append(wall)
    for label, times in walls.items():
        runs = ", ".join(f"{t:.1f}" for t in times)
        say(f"{label or 'default'}: {statistics.median(times):.1f} s wall (runs: {runs})")
    return [statistics.median(t) for t in walls.values()]


def audit_cost(tmp: Path, repeats: int, say) -> None:
    say("## 6. The default audit of splitnn on digits vs the audit with the attacks before issue 28 (cold caches)")
    variants = {"": [], f"--attacks {EARLIER_ATTACKS}": ["--attacks", EARLIER_ATTACKS]}
    default, earlier = audit_walls(tmp, repeats, variants, say)
    say(f"ratio: {default / earlier:.2f} (target: at most 3)")


def tuned_audit_cost(tmp: Path, repeats: int, say) -> None:
    say("## 7. The default audit of splitnn on digits, tuned (search budget 8, the default) vs untuned (cold caches)")
    untuned, tuned = audit_walls(tmp, repeats, {"--no-tune-attacks": ["--no-tune-attacks"],
                                                "tuned, --search-budget 8": ["--search-budget", "8"]}, say)
    say(f"ratio tuned / untuned: {tuned / untuned:.2f} (target: at most 3); tuned audit {tuned / 60:.1f} min "
        "(target: at most 5)")


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.platform()}, Python {platform.python_version()}, torch {torch.__version__}, "
            f"{os.cpu_count()} CPUs ({model}), {memory:.0f} GiB")


def machine_speed() -> str:
    """A fixed reference workload, timed at the start and the end of the run: these VMs change speed by up to
    2x within an hour, so the absolute figures between two such lines are only comparable at equal speed."""
    a, w = torch.ones(32, 512), torch.ones(512, 512)
    start = time.perf_counter()
    for _ in range(2000):
        a @ w
    gemm = (time.perf_counter() - start) / 2000
    start = time.perf_counter()
    total = 0
    for i in range(300_000):
        total += i
    return f"machine speed: GEMM 32x512x512 {gemm * 1e6:.0f} us, Python loop of 300k adds {(time.perf_counter() - start) * 1e3:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--record", type=Path, help="also write the output to this Markdown file")
    parser.add_argument("--only", choices=["audit", "tuned"], help="measure only this section")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    command = "python benchmarks/harness.py " + " ".join(sys.argv[1:])
    say(f"# vflpriv benchmark harness\n\ncommand: {command.strip()}\n\nmachine: {machine()}\n")
    say(f"at the start, {machine_speed()}")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.only:
            {"audit": audit_cost, "tuned": tuned_audit_cost}[args.only](tmp, args.repeats, say)
            say(f"at the end, {machine_speed()}")
            if args.record:
                args.record.write_text("\n".join(lines) + "\n")
            return
        main_command(tmp, args.repeats, say)
        speedup(tmp, args.repeats, say)
        with redirect_stdout(io.StringIO()):
            run([run_config()])  # warm-up of this process: first dataset load and kernels
        engine_overhead_ratios(args.repeats, say)
        sweep_vs_necessary(tmp, say)
        growth(tmp, say)
        audit_cost(tmp, args.repeats, say)
        tuned_audit_cost(tmp, args.repeats, say)
    say(f"at the end, {machine_speed()}")
    if args.record:
        args.record.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
