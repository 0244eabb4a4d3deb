#!/usr/bin/env python3
"""The article's MNIST MLP in PyTorch: the peer ampbench is compared with on the same GPU.

784 -> Linear(256) -> ReLU -> Linear(10), cross-entropy, SGD lr 0.01, batch 64, inputs
normalised with mean 0.1307 and std 0.3081; precision fp32, amp (torch.autocast fp16 +
GradScaler, or a static scale with --loss-scale S) or bf16 (autocast bf16, no scaler). Reads
the IDX files (.gz or raw) directly, no torchvision download. Writes the same JSON fields as
`ampbench train` (harness/schema), with tool = "pytorch", so the two are compared side by side.

Data loading, --loader:
  resident    (default) the uint8 data set lives on the device; a batch is an index_select and a
              normalise there, as ampbench does: this measures the framework, not a loader.
  dataloader  the article's way: a torch DataLoader over normalised host tensors, each batch
              copied to the device (pinned memory). Slower; closer to the article's script.

Memory: peak_memory_bytes.total is torch.cuda.max_memory_allocated() less the resident data set
(ampbench keeps data sets out of its categories); the raw figure is in
gpu.torch_max_memory_allocated_bytes. Overflow events are read from the scaler every step
(one host sync per step, as ampbench's per-step read-back).
"""
import argparse
import gzip
import json
import math
import os
import platform
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

MEAN, STD = 0.1307, 0.3081


def read_idx(path):
    """(dims, bytes) of an IDX file of unsigned bytes, .gz or raw; a one-line error on bad input."""
    cand = [path + ".gz", path] if not path.endswith(".gz") else [path]
    for p in cand:
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                raw = f.read()
            break
    else:
        sys.exit("mnist_mlp.py: %s(.gz): no such file" % path)
    if len(raw) < 4:
        sys.exit("mnist_mlp.py: %s: truncated header" % p)
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit("mnist_mlp.py: %s: bad magic (expected unsigned-byte IDX)" % p)
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    n = 1
    for d in dims:
        n *= d
    body = raw[4 + 4 * ndim:]
    if len(body) != n:
        sys.exit("mnist_mlp.py: %s: %d data bytes, header says %d" % (p, len(body), n))
    return dims, body


def load_split(data_dir, split):
    idims, images = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte" % split))
    ldims, labels = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte" % split))
    if len(idims) != 3 or len(ldims) != 1 or idims[0] != ldims[0]:
        sys.exit("mnist_mlp.py: %s: %s images %s do not match labels %s" % (data_dir, split, idims, ldims))
    return idims[0], idims[1] * idims[2], images, labels


# the article's script: plain SGD at a constant rate, no clipping (ampbench recipe --model mlp)
FIXED = {"dataset": "mnist", "optimizer": "sgd", "wd-exclude": "none", "lr-schedule": "constant", "warmup-steps": 0,
         "clip-grad-norm": 0.0}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mlp", choices=["mlp"], help="the one model of this peer")
    ap.add_argument("--device", default="cuda", help="cuda | cpu | auto [cuda]")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp", "bf16"])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N optimizer steps in all (0 = no limit)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=os.environ.get("AB_MNIST_DIR", ""),
                    help="folder with the MNIST IDX files [$AB_MNIST_DIR or ../shared/data/mnist]")
    ap.add_argument("--loader", default="resident", choices=["resident", "dataloader"])
    pc.add_loss_scale_option(ap)
    ap.add_argument("--init-scale", type=float, default=65536.0)
    ap.add_argument("--growth-interval", type=int, default=2000)
    ap.add_argument("--log-interval", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch default)")
    ap.add_argument("--out", default="", help="JSON result file")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="read the data and stop (no torch needed)")
    pc.add_fixed_recipe_args(ap, FIXED)
    a = ap.parse_args()
    pc.check_fixed_recipe_args(ap, a, FIXED)
    pc.check_loss_scale("mnist_mlp.py", a)
    if not a.data:
        here = os.path.dirname(os.path.abspath(__file__))
        a.data = os.path.normpath(os.path.join(here, "..", "..", "shared", "data", "mnist"))
    return a


