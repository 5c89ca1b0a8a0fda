#!/usr/bin/env bash
# Train on the device machine in the background (setsid), so that training outlives one
# 10-minute device call; later calls watch it and bring back what it wrote.
#   bash scripts/gpu_train.sh start DATASET MINUTES   # start linear + softmax runs side by side
#   bash scripts/gpu_train.sh watch SECONDS           # wait, print progress, copy snapshots to $OUT
#   bash scripts/gpu_train.sh finish                  # wait for both runs to end, copy the models to $OUT
#   bash scripts/gpu_train.sh stage                   # copy the carried .data/ onto the machine's disk
# Data: the dataset folder(s) carried in .data/ (an ignored folder; see data/README.md).
# MNIST (12 MB) travels in one call. CIFAR-10 (six 28 MB files) does not fit in one call's
# 64 MiB: carry two files per call in three back-to-back calls that each run `stage` (the
# machine stays warm 30 s between calls), the last one `stage && start cifar10 ...`:
#   call 1: .data/cifar-10/{data_batch_1,data_batch_2}.bin.gz     stage
#   call 2: .data/cifar-10/{data_batch_3,data_batch_4}.bin.gz     stage
#   call 3: .data/cifar-10/{data_batch_5,test_batch}.bin.gz       stage && start cifar10 MIN
# (remove models/*.bin you do not need from the working tree first, and `git checkout models` after).
set -u
RUN=/root/lingen-run
DATA=/root/lingen-data
cmd=$1; shift
case $cmd in
stage)
  mkdir -p $DATA; cp -r .data/* $DATA/; ls -lR $DATA | grep -c '\.gz' ;;
start)
  ds=$1 minutes=$2; shift 2
  [ -d .data/mnist ] && { mkdir -p $DATA; cp -r .data/* $DATA/; }
  mkdir -p $RUN; rm -rf $RUN/*
  [ "$ds" = mnist ] && pre=mnist || pre=cifar
  for att in linear softmax; do
    name=$pre; [ $att = softmax ] && name=$pre-softmax
    mkdir -p $RUN/$name
    PYTHONUNBUFFERED=1 setsid nohup python3 scripts/train.py --dataset $ds --attention $att \
      --data $DATA --init models/$name.bin --export $RUN/$name/$name.bin --snapshot $RUN/$name/snapshot.bin \
      --ckpt $RUN/$name/ckpt.pt --log $RUN/$name/log.jsonl --minutes $minutes --compile "$@" \
      > $RUN/$name/stdout.txt 2>&1 < /dev/null &
  done
  sleep 5; nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv ;;
watch)
  secs=$1; end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do sleep 20; done ;;
finish)
  for i in $(seq 1 57); do pgrep -f scripts/train.py > /dev/null || break; sleep 10; done ;;
esac
for d in $RUN/*/; do [ -d "$d" ] || continue
  n=$(basename $d); echo "== $n"; tail -n 4 $d/stdout.txt | cut -c1-400
  for f in $d/*.bin $d/log.jsonl; do [ -f $f ] && cp $f $OUT/$n-$(basename $f); done
done
pgrep -f scripts/train.py > /dev/null && echo "training still running" || echo "no training running"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
