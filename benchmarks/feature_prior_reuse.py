"""What the feature prior's check before a reuse costs (issue h46's review): h46's SHA-256 digest of every guess against
the SHA-1 digest checked now (``runner.feature_prior.feature_prior``; the version counters checked before it were a
private torch attribute and missed writes through ``.data``), on 369 MB of CIFAR-sized guesses (3 candidates
x 10,000 targets x 3x32x32, float32), interleaved; CPU seconds (``time.process_time``).

    python benchmarks/feature_prior_reuse.py
"""

from __future__ import annotations

import hashlib
import time

import torch

from vflpriv.runner.feature_prior import FeaturePrior, _digest


def digest_of(key: str, prior: FeaturePrior) -> str:
    """h46's check, verbatim."""
    digest = hashlib.sha256(f"{key}:{prior.chosen}:{prior.penalty!r}".encode())
    for kind in sorted(prior.guesses):
        for name in sorted(prior.guesses[kind]):
            t = prior.guesses[kind][name].detach().cpu().contiguous()
            digest.update(f"{kind}:{name}:{tuple(t.shape)}".encode())
            digest.update(t.numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    g = torch.Generator().manual_seed(0)
    # 3 kinds x (train 5000 + test 5000) CIFAR-sized guesses, float32: 3*10000*3072*4 = 369 MB
    p = FeaturePrior("regressor", {k: {s: torch.rand(5000, 3, 32, 32, generator=g) for s in ("train", "test")}
                                   for k in ("mean", "regressor", "random")})
    for _ in range(2):
        for name, check in (("digest (h46)", lambda: digest_of("k", p)), ("digest (now)", lambda: _digest(p))):
            start = time.process_time()
            check()
            print(f"{name:15s} {time.process_time() - start:.4f} CPU s")


if __name__ == "__main__":
    main()
