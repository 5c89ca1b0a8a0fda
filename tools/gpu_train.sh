#!/usr/bin/env bash
# Train on a remote GPU machine in the background (setsid), so that training outlives the
# short commands that start it; later commands watch it and bring back what it wrote ($OUT:
# the folder whose files come back). Run from the repository root there.
#   bash tools/gpu_train.sh start DATASET MINUTES [train.py args]  # linear + softmax side by side
#   bash tools/gpu_train.sh watch SECONDS     # wait, print progress, bring the logs back
#   bash tools/gpu_train.sh finish DATASET [SECS]  # wait (at most SECS, default 560) for that
#                                      # dataset's runs, bring the models (or last snapshots) back
#   bash tools/gpu_train.sh stage [FOLDER]    # copy .data/ (or FOLDER) onto the machine's disk
#   bash tools/gpu_train.sh stop RUN          # end one run now (e.g. mnist.scratch), to free its GPU
#                                      # for another start; finish brings back its last snapshot
# Runs of both datasets can train at once: on a machine with two GPUs give each dataset its
# own (CUDA_VISIBLE_DEVICES=0 / 1 before start); on one GPU the four processes share it.
# Each run starts from INIT/NAME.bin (INIT defaults to models/) if it exists, a warm restart,
# else from scratch. The data travels in ignored folders beside the working tree and is copied
# onto the machine's disk (stage); a tree of at most 64 MiB travels, so the model files go in
# folders of their own (e.g. models/cifar*.bin in .stage4, models/mnist*.bin in .stage5, with
# INIT=.stage4 or INIT=.stage5 at start). CIFAR-10 fits in three such folders:
#   .stage1 (cifar-10/data_batch_{1,2}.bin.gz), .stage2 (3, 4), .stage3 (5 and test_batch)
# A run longer than one machine's loan: each start resumes from INIT/NAME.ckpt.pt if there is
# one (train.py --ckpt, saved at half precision: about 6 bytes a parameter, 38 MB for MNIST);
# CKPT=1 before finish brings the checkpoint back too (parts NAME.ckpt.pt.part*; one run's fit
# in what a command returns). --minutes counts the whole run: each start gives the minutes
# trained so far plus those to add; with --total-steps N it is each start's own, and every
# start is the same command (train.py --help). Resumes are bit for bit only from a full
# checkpoint: --ckpt-half, which this script passes, resumes to its rounding.
# MPS=1 before start shares the GPU through MPS: two MNIST runs 1,663 + 1,631 images/s against
# 3,090 for one alone (without MPS the runs take turns and lose about a third).
# NPROC=N before start trains each run data-parallel on N GPUs (torchrun; --batch is per GPU).
# ONLY=NAME before start trains just that model (e.g. ONLY=cifar); TAG=T names the runs NAME.T
# (e.g. mnist.b16), so that variants of one model train side by side, each on its own GPU
# with CUDA_VISIBLE_DEVICES. models/README.md has each shipped model's train.py arguments.
# Model files come back in parts of at most 15 MiB:
#   cat NAME.bin.part* > models/NAME.bin      (a tagged run's parts are NAME.TAG.bin.part*)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
RUN=/root/lingen-run
DATA=/root/lingen-data
# the models of a dataset; ONLY=NAME (e.g. ONLY=cifar) before start trains just that one.
# TAG=T before start names the runs NAME.T (e.g. mnist.b16), so that variants of one model can
# train side by side; finish brings back every run of the dataset's models.
names() { [ -n "${ONLY:-}" ] && echo $ONLY && return; [ "$1" = mnist ] && echo "mnist mnist-softmax" || echo "cifar cifar-softmax"; }
runs() { for name in $(names $1); do for d in $RUN/$name $RUN/$name.*; do [ -d $d ] && echo $d; done; done; }
# copy a data folder onto the machine's disk; a file already there is left alone and a new one
# is renamed into place, so that runs already reading the data never see a half-copied file
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
  if [ "${MPS:-0}" = 1 ]; then   # MPS: runs sharing the GPU run side by side instead of taking turns
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog; mkdir -p /tmp/mps /tmp/mpslog
    pgrep -f nvidia-cuda-mps-control > /dev/null || nvidia-cuda-mps-control -d
  fi
  for name in $(names $ds); do
    att=linear; [ ${name#*-} = softmax ] && att=softmax
    d=$RUN/$name${TAG:+.$TAG}; rm -rf $d; mkdir -p $d
    # the starting weights: models/NAME.bin of the working tree, or of the folder $INIT
    init=${INIT:-models}/$name.bin; [ -f $init ] && cp $init $d/init.bin
    [ -f ${INIT:-models}/$name.ckpt.pt ] && cp ${INIT:-models}/$name.ckpt.pt $d/ckpt.pt
    launch=python3; [ ${NPROC:-1} -gt 1 ] && launch="python3 -m torch.distributed.run --standalone --nproc_per_node=$NPROC"
    PYTHONUNBUFFERED=1 setsid nohup $launch scripts/train.py --dataset $ds --attention $att \
      --data $DATA --init $d/init.bin --export $d/$name.bin --snapshot $d/snapshot.bin \
      --ckpt $d/ckpt.pt --ckpt-half --log-file $d/log.jsonl --minutes $minutes --compile "$@" \
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
    [ "${CKPT:-0}" = 1 ] && [ -f $d/ckpt.pt ] && split -b 15M -d $d/ckpt.pt $OUT/$r.ckpt.pt.part
  done ;;
esac
for d in $RUN/*/; do [ -d "$d" ] || continue
  echo "== $(basename $d)"; grep -v '"step"' $d/stdout.txt | tail -n 3 | cut -c1-400; tail -n 1 $d/stdout.txt | cut -c1-300
done
[ -d $RUN ] && tar czf $OUT/logs.tgz -C $RUN $(cd $RUN && ls -d */log.jsonl */stdout.txt 2>/dev/null)
pgrep -fa scripts/train.py | grep -o 'attention [a-z]* --data [^ ]*\|export [^ ]*' | paste - - || echo "no training running"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
