#!/usr/bin/env python3
"""The gradient census (--grad-census) against PyTorch's own gradients: at step 1 of an fp32 run
started from a torchvision-initialised ResNet-50 (--init-from, no shuffle, no augmentation), the
weight-gradient histograms agree with PyTorch's gradients of the same weights and batch, tensor by
tensor, apart from values that sit on a bin edge.

  1. torchvision's resnet50 (num_classes 10) as peers/checks/torch_check.py builds it (seed 0, batch-norm
     parameters moved off 1/0), its state_dict written as safetensors.
  2. ampbench train --init-from that file on the first 8 CIFAR-10 training images in file order
     (data_batch_1.bin first), one fp32 step, --grad-census 1: the census of step 1 is taken from
     the all-reduced gradients of the step's mean loss, before the update.
  3. Here, the same batch normalised as ampbench normalises it (fp32 (v / 255 - mean) / std), the
     same forward (model.train(): batch statistics) and backward of the mean cross-entropy, in
     fp32 and in float64; each weight gradient binned as the census bins it (floor(log2 |g|) from
     the exact binary exponent, clamped to [log2_min, log2_max]).

A histogram counts values, so the tensors' layouts do not matter; what may differ is the bin of a
value that fp32 rounding can carry across a power of two, and fp32 rounding moves this step's
gradients far: a training step of ResNet-50 at batch 8 is ill-conditioned (the stem leaves layer4
at 1x1 for 32x32 images, so its batch norms see 8 values a channel, and a ReLU input within
rounding of 0 can fall on either side, which moves every gradient behind it: peers/checks/torch_check.py).
Measured on this batch: PyTorch's fp32 gradients differ from its float64 ones by a median of about
1% relative (about 7% at the 90th percentile) in every tensor before layer4.1's last convolution,
1e-4 after it; ampbench's fp32 gradients (through tests/model_grads) by about twice that, 2%; 5% of
all values fall in another bin than in float64 (PyTorch's fp32: 3%). So the step's own
conditioning sets what "on an edge" means: a value may change bin when a power of two lies within
  DELTA * |g64| + C * |g32 - g64|        (DELTA 1e-2, C 2)
of its float64 gradient g64 (g32: PyTorch's fp32 one): twice PyTorch's own fp32 error of that value,
as ampbench's errors measured twice PyTorch's, and 1% of the value for where PyTorch's fp32 happens
to land close to float64.
A value that changes bin moves 2 counts of the L1 distance, so L1 <= 2 * (values that may change
bin); and since rounding carries values across an edge either way alike, the net count across
edge e is held to min(m_e, K sqrt(m_e)) of its m_e candidates (K 4: 4 standard deviations), which
is what keeps the big tensors sharp (a gradient 2x off shifts every value one bin: L1 about half the
values, 4 to 54 times the allowance of a tensor of a million values or more). Per tensor:
  sum over bins |hist_ampbench - hist_torch_fp32| <= 2 + 2 * min(values that may change bin,
                                                       sum over edges min(m_e, K sqrt(m_e))),
  |zeros_ampbench - zeros_torch| within the same allowance (a value within its radius of 0 may
  round to 0), nonfinite 0 on both sides, n equal;
and the census's weight tensors are exactly the model's trainable parameters. The tensors of 64 to
256 values (batch-norm scale and shift) cannot be held sharper than a few counts: with PyTorch's
gradients doubled, 160 of the 161 tensors fail (all with them multiplied by 8, a missing 1/B), the
one left being bn1.weight. A histogram does not tell apart two tensors whose gradients have like
magnitudes (a census filed under the name of the next tensor of its size passes about half the
time, as conv3 and the downsample of one block, which share their output gradient): their names and
sizes do that.

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
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import st_io  # noqa: E402
import cifar_resnet50 as peer  # noqa: E402  (MEAN, STD, the CIFAR-10 binary reader)
from torch_check import build  # noqa: E402  (the initialisation test_resnet_torch checks)

DELTA = 1e-2  # relative: summation order where PyTorch's fp32 lands close to float64
C = 2.0       # ampbench's fp32 error against PyTorch's on this step (median 2% against 1%)
K = 4.0       # standard deviations of the net count across one edge
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


def edge_allowance(g32, g64, lo, nbins):
    """(values that may change bin, the L1 allowance) of one tensor: a value may change bin when a
    power of two, or 0, lies within DELTA |g64| + C |g32 - g64| of its float64 gradient g64."""
    a = np.abs(g64)
    r = DELTA * a + C * np.abs(g32.astype(np.float64) - g64)
    below, above = a - r, a + r
    _, eb = np.frexp(np.where(below > 0, below, 1.0))
    _, ea = np.frexp(np.where(above > 0, above, 1.0))
    # the census's inner edges 2^(lo+1) .. 2^(lo+nbins-1): e from the smallest 2^e > below (eb,
    # as 2^(eb-1) <= below < 2^eb) to the largest 2^e <= above (ea - 1)
    e0 = np.clip(np.where(below > 0, eb, lo + 1), lo + 1, lo + nbins)
    e1 = np.clip(np.where(above > 0, ea - 1, lo), lo, lo + nbins - 1)
    crosses = e1 >= e0
    to_zero = (r > 0) & (below <= 0)
    # candidates per edge: +1 where a value's range of edges starts, -1 after it ends
    starts = np.bincount(e0[crosses] - (lo + 1), minlength=nbins)
    ends = np.bincount(e1[crosses] - lo, minlength=nbins + 1)[:nbins]
    m = np.append(np.cumsum(starts - ends)[:nbins - 1], to_zero.sum()).astype(np.float64)
    movers = int((crosses | to_zero).sum())
    return movers, 2 + 2 * int(min(movers, np.minimum(m, K * np.sqrt(m)).sum()))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, data_dir = sys.argv[1], sys.argv[2]
    for f in ("data_batch_1.bin", "test_batch.bin"):
        path = os.path.join(data_dir, f)
        if not os.path.exists(path):
            print(f"SKIPPED: {path}: no such file (scripts/fetch_data.sh cifar10 fetches CIFAR-10)")
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
    n_total = n_edge = moved32 = 0
    worst_l1, worst_ratio, rel = (0, "", 0), (0.0, "", 0, 0), []
    for name in g64:
        t = ab.get(name)
        if t is None:
            continue
        h32, z32, nf32, b32 = census_bins(g32[name], lo, nbins)
        _, _, nf64, b64 = census_bins(g64[name], lo, nbins)
        hab = np.array(t["hist"], dtype=np.int64)
        n = g64[name].size
        k, allow = edge_allowance(g32[name], g64[name], lo, nbins)
        l1 = int(np.abs(hab - h32).sum()) if hab.size == nbins else -1
        why = []
        if t["n"] != n:
            why.append(f"n {t['n']} vs {n}")
        if hab.size != nbins:
            why.append(f"{hab.size} bins, not {nbins}")
        elif l1 > allow:
            why.append(f"L1 {l1} > {allow}")
        if abs(t["zeros"] - z32) > allow:
            why.append(f"zeros {t['zeros']} vs {z32} (allowance {allow})")
        if t["nonfinite"] or nf32 or nf64:
            why.append(f"non-finite {t['nonfinite']} (ampbench) {nf32} (fp32) {nf64} (float64)")
        if why:
            print(f"FAIL {name}: {', '.join(why)} ({n} values, {k} may change bin)")
            failures += 1
        n_total += n
        n_edge += k
        moved32 += int((b32 != b64).sum())
        nz = g64[name] != 0
        rel.append(np.abs(g32[name][nz] - g64[name][nz]) / np.abs(g64[name][nz]))
        worst_l1 = max(worst_l1, (l1, name, allow))
        worst_ratio = max(worst_ratio, (l1 / allow, name, l1, allow))
    rel = np.concatenate(rel) if rel else np.zeros(1)
    print(f"{'ok  ' if failures == 0 else 'FAIL'} grad census of step 1 against PyTorch's fp32 gradients: "
          f"{len(ab)} weight tensors, {failures} failing; {n_total} values, {n_edge} may change bin "
          f"(within {DELTA:g} |g| + {C:g} |g32 - g64| of a power of two)")
    print(f"     largest L1 {worst_l1[0]} ({worst_l1[1]}, allowance {worst_l1[2]}); largest L1 / allowance "
          f"{worst_ratio[0]:.2f} ({worst_ratio[1]}: {worst_ratio[2]} of {worst_ratio[3]})")
    print(f"     PyTorch fp32 against float64: median relative difference {np.median(rel):.2g}, {moved32} values "
          f"in another bin; loss {loss32:.6f} (fp32) {loss64:.6f} (float64)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
