#!/usr/bin/env python3
"""The gradient census (--grad-census) against PyTorch's own gradients: at step 1 of an fp32 run
started from a torchvision-initialised ResNet-50 (--init-from, no shuffle, no augmentation), the
weight-gradient histograms agree with PyTorch's gradients of the same weights and batch, tensor by
tensor, apart from values that sit on a bin edge.

  1. torchvision's resnet50 (num_classes 10) as tests/torch_check.py builds it (seed 0, batch-norm
     parameters moved off 1/0), its state_dict written as safetensors.
  2. ampbench train --init-from that file on the first 8 CIFAR-10 training images in file order
     (data_batch_1.bin first), one fp32 step, --grad-census 1: the census of step 1 is taken from
     the all-reduced gradients of the step's mean loss, before the update.
  3. Here, the same batch normalised as ampbench normalises it (fp32 (v / 255 - mean) / std), the
     same forward (model.train(): batch statistics) and backward of the mean cross-entropy, in
     fp32 and in float64; each weight gradient binned as the census bins it (floor(log2 |g|) from
     the exact binary exponent, clamped to [log2_min, log2_max]).

A histogram counts values, so the tensors' layouts do not matter. What may differ: a value within
rounding of a power of two can fall in the bin on either side. A value is "on an edge" when its
float64 or fp32 gradient lies within a relative distance DELTA = 1e-2 of a power of two, or the two
fall in different bins. PyTorch's own fp32 gradients of this step differ from its float64 ones by
far less than 1e-2 (the script prints the median relative difference and how many values it moves
across a bin edge that is farther than DELTA: the bound's premise); the bound is loose on purpose,
and only about 3% of values lie that close to a power of two (the share of mantissas within 1% of
1 or 2 in log scale), so a wrong tensor, a gradient 2x off or a missing 1/B (8x: 3 bins) fails
by far. Each value that changes bin moves 2 counts of L1 distance. Per tensor:
  sum over bins |hist_ampbench - hist_torch| <= 2 * (values on an edge) + 2,
  |zeros_ampbench - zeros_torch| within the same allowance, nonfinite 0 on both sides, n equal;
and the census's weight tensors are exactly the model's trainable parameters.

usage: census_torch_check.py AMPBENCH_BINARY CIFAR10_DIR
Exit 0 when all agree, 1 on a mismatch, 77 (skip) without torch, torchvision and numpy or without
the CIFAR-10 binary files."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torchvision  # noqa: F401  (torch_check.build uses it)
except ImportError as e:
    print(f"SKIPPED: PyTorch with torchvision and numpy is not importable here ({e}); "
          "install python3-torch python3-torchvision python3-numpy")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "pytorch"))
sys.path.insert(0, HERE)
import st_io  # noqa: E402
import cifar_resnet50 as peer  # noqa: E402  (MEAN, STD, the CIFAR-10 binary reader)
from torch_check import build  # noqa: E402  (the initialisation test_resnet_torch checks)

DELTA = 1e-2
BATCH = 8
OPTIONS = ("--model", "--dataset", "--data", "--init-from", "--no-shuffle", "--no-augment", "--batch-size",
           "--max-steps", "--train-subset", "--test-subset", "--grad-census", "--precision", "--out", "--quiet")


def first_images(data_dir, n):
    """The first n training images of CIFAR-10 in ampbench's file order, normalised as its loader
    does (a per-channel table of fp32 (v / 255 - mean) / std), and their labels."""
    raw = b""
    for path in peer.split_files(data_dir, "train"):
        raw += peer.read_cifar_file(path)[1][:n * peer.RECORD - len(raw)]
        if len(raw) == n * peer.RECORD:
            break
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, peer.RECORD)
    if rec.shape[0] < n:
        raise SystemExit(f"FAIL: {data_dir} holds {rec.shape[0]} training images, fewer than {n}")
    v = rec[:, 1:].reshape(n, 3, 32, 32).astype(np.float32)
    mean = np.array(peer.MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
    std = np.array(peer.STD, dtype=np.float32).reshape(1, 3, 1, 1)
    x = (v / np.float32(255.0) - mean) / std  # float32 throughout, as the C table
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(rec[:, 0].astype(np.int64))


def torch_grads(sd, x, y, dtype):
    """{name: flat gradient (numpy)} of the mean cross-entropy of one training forward, and the loss."""
    m = build("resnet50").to(dtype)
    m.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in sd.items()})
    m.train()
    loss = torch.nn.functional.cross_entropy(m(x.to(dtype)), y)
    loss.backward()
    return {k: p.grad.detach().numpy().ravel().copy() for k, p in m.named_parameters() if p.requires_grad}, loss.item()


def census_bins(g, lo, nbins):
    """(hist, zeros, nonfinite) of g as the census counts it, and each value's bin (-1: zero or non-finite)."""
    a = np.abs(g)
    fin = np.isfinite(a)
    ok = fin & (a != 0)
    _, e = np.frexp(np.where(ok, a, 1.0))  # a = m * 2^e, m in [0.5, 1): floor(log2 a) = e - 1, exactly
    b = np.where(ok, np.clip(e - 1 - lo, 0, nbins - 1), -1)
    return np.bincount(b[ok], minlength=nbins), int((a == 0).sum()), int((~fin).sum()), b


