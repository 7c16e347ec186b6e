#!/bin/bash
# Device checks of this session: tests/core/test_device.py, ResSFL at full scale (3 seeds, one process each),
# fedhssl_full_scale.py on fashion-mnist seed 0; everything tarred into $OUT before the call's limit.
LIMIT=${LIMIT:-500}; DEV=${DEV:-cuda}; W=/tmp/w; mkdir -p $W
python3 -m pip install -q --no-index --no-deps --target /tmp/site .devcarry/wheels/*.whl > $W/install.log 2>&1
export PYTHONPATH=/tmp/site VFLPRIV_DATA=$PWD/.devcarry/data OMP_NUM_THREADS=2
{ date -u; nvidia-smi -L; nproc; python3 -V; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"; } > $W/env.txt 2>&1
for s in ${RESSFL_SEEDS:-0 1 2}; do
  ( SECONDS=0; timeout $LIMIT python3 -P benchmarks/feature_defense_claims.py ressfl --scale ${SCALE:-full} \
      --device $DEV --seeds $s --out $W/ressfl-$s > $W/ressfl-$s.log 2>&1; echo "rc $? in $SECONDS s" >> $W/ressfl-$s.log ) &
done
( SECONDS=0; timeout $LIMIT python3 -P benchmarks/fedhssl_full_scale.py --device $DEV --datasets fashion-mnist --seeds 0 \
    --jobs ${JOBS:-5} ${FH_ARGS:-} --out $W/fh --record $W/fedhssl_full_scale.md > $W/fedhssl.log 2>&1; echo "rc $? in $SECONDS s" >> $W/fedhssl.log ) &
timeout $LIMIT python3 -P -m pytest -q -n ${NTEST:-3} -p no:cacheprovider tests/core/test_device.py tests/ssl/test_ssl_queue.py \
    > $W/test_device.log 2>&1
echo "tests rc $?" >> $W/test_device.log
wait
tail -n 3 $W/*.log
tar czf $OUT/device.tar.gz -C $W . && ls -la $OUT
