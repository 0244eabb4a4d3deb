#!/usr/bin/env python3
"""PyTorch's CPU convolutions on every convolution shape of ResNet-50, as bench/conv_bench.c times
ampbench's: forward, backward-data and backward-filter (torch.ops.aten.convolution_backward with
the masks of each), channels-last tensors, median of R timings each, and the network's
convolution time per training step. On a CPU PyTorch convolves through oneDNN (mkldnn): Debian's
PyTorch 1.13 is built on oneDNN 2.6.3, the version Debian's libdnnl-dev ships, so this is also
what linking oneDNN directly would give.

usage: conv_bench.py [--stem cifar|imagenet] [--batch B] [--size HW] [--threads T] [--repeats R]"""
import argparse
import time

import torch


def resnet50_convs(stem_cifar, B, size):
    """(name, count, N, H, C, K, R, stride) for every distinct convolution, as conv_bench.c walks them"""
    out = []

    def add(name, H, C, K, R, stride):
        key = (B, H, C, K, R, stride)
        for o in out:
            if tuple(o[2:]) == key:
                o[1] += 1
                return
        out.append([name, 1, *key])

    H = size
    k = 3 if stem_cifar else 7
    add("stem", H, 3, 64, k, 1 if stem_cifar else 2)
    H = H if stem_cifar else (H + 6 - 7) // 2 + 1
    if not stem_cifar:
        H = (H + 2 - 3) // 2 + 1
    C = 64
    for L, blocks in enumerate((3, 4, 6, 3)):
        planes = 64 << L
        for i in range(blocks):
            s2 = 2 if (L > 0 and i == 0) else 1
            Ho = (H - 1) // s2 + 1
            add("layer%d 1x1" % (L + 1), H, C, planes, 1, 1)
            add("layer%d 3x3" % (L + 1), H, planes, planes, 3, s2)
            add("layer%d 1x1" % (L + 1), Ho, planes, planes * 4, 1, 1)
            if i == 0:
                add("layer%d down 1x1" % (L + 1), H, C, planes * 4, 1, s2)
            C, H = planes * 4, Ho
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stem", default="cifar", choices=["cifar", "imagenet"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cases = resnet50_convs(a.stem == "cifar", a.batch, a.size)
    print("conv_bench.py: ResNet-50 (%s stem) convolutions, batch %d, %dx%d input, fp32, PyTorch %s, %d threads, "
          "mkldnn %s; median of %d (ms)" % ("CIFAR" if a.stem == "cifar" else "torchvision", a.batch, a.size, a.size,
                                            torch.__version__, torch.get_num_threads(),
                                            torch.backends.mkldnn.is_available(), a.repeats))
    print("%-22s %5s %-26s %9s %9s %9s %9s" % ("shape", "count", "N,H,W,C -> K,RxS/stride", "forward", "bwd data",
                                               "bwd filter", "GFLOP/s"))
    total = [0.0, 0.0, 0.0]
    flops_all = 0.0
    cl = torch.channels_last
    for name, count, N, H, C, K, R, stride in cases:
        pad = R // 2
        x = torch.randn(N, C, H, H).to(memory_format=cl)
        w = (0.05 * torch.randn(K, C, R, R)).to(memory_format=cl)
        y = torch.nn.functional.conv2d(x, w, None, stride, pad)
        dy = torch.randn_like(y).to(memory_format=cl)
        P = y.shape[2]

        def run(d):
            if d == 0:
                return torch.nn.functional.conv2d(x, w, None, stride, pad)
            mask = [d == 1, d == 2, False]
            return torch.ops.aten.convolution_backward(dy, x, w, None, [stride, stride], [pad, pad], [1, 1], False,
                                                       [0, 0], 1, mask)

        med = []
        for d in range(3):
            run(d)  # warm-up: primitive creation
            ts = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                run(d)
                ts.append(time.perf_counter() - t0)
            ts.sort()
            med.append(ts[len(ts) // 2])
            total[d] += med[-1] * count
        flops = 2.0 * N * P * P * K * R * R * C
        flops_all += 3 * flops * count
        print("%-22s %5d %-26s %9.2f %9.2f %9.2f %9.1f" % (name, count, "%d,%d,%d,%d -> %d,%dx%d/%d" % (
            N, H, H, C, K, R, R, stride), 1e3 * med[0], 1e3 * med[1], 1e3 * med[2], 3 * flops / sum(med) / 1e9))
    allt = sum(total)
    print("network per step (ms): forward %.1f, backward data %.1f, backward filter %.1f, all %.1f; %.1f GFLOP/s; "
          "%.1f images/s of convolution" % (1e3 * total[0], 1e3 * total[1], 1e3 * total[2], 1e3 * allt,
                                            flops_all / allt / 1e9, a.batch / allt))


if __name__ == "__main__":
    main()