def near_pow2(g):
    """Whether each value lies within a relative DELTA of a power of two (zeros do not)."""
    m, _ = np.frexp(np.abs(g.astype(np.float64)))
    return (m != 0) & ((m <= 0.5 * (1 + DELTA)) | (m >= 1 - DELTA))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, data_dir = sys.argv[1], sys.argv[2]
    for f in ("data_batch_1.bin", "test_batch.bin"):
        if not os.path.exists(os.path.join(data_dir, f)):
            print(f"SKIPPED: {os.path.join(data_dir, f)}: no such file (scripts/fetch_data.sh cifar10 fetches CIFAR-10)")
            return 77
    helptext = subprocess.run([tool, "--help"], capture_output=True, text=True).stdout
    missing = [o for o in OPTIONS if o not in helptext]
    if missing:
        print(f"FAIL: ampbench --help does not list {' '.join(missing)}")
        return 1
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    sd = build("resnet50").state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        wpath, rpath = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "r.json")
        st_io.save(sd, wpath)
        cmd = [tool, "train", "--model", "resnet50", "--dataset", "cifar10", "--data", data_dir, "--init-from", wpath,
               "--no-shuffle", "--no-augment", "--batch-size", str(BATCH), "--max-steps", "1",
               "--train-subset", str(BATCH), "--test-subset", str(BATCH), "--grad-census", "1",
               "--precision", "fp32", "--out", rpath, "--quiet"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL: ampbench train exited with status {p.returncode}:\n{p.stdout}{p.stderr}")
            return 1
        with open(rpath) as f:
            result = json.load(f)

    census = result.get("grad_census")
    if not census or not census.get("records"):
        print("FAIL: the result has no grad_census records")
        return 1
    lo, hi = census["log2_min"], census["log2_max"]
    nbins = hi - lo + 1
    rec = census["records"][0]
    if rec["step"] != 1 or rec["loss_scale"] != 1.0:
        print(f"FAIL: the first census is of step {rec['step']} at loss scale {rec['loss_scale']}, not step 1 at 1")
        return 1
    ab = {t["name"]: t for t in rec["tensors"] if t["kind"] == "weight"}

    x, y = first_images(data_dir, BATCH)
    g32, loss32 = torch_grads(sd, x, y, torch.float32)
    g64, loss64 = torch_grads(sd, x, y, torch.float64)

    failures = 0
    if set(ab) != set(g64):
        print(f"FAIL: census weight tensors not among the model's parameters: {sorted(set(ab) - set(g64))}; "
              f"parameters without a census: {sorted(set(g64) - set(ab))}")
        failures += 1
    n_total = n_edge = worst_l1 = moved_far = 0
    worst_name, rel = "", []
    for name in g64:
        t = ab.get(name)
        if t is None:
            continue
        h32, z32, nf32, b32 = census_bins(g32[name], lo, nbins)
        _, _, nf64, b64 = census_bins(g64[name], lo, nbins)
        hab = np.array(t["hist"], dtype=np.int64)
        n = g32[name].size
        edge = near_pow2(g32[name]) | near_pow2(g64[name]) | (b32 != b64)
        k = int(edge.sum())
        moved_far += int(((b32 != b64) & ~(near_pow2(g32[name]) | near_pow2(g64[name]))).sum())
        nz = g64[name] != 0
        rel.append(np.abs(g32[name][nz] - g64[name][nz]) / np.abs(g64[name][nz]))
        l1 = int(np.abs(hab - h32).sum()) if hab.size == nbins else -1
        allow = 2 * k + 2
        why = []
        if t["n"] != n:
            why.append(f"n {t['n']} vs {n}")
        if hab.size != nbins:
            why.append(f"{hab.size} bins, not {nbins}")
        elif l1 > allow:
            why.append(f"L1 {l1} > {allow}")
        if abs(t["zeros"] - z32) > allow:
            why.append(f"zeros {t['zeros']} vs {z32}")
        if t["nonfinite"] or nf32 or nf64:
            why.append(f"non-finite {t['nonfinite']} (ampbench) {nf32} (fp32) {nf64} (float64)")
        if why:
            print(f"FAIL {name}: {', '.join(why)} ({n} values, {k} on an edge)")
            failures += 1
        n_total += n
        n_edge += k
        if l1 > worst_l1:
            worst_l1, worst_name = l1, name
    rel = np.concatenate(rel) if rel else np.zeros(1)
    print(f"{'ok  ' if failures == 0 else 'FAIL'} grad census of step 1 against PyTorch: {len(g64)} weight tensors, "
          f"{n_total} values, {n_edge} on a bin edge (within {DELTA:g} of a power of two); largest L1 {worst_l1} "
          f"({worst_name or '-'}); torch fp32 vs float64: median relative difference {np.median(rel):.2g}, "
          f"{moved_far} values across an edge farther than {DELTA:g}; loss {loss32:.6f} (fp32) {loss64:.6f} (float64)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
