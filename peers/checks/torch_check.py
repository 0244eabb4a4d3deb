#!/usr/bin/env python3
"""ResNet-50 against torchvision, in float64: the whole model's forward and backward (every
layer and the wiring between them: shortcuts, strides, the stems, the head), torchvision's
state_dict names and shapes, and the checkpoint format both ways.

  1. torchvision's resnet50 (num_classes 10; for resnet50-cifar conv1 is a 3x3/1 convolution
     and the max pool an Identity), its own initialisation, batch-norm scale, shift and running
     statistics moved off 1/0 so that they matter; its state_dict written as safetensors (F32,
     num_batches_tracked I64), as safetensors.torch.save_file writes it.
  2. model_grads (tests/models/model_grads.c) loads that file, runs one fp32 training forward and
     backward on the same batch, writes its loss, logits, gradients and running statistics, and
     writes the weights back through its own checkpoint writer.
  3. Here, the same forward and backward in float64 from the same weights; compared by NMSE.

Tolerances: both sides of a training step of ResNet-50 at batch 2 are ill-conditioned (53 batch
norms, whose backward divides by the batch's standard deviation, over few values per channel):
PyTorch's own fp32 gradients differ from its float64 ones by NMSE up to ~1e-3 here. So each
gradient of ampbench (fp32) is held to ten times PyTorch's fp32 error on the same tensor, or
PyTorch's largest fp32 error on any tensor of the step where that is more (and 1e-6 at least): as
accurate as the framework users compare it with. The second bound is there because a ReLU input
within fp32's rounding of 0 can fall on the other side in fp32, which moves a whole element of
gradient into or out of every tensor behind it: every batch has some (PyTorch's fp32 forward flips
a few too), which ones differs between BLAS kernels (OpenBLAS's Haswell and SkylakeX kernels put
one at layer4's last ReLU of resnet50 or not: NMSE 6e-5 in layer4.2's tensors against 1e-10);
batch-norm sums are taken in double on both sides (PyTorch's CPU kernels and ampbench's). The logits,
loss and running statistics go through the forward only, which is well conditioned: NMSE 1e-8. A
wiring mistake (a wrong buffer, a missing shortcut, a transposed filter) gives an NMSE of order
1. The weights written back must equal the file bit for bit.

usage: torch_check.py MODEL_GRADS_BINARY [--batch N] [--report] [resnet50|resnet50-cifar ...]
  --batch N   images in the step [2]
  --report    also print how close ampbench's fp32 gradients are to float64 beside PyTorch's fp32
              ones: the geometric mean of the ratio of their NMSEs, over all tensors and the
              batch-norm ones, and the tensors where ampbench's is farthest
Exit 0 when all agree, 1 on a mismatch, 77 (skip) without torch and torchvision."""
import math
import os
import sys
import tempfile

try:
    import torch
    import torchvision
except ImportError as e:
    print(f"SKIPPED: PyTorch with torchvision is not importable here ({e}); "
          "install python3-torch python3-torchvision")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import st_io  # noqa: E402

TOL_GRAD_FLOOR = 1e-6
TOL_GRAD_FACTOR = 10.0
TOL_FWD_NMSE = 1e-8


def build(name):
    torch.manual_seed(0)
    m = torchvision.models.resnet50(num_classes=10)
    if name == "resnet50-cifar":
        m.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        torch.nn.init.kaiming_normal_(m.conv1.weight, mode="fan_out", nonlinearity="relu")
        m.maxpool = torch.nn.Identity()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.weight.add_(0.3 * torch.randn_like(mod.weight))
                mod.bias.add_(0.3 * torch.randn_like(mod.bias))
                mod.running_mean.copy_(0.1 * torch.randn_like(mod.running_mean))
                mod.running_var.copy_(1.0 + 0.2 * torch.rand_like(mod.running_var))
                mod.num_batches_tracked.fill_(7)
    return m


