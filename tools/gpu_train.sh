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
# A run longer than one machine's loan: each start resumes from INIT/RUN.ckpt.pt (RUN: NAME or
# NAME.TAG), whole or in the parts RUN.ckpt.pt.part* that finish brings back, if there is one
# (train.py --ckpt --ckpt-half: 8 bytes a parameter, 48.6 MiB for MNIST; CIFAR-10's 97 MiB fit
# no call). CKPT=1 before finish brings one run's checkpoint back too, with its model file 61 of
# the 64 MiB a call returns (ONLY=NAME picks the run). --minutes counts the whole run: each
# start gives the minutes trained so far plus those to add; with --total-steps N it is each
# start's own, and every start is the same command (train.py --help). Pass --ckpt-every K too:
# resumes are then bit for bit (train.py rounds its state to the half checkpoint's at every
# K-th step, and a stretch out of its minutes trains on to the next, up to K steps more); without
# it a resume continues from the checkpoint's rounding. SCRATCH=1 before start: no --init.
# A run from scratch in stretches: the same calls each stretch, one model a machine, its
# checkpoint in a folder that .git/info/exclude ignores (here .ckpt/, empty at first), the MNIST
# files in .data/mnist. 937,500 steps are the paper's 250 epochs at batch 16; a stretch of 22
# minutes stops within 2,500 steps of them (about 15 s at models/README.md's speeds). MNIST linear:
#   1. carry .data:  bash tools/gpu_train.sh stage
#   2. carry .ckpt:  INIT=.ckpt SCRATCH=1 ONLY=mnist bash tools/gpu_train.sh start mnist 22 \
#        --total-steps 937500 --ckpt-every 2500 --optimizer radam --clip-mode per-tensor \
#        --lr 1e-4 --batch 16 --warmup 0 --decay 0.2 --dropout 0.1 --ema 0.999 \
#        --mixed-attention --compile-mode reduce-overhead
#   3. bash tools/gpu_train.sh watch 540, twice
#   4. ONLY=mnist CKPT=1 bash tools/gpu_train.sh finish mnist 560
#   5. here, once the parts came back: rm .ckpt/mnist.ckpt.pt*; cp FILES_AT/mnist.ckpt.pt.part* .ckpt/
# until a stretch logs "final": then mnist.bin.part00 holds the model. MNIST softmax: ONLY=
# mnist-softmax in 2, 4 and 5 (.ckpt/mnist-softmax.ckpt.pt*), and in 2 --attn-dropout 0.1
# added, --mixed-attention left out. AdamW: --optimizer adamw --clip-mode global --warmup 500.
# MPS=1 before start shares the GPU through MPS: two MNIST runs 1,663 + 1,631 images/s against
# 3,090 for one alone (without MPS the runs take turns and lose about a third).
# Both MNIST models from scratch at once, one GPU, in stretches: one start with the same
# arguments for both (--mixed-attention changes only the linear model, --attn-dropout only the
# softmax one). A checkpoint (48.6 MiB) travels in a call of its own, from .ckpt/NAME/ here
# (empty at first), and waits on the machine's disk (stage) for start:
#   1. carry .data, .ckpt/mnist:  bash tools/gpu_train.sh stage; bash tools/gpu_train.sh stage .ckpt/mnist
#   2. carry .ckpt/mnist-softmax: bash tools/gpu_train.sh stage .ckpt/mnist-softmax;
#      INIT=/root/lingen-data SCRATCH=1 MPS=1 bash tools/gpu_train.sh start mnist 20 \
#        --total-steps 234375 --ckpt-every 2500 --optimizer radam --clip-mode per-tensor --lr 5e-4 \
#        --batch 64 --warmup 0 --decay 0.2 --dropout 0.1 --attn-dropout 0.1 --ema 0.999 \
#        --mixed-attention --compile-mode reduce-overhead
#   3. keep the machine busy (watch, or other work) until the stretch ends
#   4. ONLY=mnist CKPT=1 bash tools/gpu_train.sh finish mnist 560, then the same with
#      ONLY=mnist-softmax (each call brings one run's checkpoint parts and model file)
#   5. here: each NAME's parts into .ckpt/NAME/ (replacing the old ones), and a copy kept
#      outside the repository (/var/tmp/lingen-train/NAME/)
# 234,375 steps of 64 are the paper's 250 epochs (15M images).
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
    r=$name${TAG:+.$TAG} src=${INIT:-models}; d=$RUN/$r; rm -rf $d; mkdir -p $d
    # the starting weights, unless SCRATCH=1: models/NAME.bin of the working tree, or of the folder $INIT
    init=""; if [ "${SCRATCH:-0}" != 1 ]; then
      init="--init $d/init.bin"; [ -f $src/$name.bin ] && cp $src/$name.bin $d/init.bin
    fi
    # the checkpoint to resume from: $INIT/RUN.ckpt.pt, whole or in the parts that finish brings back
    if [ -f $src/$r.ckpt.pt ]; then cp $src/$r.ckpt.pt $d/ckpt.pt
    elif ls $src/$r.ckpt.pt.part* > /dev/null 2>&1; then cat $src/$r.ckpt.pt.part* > $d/ckpt.pt; fi
    from="no checkpoint, step 0"; [ -f $d/ckpt.pt ] && from="resumes from $src/$r.ckpt.pt"
    echo "$r: $from${init:+, init $src/$name.bin$([ -f $d/init.bin ] || echo ": none, new weights")}"
    launch=python3; [ ${NPROC:-1} -gt 1 ] && launch="python3 -m torch.distributed.run --standalone --nproc_per_node=$NPROC"
    PYTHONUNBUFFERED=1 setsid nohup $launch scripts/train.py --dataset $ds --attention $att \
      --data $DATA $init --export $d/$name.bin --snapshot $d/snapshot.bin \
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
  took=""
  for d in $(runs $ds); do  # the final model, or the last snapshot if the run did not end
    r=$(basename $d); f=$d/${r%%.*}.bin; [ -f $f ] || f=$d/snapshot.bin
    if [ "${CKPT:-0}" = 1 ]; then   # one run a call: an MNIST checkpoint and model file fill 61 of 64 MiB
      [ -n "$took" ] && echo "$r: left on the machine (CKPT=1: one run a call): ONLY=${r%%.*} CKPT=1 finish $ds" && continue
      took=$r; [ -f $d/ckpt.pt ] && split -b 15M -d $d/ckpt.pt $OUT/$r.ckpt.pt.part
    fi
    [ -f $f ] && split -b 15M -d $f $OUT/$r.bin.part
  done ;;
esac
for d in $RUN/*/; do [ -d "$d" ] || continue
  echo "== $(basename $d)"; grep -v '"step"' $d/stdout.txt | tail -n 3 | cut -c1-400; tail -n 1 $d/stdout.txt | cut -c1-300
done
[ -d $RUN ] && tar czf $OUT/logs.tgz -C $RUN $(cd $RUN && ls -d */log.jsonl */stdout.txt 2>/dev/null)
pgrep -fa scripts/train.py | grep -o 'attention [a-z]* --data [^ ]*\|export [^ ]*' | paste - - || echo "no training running"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
if [ -n "${OUT:-}" ]; then   # what comes back: at most 8 files of 16 MiB, 64 MiB in all
  find $OUT -type f -printf '%s\n' | awk '{n++; s += $1} END {
    printf "%d files, %.1f MiB to bring back%s\n", n, s / 2^20, (n > 8 || s > 2^26) ? ": TOO MUCH, some will not come" : "" }'
fi
