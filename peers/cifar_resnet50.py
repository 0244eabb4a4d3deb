#!/usr/bin/env python3
"""ResNet-50 on CIFAR-10 in PyTorch: the peer `ampbench train --model resnet50[-cifar]` is compared with.

Model (torchvision's resnet50, its own initialisation, num_classes 10):
  resnet50        torchvision's layout unchanged: conv1 7x7/2 + max pool 3x3/2 (layer4 is 1x1 at 32x32)
  resnet50-cifar  conv1 replaced by a 3x3/1 pad 1 convolution without bias, max pool by Identity
The parameter count (23,528,522 and 23,520,842) and the multiply-adds per image (a forward-hook
count over Conv2d and Linear: output elements x input channels / groups x kernel area, and
in x out features for Linear; no bias, batch norm or pooling work) are printed and recorded.

Data: the CIFAR-10 binary files read directly (no torchvision download): data_batch_1.bin,
data_batch_2.bin, ... as many as exist from 1 on, and test_batch.bin; records of 1 label byte + 3072
bytes (planes R, G, B of 32x32). --train-subset/--test-subset N keep the first N of each split. The
uint8 images stay resident on the device and a batch is built there (index_select, crop and flip,
normalise), as ampbench does, so that the framework is measured and not a data loader.
  normalisation  (x / 255 - mean) / std per channel, mean (0.4914, 0.4822, 0.4465),
                 std (0.2470, 0.2435, 0.2616)
  augmentation   (training only; --no-augment switches it off) a random 32x32 crop of the image
                 zero-padded by 4 pixels on each side, then a horizontal flip with probability 1/2,
                 drawn per sample from a seeded generator. The padding is applied to the raw uint8
                 image BEFORE normalisation: a padded pixel is 0 in uint8 space and so becomes
                 (0 - mean) / std after normalising (not 0), as in torchvision's RandomCrop(32, 4)
                 before Normalize and as ampbench does.
  order          a seeded permutation per epoch (--no-shuffle keeps the file order); the last
                 batch of an epoch may be short (no drop_last).

Precision (--precision): fp32 (no TF32 unless --tf32: ampbench's fp32 is plain fp32); amp =
torch.autocast(float16) + GradScaler (init scale 65536, growth 2, backoff 0.5, interval 2000, as
ampbench; the scale is read back every step to record overflow events), or with --loss-scale S a
static scale (peer_common.StaticScaler: loss times S, gradients divided by S, a step with an inf/NaN
gradient skipped and recorded, S never changed; S = 1 is AMP without loss scaling); bf16 =
autocast(bfloat16), no scaler. Where the installed PyTorch cannot autocast to the dtype on the device (PyTorch 1.13
autocasts only to bf16 on a CPU) the script says so in one line and exits 2.
--channels-last (default on for cuda, off for cpu) puts the model and the inputs in channels_last.

Recipe: SGD, momentum 0.9, weight decay 5e-4 on every parameter, lr 0.1, batch 128 per rank,
cross-entropy (--optimizer adamw: AdamW's decoupled decay; --wd-exclude bias-norm: none on biases and
batch-norm weights). The learning rate of optimizer step s (0-based, counted over the whole run, skipped
AMP steps included) with base lr L, W warm-up steps and T steps in all (epochs x steps per epoch,
or --max-steps if smaller) is
  s < W          L * s / W                       (linear warm-up from 0; step 0 has lr 0)
  otherwise, with t = (s - W) / (T - W):
  constant       L
  linear         L * (1 - t)                     (reaches 0 at s = T, just after the last step)
  cosine         L * 0.5 * (1 + cos(pi * t))
  step           L, x0.1 from s >= T/2, x0.01 from s >= 3T/4 (integer division; no warm-up factor)
which is ampbench's ab_lr_at and Hugging Face's get_{linear,cosine}_schedule_with_warmup.

Data parallel: launched under torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or mpirun (OMPI_COMM_WORLD_*,
or PMI_RANK/PMI_SIZE), the script runs DistributedDataParallel, nccl on cuda and gloo on cpu
(mpirun: MASTER_ADDR/MASTER_PORT default to 127.0.0.1:29500, one node). A step takes world x batch
samples of the shared permutation; rank r trains on the r-th block of batch samples (ampbench's
block-cyclic shard), and each rank's summed loss is scaled by world / (samples in the step) so that
DDP's gradient average is the mean over the step's samples even when a short last step leaves the
ranks unequal shares (a rank with none runs a zero-weighted forward and backward so that DDP's
all-reduce still meets). Batch norm keeps per-rank batch statistics (no SyncBatchNorm); running
statistics come from rank 0 (DDP's broadcast_buffers). Rank 0 prints and writes the record.

Times: epochs[].time_s is the training part of an epoch (evaluation excluded); data_time_s is batch
assembly (CUDA events on cuda); --timing-skip-steps N leaves the first N steps of the run out of
time_s and of samples_per_s (first-step set-up: cuDNN/oneDNN plans, allocator growth), and is
recorded in peer.timing_skip_steps; 0 (the default) times every step, as ampbench does.

Memory, peak_memory_bytes (peak_memory_bytes.method names which):
  cuda  torch.cuda.max_memory_allocated() less the resident data set (ampbench keeps data sets out
        of its categories); the raw figure is gpu.torch_max_memory_allocated_bytes.
  cpu   parameters + gradients + optimizer state + the bytes autograd saves for one backward,
        comparable with ampbench's tracked total; the resident-set growth apart
        (peer_common.MemoryMeter says how each is counted).

Ctrl-C (or SIGTERM) stops after the current step; the epoch in progress is evaluated and recorded,
the result is written with complete=false, interrupted=true, and the exit status is 130. A second
Ctrl-C stops at once with the epochs already finished. The record is written atomically (temporary
file, rename) after every epoch (complete=false) and at the end.
"""
import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

