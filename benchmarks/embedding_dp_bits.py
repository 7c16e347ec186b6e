"""Whether embedding-dp's DP-SGD gives the same numbers, bit for bit, under this checkout's code and another's: a sha256
of every update and the final parameters of the victim's bottom in digits splitnn, fedhssl and cssl-simsiam trainings
(sigma 0.5, 3 epochs, 200 labeled rows) and in 12 updates of vflpriv's CNN encoder, an SSL tower and a pooled tower,
with how many updates took the tape (the SSL tower is the CNN encoder's layers in another container: the same hash).

    python benchmarks/embedding_dp_bits.py --against DIR   # each in a fresh process, the lines compared
    python benchmarks/embedding_dp_bits.py [--code DIR]    # the hashes alone (--code: DIR's three files loaded instead)

Only ``defenses/row_checks.py``, ``ghost_sums.py``, ``own_modules.py``, ``tape_checks.py``, ``private_rows.py``,
``embedding_dp_accounting.py`` (where DIR has them), ``per_sample.py`` and ``embedding_dp.py`` are taken from DIR (loaded
under the package's names before anything imports them); every other module is this checkout's.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import torch


def _load(tree: Path) -> None:
    """DIR's files as ``vflpriv.defenses.row_checks``, ``.ghost_sums``, ``.own_modules``, ``.per_sample``,
    ``.tape_checks``, ``.private_rows``, ``.embedding_dp_accounting`` and ``.embedding_dp`` (each where DIR has it)."""
    import vflpriv.defenses  # noqa: F401  (the package, so its submodules can be registered)

    for name in ("row_checks", "ghost_sums", "own_modules", "per_sample", "tape_checks", "private_rows",
                 "embedding_dp_accounting", "embedding_dp"):  # in import order
        if not (tree / "defenses" / f"{name}.py").exists():  # before issue 47's row checks
            continue
        spec = importlib.util.spec_from_file_location(f"vflpriv.defenses.{name}", tree / "defenses" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


def _instrument(digest: list, taped: list) -> None:
    """Every update's gradients into ``digest[0]``, and the tape's results counted (taken, left to torch.func)."""
    from vflpriv.defenses import embedding_dp, per_sample

    update, norms = embedding_dp.EmbeddingDP.passive_backward, per_sample.GhostTape.norms

    def passive_backward(self, party, bottom, *args):
        update(self, party, bottom, *args)
        digest.append(bottom.bottom)
        for p in bottom.bottom.parameters():
            if p.grad is not None:
                digest[0].update(p.grad.detach().contiguous().numpy().tobytes())

    def counted(self, *args, **kwargs):
        result = norms(self, *args, **kwargs)
        taped[result is None] += 1
        return result

    embedding_dp.EmbeddingDP.passive_backward, per_sample.GhostTape.norms = passive_backward, counted


def _training(method: str, options: dict) -> dict:
    return {"partition": {"labeled": 200, "aux": 40}, "model": {"hidden": 64, "out_dim": 32},
            "finetune": {"epochs": 3, "batch_size": 32}, "method": {"name": method, "options": options},
            "defenses": [{"name": "embedding-dp", "strength": 0.5, "sweep": True}],
            "attack": {"name": "fi-decoder", "options": {"epochs": 2}}}


SSL = {"batch_size": 256, "projector_hidden": 64, "projector_dim": 32, "predictor_hidden": 16, "queue_size": 256,
       "global_iterations": 1}
TRAININGS = {"digits splitnn": _training("splitnn", {}), "digits fedhssl": _training("fedhssl", SSL),
             "digits cssl-simsiam": _training("cssl-simsiam", SSL)}


def _updates(build, shape: tuple, out_dim: int, *, steps: int = 12, n: int = 24) -> None:
    """DP-SGD updates and SGD steps of a built-in bottom on random rows, through the defense's own wrapper."""
    from vflpriv.config.schema import ModelConfig
    from vflpriv.data.base import PartySpec
    from vflpriv.defenses.embedding_dp import Counts, EmbeddingDP, EmbeddingDPOptions

    g = torch.Generator().manual_seed(0)
    spec = PartySpec(modality="image" if len(shape) == 3 else "tabular", shape=shape)
    bottom = build(spec, ModelConfig(hidden=32, out_dim=8), generator=torch.Generator().manual_seed(0))
    dp = EmbeddingDP(strength=0.5, party=1, phase="finetune", kinds=None, options=EmbeddingDPOptions(),
                     generator=torch.Generator().manual_seed(1))
    dp.released, dp.stepped = Counts(n), Counts(n)
    wrapped = dp.passive_bottom(1, bottom).train()
    optimizer = torch.optim.SGD([p for p in wrapped.parameters() if p.requires_grad], lr=0.5)
    for _ in range(steps):
        x, received = torch.rand(n, *shape, generator=g), torch.randn(n, out_dim, generator=g)
        dp.passive_backward(1, wrapped, x, wrapped(x), received, torch.arange(n))
        optimizer.step()
        optimizer.zero_grad()


def _towers(pooled: bool):
    def build(spec, config, *, generator):
        from vflpriv.methods.towers import PooledEncoder, build_local_encoder

        if not pooled:
            return build_local_encoder(spec, config, generator=generator)
        return PooledEncoder(*(build_local_encoder(spec, config, generator=generator) for _ in range(2)), "concat")
    return build


def hashes() -> None:
    from vflpriv.config.schema import RunConfig
    from vflpriv.models.encoders import build_encoder
    from vflpriv.runner.execution import run

    digest, taped = [None], [0, 0]
    _instrument(digest, taped)
    cases = {name: (lambda c=config: run(RunConfig.model_validate(c))) for name, config in TRAININGS.items()}
    cases |= {"CNN encoder (1 x 16 x 16)": lambda: _updates(build_encoder, (1, 16, 16), 8),
              "MLP encoder (64 features)": lambda: _updates(build_encoder, (64,), 8),
              "SSL tower (1 x 16 x 16)": lambda: _updates(_towers(False), (1, 16, 16), 8),
              "SSL pooled tower (concat, 64 features)": lambda: _updates(_towers(True), (64,), 16)}
    for name, case in cases.items():
        digest[:], taped[:] = [hashlib.sha256()], [0, 0]
        case()
        for p in digest[-1].parameters():  # the last bottom updated: its final parameters
            digest[0].update(p.detach().contiguous().numpy().tobytes())
        print(f"{name}: {taped[0]} updates taped, {taped[1]} by torch.func, sha256 {digest[0].hexdigest()[:32]}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, metavar="DIR", help="DIR's three files instead")
    parser.add_argument("--against", type=Path, metavar="DIR", help="this code and DIR's, each in a fresh process")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for tree in (args.code, args.against):
        if tree is not None and not (tree / "defenses" / "embedding_dp.py").is_file():
            parser.exit(2, f"error: {tree} holds no defenses/embedding_dp.py: give a checkout's root (a folder "
                           "from `git worktree add` or `git archive`), or this code would be compared with itself\n")
    if args.against is None:
        if args.code is not None:
            _load(args.code)
        hashes()
        return
    outputs = [subprocess.run([sys.executable, __file__, *extra], capture_output=True, text=True, check=True).stdout
               for extra in ([], ["--code", str(args.against)])]
    for mine, theirs in zip(*(o.splitlines() for o in outputs), strict=True):
        print(f"{'identical' if mine == theirs else 'DIFFERENT'}: {mine}" + ("" if mine == theirs else f" / {theirs}"))


if __name__ == "__main__":
    main()
