#!/usr/bin/env bash
# Fetch MNIST and/or CIFAR-10 into data/ (the layout lingen reads), checking every file's sha256.
#
#   data/fetch.sh [--from DIR | --check] [mnist|cifar10|all] [DEST]
#
#   mnist|cifar10|all  what to fetch (default: mnist)
#   DEST               where to put it (default: the directory holding this script, i.e. data/)
#   --from DIR         copy from a local mirror with the same layout (DIR/mnist, DIR/cifar-10)
#                      instead of downloading; files may be plain or .gz there
#   --check            fetch nothing: exit 0 if every file is in DEST, else say in one line
#                      what is missing and how to get it, and exit 1
#
# Files that are already present and valid are skipped. A file whose checksum does not
# match is deleted and the script exits non-zero. See data/README.md.
set -euo pipefail

MNIST_URLS=(https://ossci-datasets.s3.amazonaws.com/mnist https://storage.googleapis.com/cvdf-datasets/mnist)
CIFAR_URL=https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
CIFAR_TAR_MD5=c32a1d4ab5d03f1284b67883e8d87530

# sha256 of the official MNIST .gz files (byte-identical to yann.lecun.com's) ...
declare -A SHA_GZ=(
  [train-images-idx3-ubyte]=440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609
  [train-labels-idx1-ubyte]=3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c
  [t10k-images-idx3-ubyte]=8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6
  [t10k-labels-idx1-ubyte]=f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6
)
# ... and of the uncompressed content of every file. A .gz file is accepted when either matches:
# gzip output differs between compressors, the content must not.
declare -A SHA_RAW=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
  [data_batch_1.bin]=cee916563c9f80d84e3cc88e17fdc0941787f1244f00a67874d45b261883ada5
  [data_batch_2.bin]=a591ca11fa1708a91ee40f54b3da4784ccd871ecf2137de63f51ada8b3fa57ed
  [data_batch_3.bin]=bbe8596564c0f86427f876058170b84dac6670ddf06d79402899d93ceea26f67
  [data_batch_4.bin]=014e562d6e23c72197cc727519169a60359f5eccd8945ad5a09d710285ff4e48
  [data_batch_5.bin]=755304fc0b379caeae8c14f0dac912fbc7d6cd469eb67a1029a08a39453a9add
  [test_batch.bin]=8e2eb146ae340b09e24670f29cabc6326dba54da8789dab6768acf480273f65b
)
MNIST_FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
CIFAR_FILES=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin)

die() { echo "fetch.sh: $*" >&2; exit 1; }
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

sha256() { if command -v sha256sum >/dev/null; then sha256sum | cut -c1-64; else shasum -a 256 | cut -c1-64; fi; }
md5() { if command -v md5sum >/dev/null; then md5sum "$1" | cut -c1-32; else md5 -q "$1"; fi; }

# valid NAME FILE: FILE (NAME or NAME.gz) holds the right bytes.
valid() {
  local name=$1 file=$2
  if [[ $file == *.gz && -n ${SHA_GZ[$name]:-} && $(sha256 <"$file") == "${SHA_GZ[$name]}" ]]; then return 0; fi
  [[ $(gzip -dcf "$file" | sha256) == "${SHA_RAW[$name]}" ]]   # -f: plain files pass through
}

# present DIR NAME: print DIR/NAME or DIR/NAME.gz, whichever exists (plain first, as lingen reads).
present() {
  if [[ -f $1/$2 ]]; then echo "$1/$2"; elif [[ -f $1/$2.gz ]]; then echo "$1/$2.gz"; fi
}

# have DIR NAME: NAME is in DIR and valid; a present but invalid copy is deleted.
have() {
  local f
  f=$(present "$1" "$2")
  [[ -n $f ]] || return 1
  if valid "$2" "$f"; then echo "ok       $f"; return 0; fi
  echo "bad checksum, fetching again: $f"
  rm -f "$f"
  return 1
}

# check NAME FILE: after fetching, FILE must be valid; otherwise delete it and fail.
check() {
  if valid "$1" "$2"; then echo "fetched  $2"; return 0; fi
  rm -f "$2"
  die "$2: sha256 mismatch (expected ${SHA_GZ[$1]:-${SHA_RAW[$1]}}${SHA_GZ[$1]:+ for the .gz}); deleted it"
}

# download URL FILE: through a .part file, so an interrupted download leaves nothing behind. On
# failure one line with the tool's last message (not a line per retry).
download() {
  echo "download $1"
  local err rc=0
  if command -v curl >/dev/null; then err=$(curl -fsSL --retry 2 --connect-timeout 20 -o "$2.part" "$1" 2>&1) || rc=$?
  elif command -v wget >/dev/null; then err=$(wget -q --tries=3 --timeout=20 -O "$2.part" "$1" 2>&1) || rc=$?
  else die "neither curl nor wget is installed"; fi
  if [[ $rc != 0 ]]; then
    rm -f "$2.part"
    echo "  failed: $(tail -1 <<<"${err:-exit status $rc}")" >&2
    return 1
  fi
  mv "$2.part" "$2"
}