def main():
    a = parse_args()
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", os.environ.get("WORLD_SIZE", "1"))))
    if world > 1:  # one line, from rank 0 (every rank's at once would run together in the log)
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", os.environ.get("RANK", "0"))))
        if rank == 0:
            print("mnist_mlp.py: no data-parallel version of this peer (launched with %d ranks)" % world,
                  file=sys.stderr)
        return 2
    started = pc.utc_now()
    n_train, dim, train_x, train_y = load_split(a.data, "train")
    n_test, dim_t, test_x, test_y = load_split(a.data, "t10k")
    if dim != dim_t:
        sys.exit("mnist_mlp.py: train and test images differ in size")
    if a.dry_run:
        print("mnist_mlp.py: %s: %d train and %d test images of %d pixels" % (a.data, n_train, n_test, dim))
        return 0

    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit("mnist_mlp.py: PyTorch is needed (%s)" % e)

    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
        if a.device == "cpu" and not a.quiet:
            print("mnist_mlp.py: --device auto: no usable GPU; running on the CPU", file=sys.stderr)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("mnist_mlp.py: --device cuda: no usable GPU")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    # fp32 means fp32: no TF32 in the matrix products (ampbench's fp32 GEMMs are plain fp32)
    pc.set_tf32(False)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)

    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
        free0, total_mem = torch.cuda.mem_get_info(dev)

    def as_tensor(buf, shape):
        return torch.frombuffer(bytearray(buf), dtype=torch.uint8).reshape(shape)

    tx, ty = as_tensor(train_x, (n_train, dim)), as_tensor(train_y, (n_train,)).long()
    vx, vy = as_tensor(test_x, (n_test, dim)), as_tensor(test_y, (n_test,)).long()
    resident_bytes = 0
    if a.loader == "resident":
        tx, ty, vx, vy = tx.to(dev), ty.to(dev), vx.to(dev), vy.to(dev)
        resident_bytes = sum(t.numel() * t.element_size() for t in (tx, ty, vx, vy)) if cuda else 0
        loader = None
    else:
        from torch.utils.data import DataLoader, TensorDataset
        norm = (tx.float() / 255.0 - MEAN) / STD
        loader = DataLoader(TensorDataset(norm, ty), batch_size=a.batch_size, shuffle=True, generator=gen,
                            pin_memory=cuda, num_workers=0)

    model = nn.Sequential(nn.Linear(dim, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    amp = a.precision == "amp"
    ac_dtype = torch.float16 if amp else torch.bfloat16
    autocast = a.precision != "fp32"
    if autocast:  # does this torch autocast to the dtype on this device? (1.13: bf16 only on a CPU)
        try:
            with torch.autocast(dev.type, dtype=ac_dtype):
                model(torch.zeros(1, dim, device=dev))
        except (RuntimeError, AssertionError) as ex:
            print("mnist_mlp.py: --precision %s: PyTorch %s cannot autocast to %s on %s (%s)"
                  % (a.precision, torch.__version__, ac_dtype, dev.type, str(ex).splitlines()[0]), file=sys.stderr)
            return 2
    if amp and a.loss_scale != "dynamic":
        scaler = pc.StaticScaler(a.loss_scale)
    elif hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler(dev.type, init_scale=a.init_scale, growth_interval=a.growth_interval,
                                      enabled=amp)
    else:  # PyTorch before 2.3: the CUDA scaler (amp runs only on CUDA there)
        scaler = torch.cuda.amp.GradScaler(init_scale=a.init_scale, growth_interval=a.growth_interval,
                                           enabled=amp and cuda)

    sync = pc.make_sync(dev, cuda)

    def normalise(xb):
        return (xb.float() / 255.0 - MEAN) / STD

    last_eval = {}

    def evaluate():
        model.eval()
        loss_sum = torch.zeros((), device=dev)
        correct = torch.zeros((), device=dev, dtype=torch.long)
        preds, golds = [], []
        with torch.no_grad():
            for pos in range(0, n_test, a.batch_size):
                xb = vx[pos:pos + a.batch_size].to(dev, non_blocking=True)
                yb = vy[pos:pos + a.batch_size].to(dev, non_blocking=True)
                with torch.autocast(dev.type, dtype=ac_dtype, enabled=autocast):
                    out = model(normalise(xb))
                loss_sum += F.cross_entropy(out.float(), yb, reduction="sum")
                correct += (out.argmax(1) == yb).sum()
                preds.append(out.argmax(1))
                golds.append(yb)
        model.train()
        last_eval["pred"], last_eval["gold"] = torch.cat(preds).tolist(), torch.cat(golds).tolist()
        return loss_sum.item() / n_test, 100.0 * correct.item() / n_test

    epochs, curve = [], []
    scale_log = pc.LossScaleLog(scaler.get_scale() if amp else 1.0)
    step = 0
    peak_used = 0
    for e in range(1, a.epochs + 1):
        data_s = 0.0
        ev_pairs = []
        loss_acc = torch.zeros((), device=dev)
        interval_acc = torch.zeros((), device=dev)
        steps = skipped = samples = 0
        sync()
        t0 = time.perf_counter()
        if loader is None:
            perm = torch.randperm(n_train, generator=gen).to(dev)
            batches = ((perm[p:p + a.batch_size]) for p in range(0, n_train, a.batch_size))
        else:
            batches = iter(loader)
        while not (a.max_steps and step >= a.max_steps):
            td = time.perf_counter()
            if cuda:
                eb, ee = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                eb.record()
            try:
                b = next(batches)
            except StopIteration:
                break
            if loader is None:
                xb, yb = normalise(tx.index_select(0, b)), ty.index_select(0, b)
            else:
                xb, yb = b[0].to(dev, non_blocking=True), b[1].to(dev, non_blocking=True)
            if cuda:
                ee.record()
                ev_pairs.append((eb, ee))
            else:
                data_s += time.perf_counter() - td
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=ac_dtype, enabled=autocast):
                out = model(xb)
                loss = F.cross_entropy(out, yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_acc += loss.detach().float()
            interval_acc += loss.detach().float()
            took = True
            if amp:
                # one host sync per step; a static scale says itself whether it skipped
                took = scale_log.update(scaler.get_scale(), step, e, getattr(scaler, "last_skipped", None))
            steps += 1
            skipped += not took
            samples += yb.shape[0]
            step += 1
            if step % a.log_interval == 0:
                mean = interval_acc.item() / a.log_interval
                curve.append({"step": step, "epoch": e, "loss": mean, "scale": scale_log.scale})
                interval_acc.zero_()
                if not a.quiet:
                    print("Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f" % (e, samples, n_train, 100.0 * samples / n_train,
                                                                      loss.item()))
        sync()
        time_s = time.perf_counter() - t0
        if cuda:
            data_s = sum(x.elapsed_time(y) for x, y in ev_pairs) * 1e-3
            free_now, _ = torch.cuda.mem_get_info(dev)
            peak_used = max(peak_used, total_mem - free_now)
        te = time.perf_counter()
        test_loss, test_acc = evaluate()
        eval_s = time.perf_counter() - te
        train_loss = loss_acc.item() / max(steps, 1)
        epochs.append({"epoch": e, "time_s": time_s, "compute_time_s": time_s - data_s, "data_time_s": data_s,
                       "eval_time_s": eval_s, "steps": steps, "skipped_steps": skipped, "train_loss": train_loss,
                       "test_loss": test_loss, "test_accuracy": test_acc, "samples": samples})
        if not a.quiet:
            print("Epoch %d done: %.3f s, train loss %.4f, test loss %.4f, test accuracy %.2f%%, skipped steps %d, "
                  "loss scale %g" % (e, time_s, train_loss, test_loss, test_acc, skipped, scale_log.scale))
        if a.max_steps and step >= a.max_steps:
            break

    n_params = sum(p.numel() for p in model.parameters())
    p_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    opt_bytes = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                    if torch.is_tensor(t))
    if cuda:
        raw_peak = torch.cuda.max_memory_allocated(dev)
        total = raw_peak - resident_bytes
    else:
        raw_peak, total = 0, 0
    mem = {"parameters": p_bytes, "master_weights": 0, "gradients": p_bytes, "optimizer_state": opt_bytes,
           "activations": max(0, total - 2 * p_bytes - opt_bytes), "workspace": 0, "total": total}
    commit, dirty = pc.git_info()
    rec = {
        **pc.record_head(commit, started, True, False),
        "workload": {"model": "mlp", "dataset": "mnist", "train_samples": n_train, "test_samples": n_test,
                     "batch_size": a.batch_size, "epochs": a.epochs, "max_steps": a.max_steps, "optimizer": "sgd",
                     "lr": a.lr, "momentum": a.momentum, "weight_decay": a.weight_decay, "seed": a.seed, "accum_steps": 1,
                     "parameters": n_params},
        "precision": a.precision, "world_size": 1,
        # platform.processor(), not pc.cpu_model(): this peer's records have always said so
        "host": pc.host_record(dev, cuda, "torch %s (%s loader)" % (torch.__version__, a.loader),
                               cpu=platform.processor()),
        **pc.run_totals(epochs, "samples"),
        "peak_memory_bytes": mem,
        # this peer's GradScaler keeps torch's growth factor 2 and backoff factor 0.5 (no options)
        "mixed_precision": scale_log.mixed_precision_record(a.precision, a.init_scale, 2.0, 0.5, a.growth_interval, epochs, a.loss_scale),
        "loss_curve": curve,
    }
    if cuda:
        rec["gpu"] = pc.gpu_record(dev, total_mem, free0, peak_used, resident_bytes, raw_peak)
    if dirty is not None:
        rec["git_dirty"] = dirty
    tp = pc.predictions_record(last_eval.get("pred"), last_eval.get("gold"), 10)
    if tp:
        rec["test_predictions"] = tp
    for x in epochs:  # JSON has no NaN
        for k, v in x.items():
            if isinstance(v, float) and not math.isfinite(v):
                x[k] = None
    text = json.dumps(rec, indent=2)
    if a.out:
        pc.write_text_atomic(a.out, text)
        if not a.quiet:
            print("result: %s" % a.out)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
