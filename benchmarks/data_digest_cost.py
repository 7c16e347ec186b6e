"""What naming a dataset's data costs against a load of it, on Fashion-MNIST's 70000 x 784 (CPU seconds of this
process, the three interleaved in each repeat: steadier than wall time on a shared machine): the digest of the files
its loader read (``vflpriv.data.load.files_digest``, what its cache keys and stored records hold) and the SHA-256 of
the loaded tensors (``VerticalDataset.digest``, what they hold for a loader that does not name its files).

    python benchmarks/data_digest_cost.py [--repeats 5] [--root DIR]

Without ``--root`` (or where it holds no Fashion-MNIST files) the four IDX files are written to a temporary folder
with the real files' shapes and synthetic pixels (smooth random blobs, so gzip compresses them as it does clothes),
so the loader parses, splits and converts exactly as much data as the real one; the digest does not depend on the
pixel values.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import statistics
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from vflpriv.data.benchmark import FASHION_FILES, load_fashion_mnist
from vflpriv.data.load import files_digest


def _idx(path: Path, array: np.ndarray) -> None:
    head = struct.pack(">BBBB", 0, 0, 8, array.ndim) + b"".join(struct.pack(">I", n) for n in array.shape)
    path.write_bytes(gzip.compress(head + array.astype(np.uint8).tobytes(), compresslevel=6))


def synthetic(folder: Path, seed: int = 0) -> Path:
    """Fashion-MNIST's four files with its shapes (60000 / 10000 images of 28 x 28, labels 0..9), blob pixels."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:28, :28]
    for images_file, labels_file, n in ((*FASHION_FILES[:2], 60000), (*FASHION_FILES[2:], 10000)):
        centres = rng.uniform(6, 22, size=(n, 2, 1, 1))
        width = rng.uniform(3, 9, size=(n, 1, 1))
        images = 255 * np.exp(-((yy - centres[:, 0]) ** 2 + (xx - centres[:, 1]) ** 2) / (2 * width ** 2))
        _idx(folder / images_file, images)
        _idx(folder / labels_file, rng.integers(0, 10, size=n))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--root", type=Path, default=None, help="a folder holding Fashion-MNIST's four files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        real = args.root is not None and (args.root / FASHION_FILES[0]).is_file()
        root = args.root if real else synthetic(Path(tmp))
        loads, digests, files = [], [], []
        for _ in range(args.repeats):
            start = time.process_time()
            dataset = load_fashion_mnist(parties=2, root=root)
            loads.append(time.process_time() - start)
            fresh = dataclasses.replace(dataset)  # the digest is computed once per dataset object: a new one
            start = time.process_time()
            fresh.digest
            digests.append(time.process_time() - start)
            start = time.process_time()
            files_digest(load_fashion_mnist.files_read(root))
            files.append(time.process_time() - start)
        size = sum(p.stat().st_size for p in load_fashion_mnist.files_read(root)) / 1e6
    n = sum(x.shape[0] for x in (dataset.x_train[0], dataset.x_test[0]))
    print(f"Fashion-MNIST ({'the files in ' + str(root) if real else 'synthetic files of its shapes'}: {size:.1f} MB), "
          f"2 parties, {n} images, {args.repeats} repeats, CPU seconds (median [min, max]):")
    for name, values in (("load", loads), ("files' digest", files), ("tensors' digest", digests)):
        print(f"  {name:16s} {statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]")
    for name, values in (("files' digest", files), ("tensors' digest", digests)):
        ratios = [d / ld for d, ld in zip(values, loads)]
        print(f"  {name} / load: {statistics.median(ratios):.3f} (median of the repeats' ratios; "
              f"[{min(ratios):.3f}, {max(ratios):.3f}])")


if __name__ == "__main__":
    main()