# copy_from SUBDIR NAME: copy NAME or NAME.gz from the mirror, as it is there.
copy_from() {
  local src
  src=$(present "$FROM/$1" "$2")
  [[ -n $src ]] || die "$FROM/$1/$2: not found in the mirror (tried $2 and $2.gz)"
  local dst=$DEST/$1/${src##*/}
  cp "$src" "$dst.part" && chmod u+w "$dst.part" && mv "$dst.part" "$dst"
  check "$2" "$dst"
}

# What to do without the data (--check), and after a failed download.
HOW="set LINGEN_DATA=DIR to a directory holding mnist/ and cifar-10/, or get them with data/fetch.sh all (download) or data/fetch.sh --from DIR all (copy from a local mirror)"
HOW_LOCAL="copy them from a local mirror with data/fetch.sh --from DIR, or set LINGEN_DATA=DIR to a directory holding mnist/ and cifar-10/"

# Directories this run created, and its scratch directory: removed on exit if left empty
# (a failed fetch leaves no empty data/mnist/ behind).
MADE=() TMP=""
cleanup() {
  [[ -z $TMP ]] || rm -rf "$TMP"
  local i
  for ((i = ${#MADE[@]} - 1; i >= 0; i--)); do rmdir "${MADE[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
make_dir() {   # make_dir DIR: DEST, then DEST/sub, remembering what was new
  [[ -d $DEST ]] || { mkdir -p "$DEST"; MADE+=("$DEST"); }
  [[ -d $1 ]] || { mkdir "$1"; MADE+=("$1"); }
}

fetch_mnist() {
  make_dir "$DEST/mnist"
  local name
  for name in "${MNIST_FILES[@]}"; do
    have "$DEST/mnist" "$name" && continue
    if [[ -n $FROM ]]; then copy_from mnist "$name"; continue; fi
    local url ok=0
    for url in "${MNIST_URLS[@]}"; do
      if download "$url/$name.gz" "$DEST/mnist/$name.gz"; then ok=1; break; fi
    done
    [[ $ok == 1 ]] || die "$name.gz: every mirror failed; $HOW_LOCAL"
    check "$name" "$DEST/mnist/$name.gz"
  done
}

fetch_cifar() {
  make_dir "$DEST/cifar-10"
  local name missing=()
  for name in "${CIFAR_FILES[@]}"; do have "$DEST/cifar-10" "$name" || missing+=("$name"); done
  [[ ${#missing[@]} == 0 ]] && return 0
  if [[ -n $FROM ]]; then
    for name in "${missing[@]}"; do copy_from cifar-10 "$name"; done
    return 0
  fi
  # Upstream ships one archive; keep only the .bin files from it (lingen reads them as they are).
  TMP=$(mktemp -d "$DEST/cifar-10/.fetch.XXXXXX")
  local tmp=$TMP
  download "$CIFAR_URL" "$tmp/cifar-10-binary.tar.gz" || die "$CIFAR_URL: download failed; $HOW_LOCAL"
  [[ $(md5 "$tmp/cifar-10-binary.tar.gz") == "$CIFAR_TAR_MD5" ]] ||
    die "$CIFAR_URL: md5 mismatch (expected $CIFAR_TAR_MD5); deleted it"
  tar -xzf "$tmp/cifar-10-binary.tar.gz" -C "$tmp"
  for name in "${missing[@]}"; do
    mv "$tmp/cifar-10-batches-bin/$name" "$DEST/cifar-10/$name"
    check "$name" "$DEST/cifar-10/$name"
  done
  rm -rf "$tmp"
  TMP=""
}

# check_present: with --check, every file of WHAT in DEST (plain or .gz), else one line and exit 1.
check_present() {
  local sub names missing=() name
  for sub in "$@"; do
    if [[ $sub == mnist ]]; then names=("${MNIST_FILES[@]}"); else names=("${CIFAR_FILES[@]}"); fi
    local absent=()
    for name in "${names[@]}"; do [[ -n $(present "$DEST/$sub" "$name") ]] || absent+=("$name"); done
    if [[ ${#absent[@]} == "${#names[@]}" ]]; then missing+=("$sub/")
    elif [[ ${#absent[@]} -gt 0 ]]; then missing+=("${absent[@]/#/$sub/}"); fi
  done
  [[ ${#missing[@]} == 0 ]] && return 0
  echo "missing test data in $DEST: ${missing[*]}; $HOW" >&2
  exit 1
}

FROM="" DEST="" WHAT="" CHECK=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --check) CHECK=1; shift ;;
    --from) [[ $# -ge 2 ]] || die "--from needs a directory"; FROM=$2; shift 2 ;;
    --from=*) FROM=${1#--from=}; shift ;;
    -h|--help) usage ;;
    mnist|cifar10|all) [[ -z $WHAT ]] || die "give one of mnist, cifar10, all"; WHAT=$1; shift ;;
    -*) echo "fetch.sh: unknown option $1" >&2; usage 2 ;;
    *) [[ -z $DEST ]] || die "more than one destination: $DEST and $1"; DEST=$1; shift ;;
  esac
done
WHAT=${WHAT:-mnist}
DEST=${DEST:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
[[ -z $FROM || -d $FROM ]] || die "--from $FROM: no such directory"

if [[ $CHECK == 1 ]]; then
  case $WHAT in mnist) check_present mnist ;; cifar10) check_present cifar-10 ;; all) check_present mnist cifar-10 ;; esac
  exit 0
fi
case $WHAT in
  mnist) fetch_mnist ;;
  cifar10) fetch_cifar ;;
  all) fetch_mnist; fetch_cifar ;;
esac
echo "done: $WHAT in $DEST (use it with --data $DEST or LINGEN_DATA=$DEST)"
