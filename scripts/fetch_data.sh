#!/usr/bin/env bash
# Downloads the original data sets where there is internet access and checks their published
# MD5 checksums. Files land in DEST (default: data/ in the repository, which ampbench reads
# when ../shared/data is absent; or pass --data DEST/mnist to ampbench).
#   scripts/fetch_data.sh [--dest DIR] [mnist] [fashion-mnist] [cifar10]    (default: mnist)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/data"
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) dest=$2; shift 2 ;;
    mnist|fashion-mnist|cifar10) sets+=("$1"); shift ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
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
  esac
done
echo "data in $dest"
