#!/usr/bin/env bash
# Train on the device machine in the background (setsid), so that training outlives one
# 10-minute device call; later calls watch it and bring back what it wrote.
#   bash scripts/gpu_train.sh start DATASET MINUTES [train.py args]  # linear + softmax side by side
#   bash scripts/gpu_train.sh watch SECONDS     # wait, print progress, bring the logs back
#   bash scripts/gpu_train.sh finish DATASET [SECS]  # wait (at most SECS, default 560) for that
#                                      # dataset's runs, bring the models (or last snapshots) back
#   bash scripts/gpu_train.sh stage [FOLDER]    # copy the carried .data/ (or FOLDER) onto the machine's disk
# Runs of both datasets can train at once (four processes share the GPU; on a machine with two
# GPUs give each dataset its own: CUDA_VISIBLE_DEVICES=1 bash scripts/gpu_train.sh start ...). Each run starts from
# the shipped models/NAME.bin if it exists (a warm restart), else from scratch.
# Data: the dataset folder(s) carried in .data/ (an ignored folder; see data/README.md).
# MNIST (12 MB) travels in one call with `start mnist`. CIFAR-10 (six 28 MB files) does not fit
# in one call's 64 MiB: carry two files per call in three back-to-back calls that each run
# `stage` (the machine stays warm 30 s between calls), the last one `stage && start cifar10 ...`:
#   call 1: .data/cifar-10/{data_batch_1,data_batch_2}.bin.gz     stage
#   call 2: .data/cifar-10/{data_batch_3,data_batch_4}.bin.gz     stage
#   call 3: .data/cifar-10/{data_batch_5,test_batch}.bin.gz       stage && start cifar10 MIN
# (remove models/*.bin from the working tree for these calls, `git checkout models` after; a
# warm restart of CIFAR-10 needs one more call that carries the two CIFAR-10 model files, e.g.
# in an ignored folder .stage4, and runs INIT=.stage4 bash scripts/gpu_train.sh start cifar10 ...).
# Model files come back in parts of at most 15 MiB (the device's limit per file is 16 MiB):
#   cat NAME.bin.part* > models/NAME.bin
set -u
RUN=/root/lingen-run
DATA=/root/lingen-data
names() { [ "$1" = mnist ] && echo "mnist mnist-softmax" || echo "cifar cifar-softmax"; }
cmd=$1; shift
case $cmd in
stage)  # [FOLDER], default .data
  mkdir -p $DATA; cp -r ${1:-.data}/* $DATA/; find $DATA -name '*.gz' | sort ;;
start)
  ds=$1 minutes=$2; shift 2
  [ -d .data ] && { mkdir -p $DATA; cp -r .data/* $DATA/; }
  for name in $(names $ds); do
    att=linear; [ ${name#*-} = softmax ] && att=softmax
    rm -rf $RUN/$name; mkdir -p $RUN/$name
    # the starting weights: models/NAME.bin of this call's tree, or of a carried folder $INIT
    init=${INIT:-models}/$name.bin; [ -f $init ] && cp $init $RUN/$name/init.bin
    PYTHONUNBUFFERED=1 setsid nohup python3 scripts/train.py --dataset $ds --attention $att \
      --data $DATA --init $RUN/$name/init.bin --export $RUN/$name/$name.bin --snapshot $RUN/$name/snapshot.bin \
      --ckpt $RUN/$name/ckpt.pt --log $RUN/$name/log.jsonl --minutes $minutes --compile "$@" \
      > $RUN/$name/stdout.txt 2>&1 < /dev/null &
  done
  sleep 5; nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv ;;
watch)
  secs=$1; end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do sleep 20; done ;;
finish)
  ds=$1 end=$((SECONDS + ${2:-560}))
  while [ $SECONDS -lt $end ]; do
    busy=0; for name in $(names $ds); do pgrep -f "export $RUN/$name/" > /dev/null && busy=1; done
    [ $busy = 0 ] && break; sleep 10
  done
  for name in $(names $ds); do  # the final model, or the last snapshot if the run did not end
    f=$RUN/$name/$name.bin; [ -f $f ] || f=$RUN/$name/snapshot.bin
    [ -f $f ] && split -b 15M -d $f $OUT/$name.bin.part
  done ;;
esac
for d in $RUN/*/; do [ -d "$d" ] || continue
  echo "== $(basename $d)"; grep -v '"step"' $d/stdout.txt | tail -n 3 | cut -c1-400; tail -n 1 $d/stdout.txt | cut -c1-300
done
[ -d $RUN ] && tar czf $OUT/logs.tgz -C $RUN $(cd $RUN && ls -d */log.jsonl */stdout.txt 2>/dev/null)
pgrep -fa scripts/train.py | grep -o 'attention [a-z]* --data [^ ]*\|export [^ ]*' | paste - - || echo "no training running"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
