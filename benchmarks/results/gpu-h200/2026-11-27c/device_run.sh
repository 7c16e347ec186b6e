#!/bin/bash
# Device checks, third loan: tests first (alone), then fedhssl_full_scale.py alone (8 runs of seed 0 at once).
W=/tmp/w; mkdir -p $W
python3 -m pip install -q --no-index --no-deps --target /tmp/site .devcarry/wheels/*.whl > $W/install.log 2>&1
export PYTHONPATH=/tmp/site VFLPRIV_DATA=$PWD/.devcarry/data OMP_NUM_THREADS=2
{ date -u; nvidia-smi -L; nproc --all; python3 -V; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"; } > $W/env.txt 2>&1
SECONDS=0; timeout 100 python3 -P -m pytest -q -n 4 -p no:cacheprovider tests/core/test_device.py tests/ssl/test_ssl_queue.py \
    > $W/test_device.log 2>&1; echo "tests rc $? in $SECONDS s" >> $W/test_device.log
SECONDS=0; timeout ${LIMIT:-440} python3 -P benchmarks/fedhssl_full_scale.py --device cuda --datasets fashion-mnist --seeds 0 \
    --jobs 8 --out $W/fh --record $W/fedhssl_full_scale.md > $W/fedhssl.log 2>&1; echo "rc $? in $SECONDS s" >> $W/fedhssl.log
tail -n 3 $W/*.log; date -u
tar czf $OUT/device.tar.gz -C $W . && ls -la $OUT