PROG = "cifar_resnet50.py"
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
RECORD = 3073  # 1 label byte + 3 x 32 x 32 pixel bytes


def die(msg, status=1):
    pc.die(PROG, msg, status)


def read_cifar_file(path):
    """(samples, raw bytes) of one CIFAR-10 binary file; a one-line error on bad input."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        die("%s: %s" % (path, e.strerror or e))
    if len(raw) == 0 or len(raw) % RECORD:
        die("%s: %d bytes, not a positive multiple of %d (1 label byte + 3072 pixel bytes a record)"
            % (path, len(raw), RECORD))
    labels = raw[0::RECORD]
    if max(labels) > 9:
        i = next(k for k, v in enumerate(labels) if v > 9)
        die("%s: record %d has label %d (CIFAR-10 labels are 0..9)" % (path, i, labels[i]))
    return len(raw) // RECORD, raw


def split_files(data_dir, split):
    if split == "test":
        return [os.path.join(data_dir, "test_batch.bin")]
    files, k = [], 1
    while os.path.exists(os.path.join(data_dir, "data_batch_%d.bin" % k)):
        files.append(os.path.join(data_dir, "data_batch_%d.bin" % k))
        k += 1
    if not files:
        die("%s: no such file (the CIFAR-10 binary version; set --data)" % os.path.join(data_dir, "data_batch_1.bin"))
    return files


# what this peer does not vary (ampbench recipe --model resnet50)
FIXED = {"dataset": "cifar10", "clip-grad-norm": 0.0}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default="resnet50", choices=["resnet50", "resnet50-cifar"])
    ap.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp", "bf16"])
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                    help="model and inputs in torch.channels_last [on for cuda, off for cpu]")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 convolutions and matmuls (cuda)")
    ap.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=True,
                    help="torch.backends.cudnn.benchmark (cuda)")
    ap.add_argument("--epochs", type=int, default=1, help="the articles' setting is 50")
    pc.add_bucket_arg(ap)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N optimizer steps in all (0 = no limit)")
    ap.add_argument("--zero-init-residual", action="store_true",
                    help="each bottleneck's last batch-norm scale starts at 0 (torchvision's zero_init_residual)")
    ap.add_argument("--batch-size", type=int, default=128, help="per rank")
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"],
                    help="adamw: torch.optim.AdamW, betas 0.9/0.999, eps 1e-8, decoupled weight decay")
    ap.add_argument("--wd-exclude", default="none", choices=["none", "bias-norm"],
                    help="bias-norm: no weight decay on biases and batch-norm weights (tensors of one dimension)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--lr-schedule", default="constant", choices=["constant", "linear", "cosine", "step"])
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=os.environ.get("AB_CIFAR10_DIR", ""),
                    help="folder with the CIFAR-10 .bin files [$AB_CIFAR10_DIR or <repo>/../shared/data/cifar10]")
    ap.add_argument("--train-subset", type=int, default=0, help="first N training samples (0 = all)")
    ap.add_argument("--test-subset", type=int, default=0, help="first N test samples (0 = all)")
    ap.add_argument("--augment", action=argparse.BooleanOptionalAction, default=True,
                    help="random crop (4-pixel zero padding) + horizontal flip")
    ap.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True,
                    help="a seeded permutation per epoch; --no-shuffle keeps the file order")
    pc.add_scaler_options(ap)  # --init-scale ... --growth-interval, --timing-skip-steps, --log-interval, --threads
    ap.add_argument("--out", default="", help="JSON result file (written atomically after each epoch)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="check the data files and stop (no torch needed)")
    pc.add_fixed_recipe_args(ap, FIXED)
    a = ap.parse_args()
    pc.check_fixed_recipe_args(ap, a, FIXED)
    pc.check_counts(PROG, a, ("epochs", "batch_size", "log_interval"),
                    ("max_steps", "warmup_steps", "train_subset", "test_subset", "timing_skip_steps", "threads"))
    pc.check_loss_scale(PROG, a)
    if not a.data:
        a.data = os.path.normpath(os.path.join(pc.REPO_ROOT, "..", "shared", "data", "cifar10"))
    return a


def import_torch():
    pc.import_or_reexec(PROG, __file__, ("torch", "torchvision"), "torch", "PyTorch and torchvision are needed (%s)", 1)


def main():
    a = parse_args()
    started = pc.utc_now()
    if not a.dry_run:
        import_torch()
    rank, world, local_rank = pc.launcher_env(PROG)
    lead = rank == 0
    say = pc.make_say(lead, a.quiet)

    # ---- data: checked without torch, then converted ----
    splits = {}
    for split in ("train", "test"):
        parts = []
        for path in split_files(a.data, split):
            n, raw = read_cifar_file(path)
            parts.append((path, n, raw))
        splits[split] = parts
    n_train_all = sum(p[1] for p in splits["train"])
    n_test_all = sum(p[1] for p in splits["test"])
    n_train = min(a.train_subset, n_train_all) if a.train_subset > 0 else n_train_all
    n_test = min(a.test_subset, n_test_all) if a.test_subset > 0 else n_test_all
    train_desc = "CIFAR-10 binary %s, %d of %d samples%s" % (
        "+".join(os.path.basename(p[0]) for p in splits["train"]), n_train, n_train_all,
        ", augment crop 4 (zero padding) + flip" if a.augment else "")
    test_desc = "CIFAR-10 binary test_batch.bin, %d of %d samples" % (n_test, n_test_all)
    if a.dry_run:
        print("%s: %s: %d train and %d test images of 3x32x32 (%s; %s)" % (PROG, a.data, n_train_all, n_test_all,
                                                                      train_desc, test_desc))
        return 0

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision

    # ---- device, precision, distribution ----
    dev, cuda = pc.select_device(PROG, a, lead, local_rank)
    channels_last = cuda if a.channels_last is None else a.channels_last
    mem_fmt = torch.channels_last if channels_last else torch.contiguous_format
    pc.set_tf32(a.tf32)
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    amp = a.precision == "amp"
    ac_dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(a.precision)

    # does this torch autocast to the dtype on this device? (1.13: CPU bf16 only)
    pc.check_precision(PROG, a.precision, dev, cuda, ac_dtype,
                       lambda: F.conv2d(torch.ones(1, 3, 4, 4, device=dev), torch.ones(2, 3, 3, 3, device=dev)),
                       "convolutions stay float32")

    dist, backend = pc.init_distributed(rank, world, cuda)

    torch.manual_seed(a.seed)
    perm_gen = torch.Generator().manual_seed(a.seed)  # the same order on every rank
    aug_gen = torch.Generator(device=dev) if cuda else torch.Generator()
    aug_gen.manual_seed(a.seed * 1000003 + 7919 * rank + 1)  # each rank's own crops and flips

    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
        free0, total_mem = torch.cuda.mem_get_info(dev)

    def to_tensors(parts, n_keep):
        xs, ys, left = [], [], n_keep
        for _path, n, raw in parts:
            if left <= 0:
                break
            k = min(n, left)
            t = torch.frombuffer(bytearray(raw[:k * RECORD]), dtype=torch.uint8).view(k, RECORD)
            xs.append(t[:, 1:].reshape(k, 3, 32, 32).clone())
            ys.append(t[:, 0].long())
            left -= k
        return torch.cat(xs), torch.cat(ys)

    tx, ty = to_tensors(splits["train"], n_train)
    vx, vy = to_tensors(splits["test"], n_test)
    del splits
    gc.collect()
    tx, ty, vx, vy = tx.to(dev), ty.to(dev), vx.to(dev), vy.to(dev)
    resident_bytes = sum(t.numel() * t.element_size() for t in (tx, ty, vx, vy))
    meter = pc.MemoryMeter(dev, cuda, resident_bytes)  # VmRSS now; VmHWM reset on the CPU

    # ---- model ----
    model = torchvision.models.resnet50(weights=None, num_classes=10, zero_init_residual=a.zero_init_residual)
    if a.model == "resnet50-cifar":
        model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")  # torchvision's conv init
        model.maxpool = nn.Identity()
    model = model.to(dev, memory_format=mem_fmt)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)

    macs = [0]

    def conv_hook(m, _inp, out):
        macs[0] += out.numel() // out.shape[0] * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear_hook(m, _inp, out):
        macs[0] += out.numel() // out.shape[0] // m.out_features * m.in_features * m.out_features

    hooks = [m.register_forward_hook(conv_hook) for m in model.modules() if isinstance(m, nn.Conv2d)]
    hooks += [m.register_forward_hook(linear_hook) for m in model.modules() if isinstance(m, nn.Linear)]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, 32, 32, device=dev).contiguous(memory_format=mem_fmt))
    for h in hooks:
        h.remove()
    model.train()
    macs_per_sample = macs[0]
    say("model %s: %s parameters, %s multiply-adds per 32x32 image (forward)"
        % (a.model, format(n_params, ","), format(macs_per_sample, ",")))

    net = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, device_ids=[dev.index] if cuda else None, bucket_cap_mb=a.bucket_mb)
    # weight decay on every parameter, or (bias-norm) not on biases and batch-norm weights: the
    # tensors of one dimension, what ampbench's no_decay specs are
    if a.wd_exclude == "bias-norm":
        groups = [{"params": [p for p in model.parameters() if p.ndim > 1], "weight_decay": a.weight_decay},
                  {"params": [p for p in model.parameters() if p.ndim <= 1], "weight_decay": 0.0}]
    else:
        groups = [{"params": list(model.parameters()), "weight_decay": a.weight_decay}]
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    else:
        opt = torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum)
    scaler = pc.make_scaler(a, dev, amp)
    autocast = pc.make_autocast(dev, ac_dtype)
    sync = pc.make_sync(dev, cuda)

    # ---- batches, built on the device ----
    scale_c = torch.tensor([1.0 / (255.0 * s) for s in STD], device=dev).view(1, 3, 1, 1)
    shift_c = torch.tensor([-m / s for m, s in zip(MEAN, STD)], device=dev).view(1, 3, 1, 1)
    ar32 = torch.arange(32, device=dev)
    chan = torch.arange(3, device=dev).view(1, 3, 1, 1)

    def normalise(x):  # (b, 3, 32, 32) uint8 -> float32, normalised, in the model's memory format
        return (x.float() * scale_c + shift_c).contiguous(memory_format=mem_fmt)

    def augment(x):  # zero-pad the uint8 image by 4, crop 32x32 at a random offset, flip half
        b = x.shape[0]
        xp = F.pad(x, (4, 4, 4, 4))  # (b, 3, 40, 40), padded pixels 0 in uint8 space
        off = torch.randint(0, 9, (b, 2), device=dev, generator=aug_gen)
        flip = torch.randint(0, 2, (b, 1), device=dev, generator=aug_gen).bool()
        rows = off[:, 0:1] + ar32  # (b, 32)
        cols = off[:, 1:2] + torch.where(flip, 31 - ar32, ar32)  # (b, 32)
        bi = torch.arange(b, device=dev).view(b, 1, 1, 1)
        return xp[bi, chan, rows.view(b, 1, 32, 1), cols.view(b, 1, 1, 32)]

    def batch(idx, train):
        x = tx.index_select(0, idx) if train else vx.index_select(0, idx)
        y = ty.index_select(0, idx) if train else vy.index_select(0, idx)
        if train and a.augment:
            x = augment(x)
        return normalise(x), y

    # ---- schedule ----
    group = a.batch_size * world
    steps_per_epoch = (n_train + group - 1) // group
    total_steps = steps_per_epoch * a.epochs
    if a.max_steps > 0:
        total_steps = min(total_steps, a.max_steps)
    if a.model == "resnet50" and total_steps >= steps_per_epoch:
        last = n_train - (steps_per_epoch - 1) * group
        for r in range(world):
            b0, b1 = pc.shard(last, a.batch_size, world, r)
            if b1 - b0 == 1:
                die("resnet50: the last step of an epoch leaves %s one image, and batch norm after layer4 "
                    "(1x1 at 32x32 input) needs 2 values per channel in training; change --batch-size or "
                    "--train-subset" % ("rank %d" % r if world > 1 else "the batch"), 2)

    # ---- stopping ----
    stop_requested = pc.StopRequest(world, dev, dist)

    def evaluate():
        model.eval()
        loss_sum = torch.zeros((), device=dev, dtype=torch.float64)
        correct = torch.zeros((), device=dev, dtype=torch.long)
        preds, golds = [], []
        with torch.no_grad():
            for pos in range(0, n_test, a.batch_size):
                idx = torch.arange(pos, min(n_test, pos + a.batch_size), device=dev)
                xb, yb = batch(idx, False)
                with autocast():
                    out = model(xb)
                loss_sum += F.cross_entropy(out.float(), yb, reduction="sum").double()
                correct += (out.argmax(1) == yb).sum()
                preds.append(out.argmax(1))
                golds.append(yb)
        model.train()
        state["pred"], state["gold"] = torch.cat(preds).tolist(), torch.cat(golds).tolist()
        return loss_sum.item() / n_test, 100.0 * correct.item() / n_test

    # ---- the record ----
    commit, dirty = pc.git_info()
    state = {"epochs": [], "curve": [], "peak_used": 0}
    scale_log = pc.LossScaleLog(scaler.get_scale() if amp else 1.0)

    def record(complete, interrupted, peaks_per_rank=None):
        raw_peak, mem = meter.read(model, opt)
        epochs = state["epochs"]
        rec = {
            **pc.record_head(commit, started, complete, interrupted),
            "workload": {"model": a.model, "dataset": "cifar10", "train_samples": n_train, "test_samples": n_test,
                         "batch_size": a.batch_size, "epochs": a.epochs, "max_steps": a.max_steps,
                         "optimizer": a.optimizer, "lr": a.lr, "momentum": a.momentum, "weight_decay": a.weight_decay,
                         "wd_exclude": a.wd_exclude,
                         "seed": a.seed, "accum_steps": 1, "parameters": n_params,
                         "macs_per_sample": macs_per_sample, "lr_schedule": a.lr_schedule,
                         "warmup_steps": a.warmup_steps, "total_steps": total_steps, "shuffle": a.shuffle,
                         "augment": a.augment, "train_subset": a.train_subset, "test_subset": a.test_subset,
                         "train_data": train_desc, "test_data": test_desc,
                         "weights": "torchvision initialisation (seed %d)" % a.seed,
                         "notes": "batch norm: per-rank batch statistics under data parallelism (DDP without "
                                  "SyncBatchNorm); running statistics from rank 0 (DDP's broadcast_buffers)"},
            "precision": a.precision, "world_size": world,
            "host": pc.host_record(dev, cuda, pc.blas_desc(cuda, "torchvision", torchvision.__version__)),
            **pc.run_totals(epochs),
            "peak_memory_bytes": mem,
            "mixed_precision": scale_log.mixed_precision_record(a.precision, a.init_scale, a.growth_factor, a.backoff_factor,
                                        a.growth_interval, epochs, a.loss_scale),
            "loss_curve": state["curve"],
            "peer": {"script": "peers/cifar_resnet50.py", "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "channels_last": channels_last,
                     "tf32": a.tf32, "cudnn_benchmark": a.cudnn_benchmark if cuda else False,
                     "timing_skip_steps": a.timing_skip_steps, "resident_data": True,
                     "ddp_backend": backend},
        }
        if dirty is not None:
            rec["git_dirty"] = dirty
        tp = pc.predictions_record(state.get("pred"), state.get("gold"), 10)
        if tp:
            rec["test_predictions"] = tp
        if world > 1:
            rec["data_parallel"] = pc.data_parallel_record(world, 1, backend, peaks_per_rank, mem["total"], a.bucket_mb)
        if cuda:
            rec["gpu"] = pc.gpu_record(dev, total_mem, free0, state["peak_used"], resident_bytes, raw_peak)
        return rec

    def write(complete, interrupted, peaks=None):
        if a.out and lead:
            pc.write_atomic(a.out, record(complete, interrupted, peaks))

    say("%s on %s%s, %s, batch %d%s, %d steps (%d a epoch), lr %g %s, warm-up %d, %s%s"
        % (a.model, dev, " (channels_last)" if channels_last else "", a.precision, a.batch_size,
           " x %d ranks (%s)" % (world, backend) if world > 1 else "", total_steps, steps_per_epoch, a.lr,
           a.lr_schedule, a.warmup_steps, train_desc, ", no shuffle" if not a.shuffle else ""))

    # ---- training ----
    step = 0
    interrupted = False
    try:
        for e in range(1, a.epochs + 1):
            if a.shuffle:
                order = torch.randperm(n_train, generator=perm_gen).to(dev)
            else:
                order = torch.arange(n_train, device=dev)
            tally = pc.EpochTally(dev, cuda, sync, step, a.timing_skip_steps)
            for s in range(steps_per_epoch):
                if stop_requested():
                    interrupted = True
                    break
                if a.max_steps > 0 and step >= a.max_steps:
                    break
                pos = s * group
                n = min(group, n_train - pos)
                b0, b1 = pc.shard(n, a.batch_size, world, rank)
                mark = tally.data_begin()
                empty = b1 == b0
                idx = order[pos + b0:pos + b1] if not empty else order[:2]
                xb, yb = batch(idx, True)
                tally.data_end(mark)
                opt.zero_grad(set_to_none=True)
                with meter.saved_scope(net), autocast():
                    out = net(xb)
                    loss_sum = F.cross_entropy(out, yb, reduction="sum")
                if empty:  # DDP's all-reduce must meet on every rank: a zero-weighted pass
                    loss_sum = loss_sum * 0.0
                loss = loss_sum * (world / n)
                for g in opt.param_groups:
                    g["lr"] = pc.lr_at(a.lr_schedule, a.lr, step, total_steps, a.warmup_steps)
                took = True
                if amp:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                    # one host sync per step, as ampbench's read-back; a static scale says itself whether it skipped
                    took = scale_log.update(scaler.get_scale(), step, e, getattr(scaler, "last_skipped", None))
                else:
                    loss.backward()
                    opt.step()
                step += 1
                # this rank's share of the step's world-mean loss; summed over ranks at log points
                tally.add(loss_sum.detach().double() / n, n, took, step)
                if step % a.log_interval == 0 or s == steps_per_epoch - 1:
                    mean = tally.log_point(step, e, scale_log.scale, state["curve"], world, dist)
                    if step % a.log_interval == 0:
                        say(tally.progress_line(e, pos + n, n_train, mean, took))
            tally.stop_clock()
            if cuda:
                free_now, _ = torch.cuda.mem_get_info(dev)
                state["peak_used"] = max(state["peak_used"], total_mem - free_now)
            tally.train_loss(world, dist)
            te = time.perf_counter()
            test_loss, test_acc = evaluate()
            eval_s = time.perf_counter() - te
            state["epochs"].append(tally.epoch_record(e, eval_s, test_loss, test_acc))
            say(tally.done_line(e, "images", test_loss, test_acc, scale_log.scale))
            sys.stdout.flush()
            write(False, False)
            if interrupted or (a.max_steps > 0 and step >= a.max_steps):
                break
    except KeyboardInterrupt:  # a second Ctrl-C: the finished epochs only
        interrupted = True
        if lead:
            print("%s: interrupted again: writing the %d finished epoch(s)" % (PROG, len(state["epochs"])),
                  file=sys.stderr)
        write(False, True)
        return 130

    return pc.finish_run(a, lead, world, dist, lambda: meter.read(model, opt)[1]["total"], record, write,
                         interrupted)

if __name__ == "__main__":
    pc.run_main(PROG, main)