def nmse(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    if not torch.isfinite(a).all():
        return float("inf")
    den = (b * b).sum().item()
    num = ((a - b) ** 2).sum().item()
    return num / den if den > 0 else num


def check(tool, name, tmp, batch=2, report_all=False):
    m = build(name)
    # the torchvision stem halves twice before layer1: 64x64 keeps layer4 at 2x2 (8 values per
    # channel in its batch norm at batch 2); the CIFAR stem runs at CIFAR's 32x32
    size = 64 if name == "resnet50" else 32
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, size, size, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    sd = m.state_dict()
    wpath, bpath = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "batch.safetensors")
    opath, spath = os.path.join(tmp, "out.safetensors"), os.path.join(tmp, "saved.safetensors")
    st_io.save(sd, wpath)
    st_io.save({"x": x, "y": y}, bpath)
    rc = os.system(f"'{tool}' {name} '{wpath}' '{bpath}' '{opath}' --save '{spath}'")
    if rc != 0:
        print(f"FAIL {name}: model_grads exited with status {rc}")
        return 1
    out = st_io.load(opath)
    saved = st_io.load(spath)

    failures = 0
    # the checkpoint writer: same names in the same order, same dtypes, bit for bit
    if list(saved.keys()) != list(sd.keys()):
        print(f"FAIL {name}: the written checkpoint's names differ from torchvision's state_dict")
        failures += 1
    for k, v in sd.items():
        s = saved.get(k)
        if s is None or s.dtype != v.dtype or s.shape != v.shape or not torch.equal(s, v):
            print(f"FAIL {name}: written tensor {k} is not the loaded one bit for bit")
            failures += 1
            break

    def reference(dtype):
        md = build(name).to(dtype)
        md.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in sd.items()})
        md.train()
        logits = md(x.to(dtype))
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        return md, logits, loss

    md, logits, loss = reference(torch.float64)
    m32, _, _ = reference(torch.float32)
    g32 = dict(m32.named_parameters())
    # PyTorch's largest fp32 error on any gradient of this step: no tensor is held tighter than that
    worst32 = max(nmse(g32[k].grad, p.grad) for k, p in md.named_parameters())

    def report(what, err, tol):
        nonlocal failures
        bad = not (err <= tol)
        failures += bad
        if bad or os.environ.get("AB_VERBOSE"):
            print(f"  {'FAIL' if bad else 'ok  '} {name} {what}: nmse {err:.3g} (tolerance {tol:g})")

    report("logits", nmse(out["logits"], logits.detach()), TOL_FWD_NMSE)
    report("loss", nmse(out["loss"].reshape(1), loss.detach().reshape(1)), TOL_FWD_NMSE)
    worst, n = (0.0, ""), 0
    for k, p in md.named_parameters():
        e = nmse(out["grad." + k], p.grad)
        report("grad " + k, e, max(TOL_GRAD_FLOOR, TOL_GRAD_FACTOR * nmse(g32[k].grad, p.grad), worst32))
        worst = max(worst, (e, k))
        n += 1
    for k, b in md.named_buffers():
        if k.endswith("running_mean") or k.endswith("running_var"):
            report(k, nmse(out[k], b), TOL_FWD_NMSE)
    if report_all:
        accuracy_report(name, batch, out, md, g32)
    print(f"{'ok  ' if failures == 0 else 'FAIL'} {name}: {n} gradients, logits and running statistics against "
          f"torchvision in float64 (worst gradient nmse {worst[0]:.2g}, {worst[1]}); loss {out['loss'].item():.6f} "
          f"vs {loss.item():.6f}; checkpoint round trip bit for bit")
    return failures


def accuracy_report(name, batch, out, md, g32):
    """How close to the float64 gradients ampbench's fp32 ones are, beside PyTorch's fp32 ones: per
    tensor the NMSE of each against float64, the geometric mean of their ratio over all tensors and
    over the batch-norm ones, how many tensors ampbench's is the farther on, the largest ratios."""
    rows = [(k, nmse(out["grad." + k], p.grad), nmse(g32[k].grad, p.grad)) for k, p in md.named_parameters()]
    bn = [r for r in rows if ".bn" in r[0] or r[0].startswith("bn") or "downsample.1" in r[0]]

    def gmean(rs):
        return math.exp(sum(math.log(max(a, 1e-30) / max(b, 1e-30)) for _, a, b in rs) / len(rs))

    for what, rs in (("all", rows), ("batch norm", bn)):
        print(f"report {name} batch {batch}: {what} {len(rs)} tensors: ampbench's fp32 NMSE against float64 over "
              f"PyTorch's fp32 one, geometric mean {gmean(rs):.3f}; ampbench's the larger on "
              f"{sum(a > b for _, a, b in rs)}")
    for k, a, b in sorted(rows, key=lambda r: -r[1] / max(r[2], 1e-30))[:8]:
        print(f"report {name}   {k}: ampbench {a:.3g}, PyTorch {b:.3g} (ratio {a / max(b, 1e-30):.2f})")


def main():
    args = sys.argv[1:]
    batch, report_all = 2, False
    while len(args) > 1 and args[1].startswith("--"):
        if args[1] == "--report":
            report_all = True
            args = args[:1] + args[2:]
        elif args[1] == "--batch" and len(args) > 2 and args[2].isdigit() and int(args[2]) >= 2:
            batch = int(args[2])
            args = args[:1] + args[3:]
        else:
            print(f"torch_check.py: unknown option or bad value '{args[1]}' (--batch N >= 2, --report)")
            return 2
    if not args:
        print(__doc__)
        return 2
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    names = args[1:] or ["resnet50-cifar", "resnet50"]
    with tempfile.TemporaryDirectory() as tmp:
        failures = sum(check(args[0], n, tmp, batch, report_all) for n in names)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
