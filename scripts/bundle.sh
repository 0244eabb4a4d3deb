#!/usr/bin/env bash
# Builds ampbench with the CUDA backend here and packs a self-contained bundle for a GPU machine
# that has no cJSON, OpenBLAS or MPI and cannot install packages:
#   bin/       wrappers that find the libraries, then run the real programs in libexec/
#   libexec/   ampbench and the GPU test programs
#   lib/       every shared library they need except glibc's and the CUDA family's
#   env.sh     sets LD_LIBRARY_PATH: lib/, then the machine's own CUDA/cuBLAS/cuDNN/NCCL
#              (PyTorch's nvidia/*/lib wheels, found through python3, else a CUDA toolkit)
#   data/mnist, data/cifar10 (the first AB_CIFAR_TRAIN training and AB_CIFAR_TEST test records:
#   a subset keeps the bundle small), data/glue/SST-2 (the first AB_SST2_TRAIN training rows and
#   the dev set) and data/bert-base-uncased/vocab.txt, peers/ (the peers),
#   scripts/gpu_check.sh and scripts/gpu_remote.sh (the check, and its one-command wrapper for a
#   remote job runner: docs/gpu.md), docs/gpu.md, MANIFEST
# The programs are built for Hopper (sm_90) alone by default, without RPATH (the wrappers set the
# library path), stripped; NCCL and MPI are linked only into the programs that use them (ampbench,
# test_comm, and the training tests through the platform layer), so the op tests start without them.
# The tarball is xz-compressed (OpenBLAS's 36 MB of kernels pack to 4 MB; gzip leaves 11).
# Size budget: a remote job runner carries the tarball and the repository's tree together (64 MiB
# at most on the lent machines); the script fails with one line when the tarball plus the tree that
# travels (tracked and untracked-not-ignored files) exceeds AB_BUNDLE_BUDGET_MIB (56: 8 MiB kept for
# growth), and writes both sizes to OUT_DIR.size.txt.
# Usage: scripts/bundle.sh [OUT_DIR]    (default dist/ampbench-gpu; also OUT_DIR.tar.xz)
# Environment: AB_BUNDLE_BUILD (build folder, default build-bundle), AB_MNIST_DIR and
#              AB_CIFAR10_DIR (data to carry), AB_CIFAR_TRAIN (default 4096), AB_CIFAR_TEST
#              (default 1024), AB_GLUE_DIR (holding SST-2/), AB_SST2_TRAIN (default 4096),
#              CUDA_ARCHS (default 90: H100/H200; e.g. "80;90" adds the A100),
#              AB_BUNDLE_BUDGET_MIB (default 56; 0: no check).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$here/dist/ampbench-gpu}
build=${AB_BUNDLE_BUILD:-$here/build-bundle}
archs=${CUDA_ARCHS:-90}
budget_mib=${AB_BUNDLE_BUDGET_MIB:-56}
mnist=${AB_MNIST_DIR:-$here/../shared/data/mnist}
cifar=${AB_CIFAR10_DIR:-$here/../shared/data/cifar10}
cifar_train=${AB_CIFAR_TRAIN:-4096} cifar_test=${AB_CIFAR_TEST:-1024}
glue=${AB_GLUE_DIR:-$here/../shared/data/glue} vocab=${AB_VOCAB:-$here/../shared/data/bert-base-uncased/vocab.txt}
sst2_train=${AB_SST2_TRAIN:-4096}

die() { echo "bundle.sh: $*" >&2; exit 1; }

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc here: the bundle needs the CUDA toolkit to build"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -f "$mnist/$f.gz" ] || [ -f "$mnist/$f" ] || die "$mnist/$f(.gz): missing (set AB_MNIST_DIR)"
done
for f in data_batch_1.bin test_batch.bin; do [ -f "$cifar/$f" ] || die "$cifar/$f: missing (set AB_CIFAR10_DIR)"; done
for f in train.tsv dev.tsv; do [ -f "$glue/SST-2/$f" ] || die "$glue/SST-2/$f: missing (set AB_GLUE_DIR)"; done
[ -f "$vocab" ] || die "$vocab: missing (set AB_VOCAB to BERT's vocab.txt)"

echo "bundle.sh: building in $build (CUDA architectures $archs)"
mkdir -p "$build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAB_WITH_CUDA=ON -DAB_WITH_DNNL=OFF "-DCMAKE_CUDA_ARCHITECTURES=$archs" \
    -DCMAKE_SKIP_RPATH=ON >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; die "configure failed"; }
grep -q "CUDA backend ON" "$build/configure.log" || die "configure did not enable the CUDA backend (see $build/configure.log)"
grep -q "NCCL engine ON" "$build/configure.log" || die "configure did not find NCCL (nccl.h, libnccl): the check's NCCL step needs it"
cmake --build "$build" -j "$(nproc)" --target ampbench test_backend_ops test_cuda_train test_cuda_step \
    test_comm >"$build/build.log" 2>&1 ||
    { tail -40 "$build/build.log" >&2; die "build failed"; }

