#!/usr/bin/env bash
# Train on the device machine in the background (setsid), so that training outlives one
# 10-minute device call; later calls watch it and bring back what it wrote.
#   bash scripts/gpu_train.sh start DATASET MINUTES [train.py args]  # linear + softmax side by side
#   bash scripts/gpu_train.sh watch SECONDS     # wait, print progress, bring the logs back
#   bash scripts/gpu_train.sh finish DATASET [SECS]  # wait (at most SECS, default 560) for that
#                                      # dataset's runs, bring the models (or last snapshots) back
#   bash scripts/gpu_train.sh stage [FOLDER]    # copy the carried .data/ (or FOLDER) onto the machine's disk
#   bash scripts/gpu_train.sh stop RUN          # end one run now (e.g. mnist.scratch), to free its GPU
#                                      # for another start in the same call; finish brings back
#                                      # its last snapshot
# Runs of both datasets can train at once: on a machine with two GPUs give each dataset its
# own (CUDA_VISIBLE_DEVICES=0 / 1 before start); on one GPU the four processes share it.
# Each run starts from INIT/NAME.bin (INIT defaults to models/) if it exists, a warm restart,
# else from scratch. Data: carried in ignored folders, copied onto the machine's disk.
# Every call carries the working tree (64 MiB at most), so move models/*.bin (76 MB) out of it
# for the session: models/cifar*.bin into .stage4, models/mnist*.bin into .stage5, then
# rm models/*.bin (and `git checkout -- models/*.bin` after: not the whole folder, which would
# also drop edits to models/README.md). The calls, back to back (the machine is given back
# after 30 s idle); models/README.md has the arguments of the last session:
#   carry .stage1 (cifar-10/data_batch_{1,2}.bin.gz)   stage .stage1
#   carry .stage2 (cifar-10/data_batch_{3,4}.bin.gz)   stage .stage2
#   carry .stage3 (cifar-10/{data_batch_5,test_batch}.bin.gz)   stage .stage3
#   carry .stage4                INIT=.stage4 [CUDA_VISIBLE_DEVICES=1] ... start cifar10 MIN ...
#   carry .stage5 .data (mnist)  INIT=.stage5 [CUDA_VISIBLE_DEVICES=0] ... start mnist MIN ...
#   watch SECONDS, again and again; then finish mnist SECS, finish cifar10 SECS
# (CUDA_VISIBLE_DEVICES only on a machine with several GPUs, one per start: with ONLY and TAG
# below, four H200s ran four MNIST variants in session 6; from session 4 on the linear runs add
# --mixed-attention, as fast as softmax.)
# Model files come back in parts of at most 15 MiB (the device's limit per file is 16 MiB):
#   cat NAME.bin.part* > models/NAME.bin      (a tagged run's parts are NAME.TAG.bin.part*)
set -u
RUN=/root/lingen-run
DATA=/root/lingen-data
# the models of a dataset; ONLY=NAME (e.g. ONLY=cifar) before start trains just that one.
# TAG=T before start names the runs NAME.T (e.g. mnist.b16), so that variants of one model can
# train side by side; finish brings back every run of the dataset's models.
names() { [ -n "${ONLY:-}" ] && echo $ONLY && return; [ "$1" = mnist ] && echo "mnist mnist-softmax" || echo "cifar cifar-softmax"; }
runs() { for name in $(names $1); do for d in $RUN/$name $RUN/$name.*; do [ -d $d ] && echo $d; done; done; }
# copy a carried data folder onto the machine's disk; a file already there is left alone and a
# new one is renamed into place, so that runs already reading the data never see a half-copied
# file (session 7 lost a run to that, when a later start copied over the files)
stage_data() {
  (cd $1 && find . -type f) | while read -r f; do
    cmp -s $1/$f $DATA/$f && continue
    mkdir -p $(dirname $DATA/$f); cp $1/$f $DATA/$f.tmp && mv $DATA/$f.tmp $DATA/$f
  done
}
cmd=$1; shift
case $cmd in
stage)  # [FOLDER], default .data
  stage_data ${1:-.data}; find $DATA -name '*.gz' | sort ;;
start)
  ds=$1 minutes=$2; shift 2
  [ -d .data ] && stage_data .data
  for name in $(names $ds); do
    att=linear; [ ${name#*-} = softmax ] && att=softmax
    d=$RUN/$name${TAG:+.$TAG}; rm -rf $d; mkdir -p $d
    # the starting weights: models/NAME.bin of this call's tree, or of a carried folder $INIT
    init=${INIT:-models}/$name.bin; [ -f $init ] && cp $init $d/init.bin
    PYTHONUNBUFFERED=1 setsid nohup python3 scripts/train.py --dataset $ds --attention $att \
      --data $DATA --init $d/init.bin --export $d/$name.bin --snapshot $d/snapshot.bin \
      --ckpt $d/ckpt.pt --log $d/log.jsonl --minutes $minutes --compile "$@" \
      > $d/stdout.txt 2>&1 < /dev/null &
  done
  sleep 5; nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv ;;
watch)
  secs=$1; end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do sleep 20; done ;;
stop)
  pkill -f "export $RUN/$1/" && sleep 5 ;;
finish)
  ds=$1 end=$((SECONDS + ${2:-560}))
  while [ $SECONDS -lt $end ]; do
    busy=0; for d in $(runs $ds); do pgrep -f "export $d/" > /dev/null && busy=1; done
    [ $busy = 0 ] && break; sleep 10
  done
  for d in $(runs $ds); do  # the final model, or the last snapshot if the run did not end
    r=$(basename $d); f=$d/${r%%.*}.bin; [ -f $f ] || f=$d/snapshot.bin
    [ -f $f ] && split -b 15M -d $f $OUT/$r.bin.part
  done ;;
esac
for d in $RUN/*/; do [ -d "$d" ] || continue
  echo "== $(basename $d)"; grep -v '"step"' $d/stdout.txt | tail -n 3 | cut -c1-400; tail -n 1 $d/stdout.txt | cut -c1-300
done
[ -d $RUN ] && tar czf $OUT/logs.tgz -C $RUN $(cd $RUN && ls -d */log.jsonl */stdout.txt 2>/dev/null)
pgrep -fa scripts/train.py | grep -o 'attention [a-z]* --data [^ ]*\|export [^ ]*' | paste - - || echo "no training running"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
