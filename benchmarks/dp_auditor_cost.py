"""dp-gaussian's trainings with the gradient-lrt auditor, two checkouts interleaved (issue 49): CPU seconds per
training and their ratio, and whether both compute the same numbers.

    python benchmarks/dp_auditor_cost.py --base-python /tmp/base/.venv/bin/python [--kinds natural,crafted]

The trainings are the default audit's (``vflpriv audit --method splitnn``: digits, seeds 0-2, dp-gaussian at its
three audit strengths, 25 canaries, the auditor attached); ``crafted`` are the same with ``canary_inputs: crafted``
and ``partition.canary_labels: pair`` (the two-candidate game). Each training runs in a fresh child of each checkout,
the two checkouts alternating (which goes first alternates too); each child reports the process CPU seconds of its
training (``vflpriv.runner.execution.train``: the finetuning with the defense and the auditor) and saves, per private
update, the defense's release (every parameter's ``.grad`` and every received embedding's ``.grad``, concatenated)
and, after it, the auditor's scores and the canary audit's fields of the record (counts, guesses, every bound).
Before the clock starts, each child imports what the first per-sample gradient of a process imports (torch's
``autograd.grad`` with ``grad_outputs`` imports sympy, 0.27 CPU s; the old code had imported it with opacus in its
planning; the branch measured here imported no opacus, a change withdrawn at its merge), so that the figure is the
training's own, not a one-off import's.
The parent compares the two checkouts' saves: the released gradients' largest absolute difference and the scores'
(0 where bit for bit), and whether every auditor field is identical.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: The audit's settings per kind of canary (``--set`` overrides of ``vflpriv audit``).
KINDS = {"natural": [], "crafted": ["audit.auditor_options.canary_inputs=crafted", "partition.canary_labels=pair"]}
#: The record's fields the canary audit fills from the auditor's guesses, plus what the training itself records.
FIELDS = ("auditor_counts", "auditor_guesses", "auditor_accuracy", "auditor_epsilon_lower", "auditor_epsilon_fdp",
          "auditor_mu_lower", "auditor_epsilon_gdp_estimate", "utility", "epsilon")


def trainings(kind: str) -> list:
    """The default audit's dp-gaussian trainings (with ``kind``'s settings), in planning order."""
    from vflpriv.cli.audit import build_audit
    from vflpriv.workflows.audit import audit_grid

    cfg = build_audit(config=None, method="splitnn", dataset=None, attacks="gc", defenses="dp-gaussian", phases=None,
                      seeds="0,1,2", jobs=1, backend=None, device=None, all_adversaries=False,
                      overrides=KINDS[kind])
    runs, _ = audit_grid(cfg)
    return [r for r in runs if r.defenses and r.defenses[0].name == "dp-gaussian" and r.finetune.auditor]


def child(kind: str, index: int, out: Path) -> None:
    """Run training ``index`` of ``kind`` with the releases captured; save them and print the CPU seconds."""
    import time

    import torch

    import vflpriv.runner.execution as execution
    from vflpriv.engine.hooks import CombinedHooks
    from vflpriv.runner.planning import plan

    import torch.fx.experimental.symbolic_shapes  # noqa: F401 - once per process, before the clock (below)

    releases: list[torch.Tensor] = []
    backward = CombinedHooks.backward

    def captured(self, losses, params, leaves, ids, *args, **kwargs):
        value = backward(self, losses, params, leaves, ids, *args, **kwargs)
        grads = [p.grad.flatten() for p in params if p.grad is not None]
        releases.append(torch.cat([*grads, *(leaf.grad.flatten() for leaf in leaves.values())]).clone())
        return value

    CombinedHooks.backward = captured
    cpu: list[float] = []
    train = execution.train

    def timed(p):
        start = time.process_time()
        result = train(p)
        cpu.append(time.process_time() - start)
        return result

    execution.train = timed
    run = trainings(kind)[index]
    p = plan([run])
    record = execution.execute(p)[0]
    fields = {f: getattr(record, f) for f in FIELDS}
    torch.save({"releases": releases, "scores": p.auditor.scores, "fields": fields}, out)
    print(json.dumps({"cpu": cpu[0], "updates": len(releases), "seed": run.seed,
                      "strength": run.defenses[0].strength}))


def compare(a: Path, b: Path) -> dict:
    """The largest release and score differences between two saves, and whether their fields are identical."""
    import torch

    x, y = torch.load(a), torch.load(b)
    same_shapes = len(x["releases"]) == len(y["releases"])
    release = max(float((u - v).abs().max()) for u, v in zip(x["releases"], y["releases"])) if same_shapes else None
    scale = max(float(u.abs().max()) for u in x["releases"])
    finite = torch.isfinite(x["scores"])
    scores = float((x["scores"][finite] - y["scores"][finite]).abs().max())
    same = {f: x["fields"][f] == y["fields"][f] or (x["fields"][f] != x["fields"][f] and y["fields"][f] != y["fields"][f])
            for f in FIELDS}
    return {"release": release, "release_scale": scale, "scores": scores,
            "fields_identical": all(same.values()), "differing": [f for f, s in same.items() if not s]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-python", required=True, help="the other checkout's Python (its venv)")
    parser.add_argument("--new-python", default=sys.executable)
    parser.add_argument("--kinds", default="natural,crafted", help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--only", type=int, default=None, help="the first N trainings of each kind")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "INDEX", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), Path(args.child[2]))
        return
    pythons = {"base": args.base_python, "new": args.new_python}
    tmp = Path(tempfile.mkdtemp(prefix="dp-auditor-cost-"))
    print(f"base {args.base_python}, new {args.new_python}; load average {os.getloadavg()[0]:.1f}", flush=True)
    cpu: dict[str, list[float]] = {"base": [], "new": []}
    worst = {"release": 0.0, "scores": 0.0}
    identical = True
    for kind in args.kinds.split(","):
        count = len(trainings(kind)) if args.only is None else args.only
        for i in range(count):
            cache = tempfile.mkdtemp(dir=tmp)  # one cache per training, shared by both checkouts (same dataset)
            saved, seen = {}, {}
            for name in ("base", "new") if i % 2 == 0 else ("new", "base"):
                saved[name] = tmp / f"{name}.pt"
                out = subprocess.run([pythons[name], str(Path(__file__).resolve()), "--base-python", "-", "--child",
                                      kind, str(i), str(saved[name])], check=True, capture_output=True, text=True,
                                     env={**os.environ, "VFLPRIV_CACHE": cache}, cwd=tmp)
                seen[name] = json.loads(out.stdout.strip().splitlines()[-1])
                cpu[name].append(seen[name]["cpu"])
            diff = compare(saved["base"], saved["new"])
            for f in saved.values():
                f.unlink()
            worst = {k: max(worst[k], diff[k] if diff[k] is not None else float("inf")) for k in worst}
            identical &= diff["fields_identical"]
            print(f"{kind} seed {seen['new']['seed']} sigma {seen['new']['strength']:.4g}: "
                  f"{seen['new']['updates']} updates; CPU base {seen['base']['cpu']:.2f} s, new {seen['new']['cpu']:.2f}"
                  f" s ({seen['new']['cpu'] / seen['base']['cpu']:.2f}x); largest release difference "
                  f"{diff['release']:.3g} (largest |release| {diff['release_scale']:.3g}), scores {diff['scores']:.3g}, "
                  f"auditor fields {'identical' if diff['fields_identical'] else 'DIFFER: ' + ', '.join(diff['differing'])}",
                  flush=True)
    b, n = sum(cpu["base"]), sum(cpu["new"])
    ratios = [x / y for x, y in zip(cpu["new"], cpu["base"])]
    print(f"\n{len(ratios)} trainings: CPU base {b:.1f} s, new {n:.1f} s, ratio {n / b:.2f} (per training median "
          f"{statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}); largest release difference "
          f"{worst['release']:.3g}, largest score difference {worst['scores']:.3g}; auditor fields "
          f"{'identical on every training' if identical else 'DIFFER somewhere (above)'}; load average at the end "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