progs=("$build/ampbench" "$build/tests/ops/test_backend_ops" "$build/tests/gpu/test_cuda_train"
       "$build/tests/gpu/test_cuda_step" "$build/tests/dp/test_comm")
for p in "${progs[@]}"; do [ -x "$p" ] || die "$p was not built"; done

rm -rf "$out"
mkdir -p "$out"/{bin,libexec,lib,data/mnist,data/cifar10,data/glue/SST-2,data/bert-base-uncased,peers,scripts,docs,results}

# Libraries the machine provides itself: glibc (and the loader), the C++ runtime that any
# machine with PyTorch has, and the CUDA family, which must match the machine's driver.
system_lib() {
    case "$1" in
    linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | \
        libutil.so* | libstdc++.so* | libgcc_s.so*) return 0 ;;
    libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libcudnn*.so* | libnccl.so* | libnvrtc*.so* | \
        libnvJitLink.so* | libcufft*.so* | libcurand.so* | libcusparse*.so* | libcusolver*.so* | libnvidia-*.so*) return 0 ;;
    esac
    return 1
}

manifest_libs=()
cuda_needed=()
for p in "${progs[@]}"; do
    cp "$p" "$out/libexec/"
    strip --strip-unneeded "$out/libexec/$(basename "$p")"
    if readelf -d "$out/libexec/$(basename "$p")" | grep -qE 'R(UN)?PATH'; then die "$p keeps an RPATH/RUNPATH"; fi
    while read -r name arrow path _; do
        [ "$arrow" = "=>" ] || continue
        if system_lib "$name"; then
            case "$name" in libcu* | libnccl* | libnv*) cuda_needed+=("$name") ;; esac
            continue
        fi
        [ -f "$path" ] || die "$p needs $name, which ldd cannot find here"
        if [ ! -f "$out/lib/$name" ]; then
            cp -L "$path" "$out/lib/$name"
            chmod u+w "$out/lib/$name"
            strip --strip-unneeded "$out/lib/$name" 2>/dev/null || true
            manifest_libs+=("$name <- $path")
        fi
    done < <(ldd "$p")
done
mapfile -t cuda_needed < <(printf '%s\n' "${cuda_needed[@]}" | sort -u)

cat >"$out/env.sh" <<'EOF'
# Sourced by the wrappers in bin/: the bundle's libraries first, then the machine's own CUDA
# libraries. Set AB_CUDA_LIB_DIRS (colon-separated) to choose them yourself.
AB_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ab_cuda_dirs() {
    if [ -n "${AB_CUDA_LIB_DIRS:-}" ]; then echo "$AB_CUDA_LIB_DIRS"; return; fi
    local dirs="" d py
    # PyTorch's CUDA wheels (nvidia is a namespace package: nvidia/<lib>/lib, nvidia/cu13/lib)
    for py in python3 /opt/torch/.venv/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        d=$("$py" -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for r in nvidia.__path__ for p in glob.glob(os.path.join(r, "*", "lib", "lib*.so*"))})))' 2>/dev/null) || d=""
        if [ -n "$d" ]; then dirs=$d; break; fi
    done
    if [ -z "$dirs" ]; then
        for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do [ -d "$d" ] && dirs=$dirs${dirs:+:}$d; done
    fi
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
        [ -d "$d" ] && dirs=$dirs${dirs:+:}$d
    done
    echo "$dirs"
}
export LD_LIBRARY_PATH="$AB_BUNDLE/lib:$(ab_cuda_dirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AB_MNIST_DIR="${AB_MNIST_DIR:-$AB_BUNDLE/data/mnist}"
export AB_CIFAR10_DIR="${AB_CIFAR10_DIR:-$AB_BUNDLE/data/cifar10}"
export AB_GLUE_DIR="${AB_GLUE_DIR:-$AB_BUNDLE/data/glue}"
export AB_VOCAB="${AB_VOCAB:-$AB_BUNDLE/data/bert-base-uncased/vocab.txt}"
EOF

for p in "${progs[@]}"; do
    n=$(basename "$p")
    cat >"$out/bin/$n" <<EOF
#!/usr/bin/env bash
# runs libexec/$n with the bundle's libraries and the machine's CUDA libraries
. "\$(dirname "\${BASH_SOURCE[0]}")/../env.sh"
exec "\$AB_BUNDLE/libexec/$n" "\$@"
EOF
    chmod +x "$out/bin/$n"
done
cat >"$out/bin/ldd-check" <<'EOF'
#!/usr/bin/env bash
# lists any library the bundled programs cannot find on this machine (nothing printed: all found)
. "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
rc=0
for p in "$AB_BUNDLE"/libexec/*; do
    if ldd "$p" | grep "not found"; then rc=1; fi
done
exit $rc
EOF
chmod +x "$out/bin/ldd-check"

for f in "$mnist"/*-idx[13]-ubyte*; do cp "$f" "$out/data/mnist/"; done
# CIFAR-10: the first records of each split (3,073 bytes a record: the reader takes any whole number)
head -c $((cifar_train * 3073)) "$cifar/data_batch_1.bin" >"$out/data/cifar10/data_batch_1.bin"
head -c $((cifar_test * 3073)) "$cifar/test_batch.bin" >"$out/data/cifar10/test_batch.bin"
# SST-2: the header and the first rows of the training set, the whole dev set; BERT's vocabulary
head -n $((sst2_train + 1)) "$glue/SST-2/train.tsv" >"$out/data/glue/SST-2/train.tsv"
cp "$glue/SST-2/dev.tsv" "$out/data/glue/SST-2/"
cp "$vocab" "$out/data/bert-base-uncased/vocab.txt"
cp "$here"/peers/*.py "$out/peers/"
cp "$here/scripts/gpu_check.sh" "$here/scripts/gpu_remote.sh" "$out/scripts/"
mkdir -p "$out/tests/checkpoint" # the resume check (gpu_check.sh's resume_cuda)
cp "$here/tests/checkpoint/test_resume.sh" "$here/tests/checkpoint/resume_check.py" "$out/tests/checkpoint/"
cp "$here/docs/gpu.md" "$out/docs/" 2>/dev/null || true

commit=$(git -c 'safe.directory=*' -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -c 'safe.directory=*' -C "$here" status --porcelain --untracked-files=no 2>/dev/null | head -c1)
glibc_max=$(for p in "$out"/libexec/* "$out"/lib/*; do objdump -T "$p" 2>/dev/null; done |
    grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1)
{
    echo "ampbench GPU bundle"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(ldd --version | head -1)"
    echo "source: $commit${dirty:+ (with uncommitted changes)}"
    echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | tail -1)"
    echo "CUDA architectures: $archs"
    echo "data: MNIST (all), CIFAR-10 first $cifar_train training and $cifar_test test images, SST-2 first $sst2_train training rows and the dev set, the bert-base-uncased vocabulary"
    echo "newest glibc symbol version needed: ${glibc_max:-unknown}"
    echo
    echo "bundled libraries (lib/):"
    printf '  %s\n' "${manifest_libs[@]}"
    echo
    echo "taken from the machine (CUDA family, found by env.sh):"
    printf '  %s\n' "${cuda_needed[@]}"
    echo "taken from the machine (system): glibc, libstdc++, libgcc_s"
} >"$out/MANIFEST"

tarball=$out.tar.xz
rm -f "$out.tar.gz" # the older name, so that nobody carries a stale one
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -9 -T0 >"$tarball.tmp" && mv "$tarball.tmp" "$tarball" ||
    die "packing $tarball failed"
tar_bytes=$(stat -c %s "$tarball")
# what a remote job runner sends beside it: the repository's tracked and untracked-not-ignored files
tree_bytes=0
if git -c 'safe.directory=*' -C "$here" rev-parse --git-dir >/dev/null 2>&1; then
    tree_bytes=$(cd "$here" && git ls-files -z -co --exclude-standard --deduplicate |
        xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
fi
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
total=$((tar_bytes + tree_bytes))
{
    echo
    echo "size: tarball $(mib "$tar_bytes") MiB ($(basename "$tarball")), unpacked $(du -sm "$out" | cut -f1) MiB"
    echo "size: the tree that travels beside it $(mib "$tree_bytes") MiB; together $(mib "$total") MiB of a ${budget_mib} MiB budget"
} >"$out.size.txt"
echo "bundle.sh: $tarball: $(mib "$tar_bytes") MiB (unpacked $(du -sm "$out" | cut -f1) MiB); with the tree that travels" \
    "($(mib "$tree_bytes") MiB): $(mib "$total") MiB of the ${budget_mib} MiB budget"
if [ "$budget_mib" -gt 0 ] && [ "$total" -gt $((budget_mib * 1048576)) ]; then
    die "the tarball ($(mib "$tar_bytes") MiB) plus the tree that travels ($(mib "$tree_bytes") MiB) is $(mib "$total") MiB, over the ${budget_mib} MiB budget: carry fewer data (AB_CIFAR_TRAIN, AB_SST2_TRAIN) or move result sets out of the tree"
fi
echo "bundle.sh: on the GPU machine, the one command of docs/gpu.md (it runs scripts/gpu_remote.sh from the tarball)"
