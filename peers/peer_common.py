"""What the PyTorch peers (cifar_resnet50.py, bert_glue.py, mnist_mlp.py) share: one copy of each helper.

The peers are run as scripts; each puts its own folder first on sys.path and imports this module
(`import peer_common as pc`), as bert_glue.py imports st_io. Nothing here imports torch at module level
(--dry-run and the re-run under the system python happen before torch is imported): the functions that
need it import it themselves. Messages carry the calling script's name, passed in as `prog`.

  environment  die, utc_now, import_or_reexec, git_info, cpu_model, launcher_env (rank discovery)
  arguments    add_scaler_options, check_counts, check_loss_scale
  set-up       select_device (device and threads), check_precision, make_scaler, StaticScaler, init_distributed,
               make_autocast, make_sync, make_say
  training     lr_at, shard, shard_blocks, world_sum, StopRequest, LossScaleLog, EpochTally (an epoch's
               losses, counters, clock, curve points, progress lines and record)
  memory       proc_status_kb, reset_peak_rss, MemoryMeter
  the record   record_head, host_record, blas_desc, run_totals, LossScaleLog.mixed_precision_record,
               data_parallel_record, add_bucket_arg, gpu_record, finite_or_none, write_text_atomic, write_atomic,
               finish_run, run_main
"""
import contextlib
import datetime
import json
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import warnings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here, not in a pyenv python


# ---- environment ----

def die(prog, msg, status=1):
    print("%s: %s" % (prog, msg), file=sys.stderr)
    sys.exit(status)


def utc_now():
    """the record's started_at: UTC, to the second"""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def import_or_reexec(prog, script, modules, lacks, need, status):
    """Import `modules` (names); where one is missing, run `script` once more under SYSTEM_PYTHON
    (`#!/usr/bin/env python3` may find a python, pyenv or venv, without torch while the distribution's
    python3 has it: Debian's python3-torch), saying "<python> has no <lacks>"; else die(need % error, status)."""
    import importlib
    try:
        for name in modules:
            importlib.import_module(name)
        return
    except ImportError as e:
        err = e
    if (os.environ.get("AB_PEER_REEXEC") != "1" and os.path.exists(SYSTEM_PYTHON)
            and os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)):
        os.environ["AB_PEER_REEXEC"] = "1"
        print("%s: %s has no %s (%s); running under %s" % (prog, sys.executable, lacks, err, SYSTEM_PYTHON),
              file=sys.stderr)
        sys.stderr.flush()
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(script)] + sys.argv[1:])
    die(prog, need % err, status)


def git_info(dirty=True):
    """(commit, dirty) of the checkout the peers are in: "unknown" and None where git cannot say
    (asked with safe.directory=*, so a checkout owned by another user still answers);
    dirty (tracked files changed) is None too when not asked for (one git call fewer)."""
    commit, is_dirty = "unknown", None
    try:
        out = subprocess.run(["git", "-c", "safe.directory=*", "-C", REPO_ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        commit = out.stdout.strip() or "unknown"
        if dirty and commit != "unknown":
            st = subprocess.run(["git", "-c", "safe.directory=*", "-C", REPO_ROOT, "status", "--porcelain",
                                 "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
            is_dirty = bool(st.stdout.strip()) if st.returncode == 0 else None
    except Exception:
        pass
    return commit, is_dirty


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def launcher_env(prog):
    """(rank, world, local_rank) from torchrun's or mpirun's environment; (0, 1, 0) otherwise."""
    env = os.environ
    for r, w, l in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")):
        if r in env and w in env:
            try:
                rank, world = int(env[r]), int(env[w])
                local = int(env.get(l, rank))
            except ValueError:
                die(prog, "%s=%r, %s=%r: not integers" % (r, env[r], w, env[w]), 2)
            return rank, world, local
    return 0, 1, 0


# ---- arguments ----

def add_loss_scale_option(ap):
    """--loss-scale dynamic|S, as ampbench's (check_loss_scale reads it)"""
    ap.add_argument("--loss-scale", default="dynamic", metavar="dynamic|S",
                    help="dynamic: GradScaler's; a number S: a static scale (1 = AMP without loss scaling): the loss "
                         "times S, gradients divided by S, a step with an inf/NaN gradient skipped and recorded, S never "
                         "changed; S needs --precision amp and none of the dynamic scaler's options [dynamic]")


def add_scaler_options(ap):
    """--loss-scale, --init-scale, --growth-factor, --backoff-factor, --growth-interval (the AMP loss scaler,
    ampbench's defaults), --timing-skip-steps, --log-interval, --threads"""
    add_loss_scale_option(ap)
    ap.add_argument("--init-scale", type=float, default=65536.0)
    ap.add_argument("--growth-factor", type=float, default=2.0)
    ap.add_argument("--backoff-factor", type=float, default=0.5)
    ap.add_argument("--growth-interval", type=int, default=2000)
    ap.add_argument("--timing-skip-steps", type=int, default=0,
                    help="leave the first N steps out of the timings and samples/s")
    ap.add_argument("--log-interval", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch default)")


def check_counts(prog, a, at_least_one, non_negative):
    """exit 2 with a one-line message where an option of `at_least_one` is < 1 or one of `non_negative` < 0
    (attribute names; the message spells them as options)"""
    for name in at_least_one:
        if getattr(a, name) < 1:
            die(prog, "--%s must be at least 1" % name.replace("_", "-"), 2)
    for name in non_negative:
        if getattr(a, name) < 0:
            die(prog, "--%s must be >= 0" % name.replace("_", "-"), 2)


STATIC_SCALE_MIN = 2.0 ** -24  # ampbench's AB_SCALER_STATIC_MIN: below it every scaled fp16 loss gradient is 0
FLT_MAX = 3.4028234663852886e38


def check_loss_scale(prog, a, argv=None):
    """Reads a.loss_scale in place: "dynamic", or the static scale as a float. Exit 2 with ampbench's one-line
    messages for a value that is neither, a static scale without --precision amp, or a static scale beside one
    of the dynamic scaler's options (named on the command line, argv: sys.argv[1:])."""
    v = a.loss_scale
    if v == "dynamic":
        return
    try:
        x = float(v)
    except ValueError:
        die(prog, "--loss-scale: '%s' is neither dynamic nor a number" % v, 2)
    if not (x > 0.0) or not math.isfinite(x):
        die(prog, "--loss-scale: '%s' is not a positive finite scale (or dynamic)" % v, 2)
    if x > FLT_MAX:
        die(prog, "--loss-scale: '%s' is beyond the range of a float (%g)" % (v, FLT_MAX), 2)
    if x < STATIC_SCALE_MIN:
        die(prog, "--loss-scale: '%s' is below 2^-24 (%g): every scaled loss gradient would round to zero in fp16"
            % (v, STATIC_SCALE_MIN), 2)
    if a.precision != "amp":
        die(prog, "--loss-scale %s: a static loss scale needs --precision amp (%s trains without a loss scale)"
            % (v, a.precision), 2)
    words = sys.argv[1:] if argv is None else argv
    for opt in ("--init-scale", "--growth-factor", "--backoff-factor", "--growth-interval"):
        if any(w == opt or w.startswith(opt + "=") for w in words):
            die(prog, "--loss-scale %s is static: %s belongs to the dynamic scaler" % (v, opt), 2)
    a.loss_scale = x


# ---- set-up ----

def select_device(prog, a, lead, local_rank):
    """(device, cuda?) from --device cpu|cuda|auto (a.device is resolved in place) and --threads; a rank
    takes GPU local_rank (modulo the GPUs there are)."""
    import torch
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
        if a.device == "cpu" and lead:
            print("%s: --device auto: no usable GPU; running on the CPU" % prog, file=sys.stderr)
    if a.device == "cuda" and not torch.cuda.is_available():
        die(prog, "--device cuda: no usable GPU", 2)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    dev = torch.device("cuda", local_rank % max(1, torch.cuda.device_count())) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    return dev, cuda


def check_precision(prog, precision, dev, cuda, ac_dtype, probe, stays):
    """Exit 2 with one line where this torch cannot autocast to ac_dtype on dev (PyTorch 1.13 autocasts only
    to bf16 on a CPU) or has no CPU GradScaler for amp. probe() runs one operation under autocast (its
    result must come out in ac_dtype); `stays` says what stays float32 when it does not and torch says
    nothing."""
    import torch
    if ac_dtype is not None:
        ok, why = False, ""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with torch.autocast(dev.type, dtype=ac_dtype):
                    y = probe()
                ok = y.dtype == ac_dtype
            except Exception as e:  # noqa: BLE001 (any failure means: not supported)
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not ok:
            why = why or (str(caught[0].message).splitlines()[0] if caught else stays)
            die(prog, "--precision %s: PyTorch %s cannot autocast to %s on %s (%s)"
                % (precision, torch.__version__, str(ac_dtype).replace("torch.", ""), dev.type, why), 2)
    if precision == "amp" and not cuda and not (hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler")):
        die(prog, "--precision amp: PyTorch %s has no GradScaler for the CPU" % torch.__version__, 2)


class StaticScaler:
    """--loss-scale S: GradScaler's interface (scale, unscale_, step, update, get_scale) with a scale that never
    changes. The loss is multiplied by S; unscale_ divides the gradients by S (in fp32, by the float 1/S, as
    ampbench's unscale; not at all at S = 1, which is GradScaler(enabled=False) plus the inf check) and looks for
    inf/NaN in the result; step skips the optimizer step when it found one. last_skipped says whether the last
    step was skipped (LossScaleLog.update takes it, the scale not dropping). Under DDP the gradients are
    all-reduced before unscale_, so every rank decides alike."""

    def __init__(self, scale):
        self._scale = float(scale)
        self._unscaled = False
        self._found_inf = False
        self.last_skipped = False

    def get_scale(self):
        return self._scale

    def scale(self, loss):
        return loss * self._scale if self._scale != 1.0 else loss

    def unscale_(self, opt):
        if self._unscaled:
            return
        import torch
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        inv = 1.0 / self._scale
        bad = []
        for g in grads:
            if inv != 1.0:
                g.mul_(inv)
            bad.append(torch.logical_not(torch.isfinite(g)).any())
        self._found_inf = bool(torch.stack(bad).any().item()) if bad else False  # one host sync a step
        self._unscaled = True

    def step(self, opt):
        self.unscale_(opt)
        self.last_skipped = self._found_inf
        if not self._found_inf:
            opt.step()

    def update(self):
        self._unscaled = False
        self._found_inf = False


def make_scaler(a, dev, amp):
    """the GradScaler of --init-scale, --growth-factor, --backoff-factor, --growth-interval, or a StaticScaler
    under --loss-scale S (after check_loss_scale); None without amp"""
    if not amp:
        return None
    if getattr(a, "loss_scale", "dynamic") != "dynamic":
        return StaticScaler(a.loss_scale)
    import torch
    kw = dict(init_scale=a.init_scale, growth_factor=a.growth_factor, backoff_factor=a.backoff_factor,
              growth_interval=a.growth_interval)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(dev.type, **kw)
    return torch.cuda.amp.GradScaler(**kw)


def init_distributed(rank, world, cuda):
    """(torch.distributed, backend) with the process group started, nccl on cuda and gloo on cpu (mpirun:
    MASTER_ADDR/MASTER_PORT default to 127.0.0.1:29500); (None, "none") for one process."""
    if world <= 1:
        return None, "none"
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world)
    return dist, backend


def set_tf32(enabled):
    """TF32 for fp32 matrix products, convolutions and RNNs on or off. PyTorch 2.9 and later have
    fp32_precision ("tf32" | "ieee") per backend and operator, and stop with a RuntimeError when a
    CUDA matmul or convolution finds the flags set through a mix of it and the older allow_tf32 (or
    cuDNN's conv and rnn disagreeing), so every one of them is set here, the same way; earlier
    versions have only the flags."""
    import torch
    cudnn = torch.backends.cudnn
    matmul = torch.backends.cuda.matmul
    value = "tf32" if enabled else "ieee"

    def has_precision(obj):  # 1.13's matmul object raises AssertionError for an unknown attribute
        try:
            return obj is not None and getattr(obj, "fp32_precision") is not None
        except (AttributeError, AssertionError):
            return False
    if has_precision(matmul) and has_precision(getattr(cudnn, "conv", None)):
        matmul.fp32_precision = value
        for op in ("conv", "rnn"):
            if has_precision(getattr(cudnn, op, None)):
                getattr(cudnn, op).fp32_precision = value
    else:
        matmul.allow_tf32 = bool(enabled)
        cudnn.allow_tf32 = bool(enabled)


def make_autocast(dev, ac_dtype):
    """autocast(): a fresh context, torch.autocast to ac_dtype on dev, or nothing for fp32 (ac_dtype None)"""
    import torch

    def autocast():
        if ac_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(dev.type, dtype=ac_dtype)
    return autocast


def make_sync(dev, cuda):
    """sync(): wait for the GPU's queued work (nothing on the CPU)"""
    import torch

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)
    return sync


def make_say(lead, quiet):
    """print on rank 0 unless --quiet"""
    return (lambda *x: print(*x)) if lead and not quiet else (lambda *x: None)


# ---- training ----

def lr_at(schedule, base, s, T, W):
    """ampbench's ab_lr_at: the learning rate of optimizer step s (0-based) of T with W warm-up steps; see
    the peers' docstrings (step: x0.1 from T/2, x0.01 from 3T/4, no warm-up factor)."""
    if W > 0 and s < W:
        return base * s / W
    span = float(T - W) if T > W else 1.0
    x = (s - W) / span
    if schedule == "linear":
        return base * max(0.0, 1.0 - x)
    if schedule == "cosine":
        return base * 0.5 * (1.0 + math.cos(math.pi * min(1.0, x)))
    if schedule == "step":
        return base * (0.01 if s >= T * 3 // 4 else 0.1 if s >= T // 2 else 1.0)
    return base


def shard(n, B, W, r):
    """ampbench's ab_shard_step for one micro-batch a step: rank r's [begin, end) of a step of n samples."""
    begin = min(n, r * B)
    return begin, min(n, begin + B)


def shard_blocks(n, B, W, r):
    """ampbench's ab_shard_step: rank r's micro-batches [begin, end) of a step of n samples, blocks of B
    dealt to the ranks in turn (rank r takes blocks r, r + W, ...)."""
    return [(b0, min(n, b0 + B)) for b0 in range(r * B, n, W * B)]


def world_sum(values, world, dist):
    """[sum over the ranks] of each 0-d tensor of `values`, as float64 Python floats"""
    import torch
    t = torch.stack([v.detach().double().reshape(()) for v in values])
    if world > 1:
        dist.all_reduce(t)
    return t.tolist()


class StopRequest:
    """Ctrl-C (or SIGTERM) once: stop after the current step (call the object: True once asked, on any
    rank); twice: KeyboardInterrupt at once. Installs the handlers when made."""

    def __init__(self, world, dev, dist):
        self.n, self.world, self.dev, self.dist = 0, world, dev, dist
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, _signum, _frame):
        self.n += 1
        if self.n >= 2:
            raise KeyboardInterrupt

    def __call__(self):
        if self.world == 1:
            return self.n > 0
        import torch
        flag = torch.tensor([1 if self.n else 0], device=self.dev)
        self.dist.all_reduce(flag, op=self.dist.ReduceOp.MAX)
        return bool(flag.item())


class LossScaleLog:
    """The loss scale read back after every optimizer step (one host sync a step, as ampbench's read-back):
    a drop is a skipped step (an overflow event), a rise a growth; the record's mixed_precision section."""

    def __init__(self, scale):
        self.scale = self.min_scale = self.max_scale = scale
        self.growths = self.backoffs = 0
        self.events, self.changes = [], []

    def update(self, new, step, epoch, skipped=None):
        """the scale after optimizer step `step` (0-based, of the run) in epoch `epoch`; False where that
        step was skipped. skipped: None (a dynamic scaler: a drop of the scale is a skipped step) or whether a
        static scaler skipped it (StaticScaler.last_skipped: recorded with the scale before and after alike)"""
        old = self.scale
        took = True
        if skipped is not None:
            if skipped:
                self.events.append({"step": step, "epoch": epoch, "scale_before": old, "scale_after": new})
            return not skipped
        if new < old:
            took = False
            self.backoffs += 1
            self.events.append({"step": step, "epoch": epoch, "scale_before": old, "scale_after": new})
        elif new > old:
            self.growths += 1
        if new != old:
            self.changes.append({"step": step + 1, "scale": new})
        self.scale = new
        self.min_scale = min(self.min_scale, new)
        self.max_scale = max(self.max_scale, new)
        return took

    def mixed_precision_record(self, precision, init_scale, growth_factor, backoff_factor, growth_interval, epochs,
                   loss_scale="dynamic"):
        """the record's mixed_precision section; loss_scale: "dynamic" or the static scale (check_loss_scale's a.loss_scale)"""
        amp = precision == "amp"
        static = amp and loss_scale != "dynamic"
        rec = {"enabled": precision != "fp32", "dtype": {"amp": "fp16", "bf16": "bf16"}.get(precision, "none"),
               "dynamic": amp and not static,
               "loss_scale_mode": "static" if static else "dynamic" if amp else "none",
               "init_scale": float(loss_scale) if static else init_scale if amp else 1.0}
        if not static:  # a static scale has no growth or backoff
            rec.update({"growth_factor": growth_factor, "backoff_factor": backoff_factor,
                        "growth_interval": growth_interval})
        rec.update({"final_scale": self.scale, "skipped_steps": sum(x["skipped_steps"] for x in epochs),
                    "overflow_events": self.events,
                    "scale_history": {"min": self.min_scale, "max": self.max_scale,
                                      "growths": self.growths, "backoffs": self.backoffs,
                                      "changes": self.changes}})
        return rec


class EpochTally:
    """One epoch's bookkeeping in the training loops of cifar_resnet50.py and bert_glue.py (one copy, so the
    two report losses, counts and times alike and the scripts keep only their model's part).

    Losses: each step adds this rank's share of the step's world-mean loss (its loss sum over the step's n
    samples of all ranks), in float64 on the device: no host sync a step. A non-finite share counts as 0 and
    is left out of the count of finite steps, so one overflowed fp16 loss does not make a mean NaN. Two
    sums: the epoch's (train_loss) and the log interval's (log_point), summed over the ranks only there.
    Counters: steps, skipped (optimizer steps the scaler skipped), samples and timed_samples (the samples of
    the timed steps, for samples/s). Clock: an epoch starts timed once the run is past --timing-skip-steps;
    one that is not starts its clock afresh (t0, data seconds, events) after the step that reaches it, so a
    skipped step's time stays out of time_s and data_time_s. Data time: the host clock around the batch's
    gathering on the CPU, CUDA events on a GPU (read once, at the epoch's end)."""

    def __init__(self, dev, cuda, sync, step, timing_skip_steps):
        """dev, cuda: the device; sync: make_sync's; step: optimizer steps the run has done before the epoch"""
        import torch
        self.cuda, self.sync, self.timing_skip_steps = cuda, sync, timing_skip_steps
        self.loss_acc, self.finite_acc, self.ival_acc, self.ival_n = (
            torch.zeros((), device=dev, dtype=torch.float64) for _ in range(4))
        self.steps = self.skipped = self.samples = self.timed_samples = 0
        self.timing = step >= timing_skip_steps
        self.time_s = self.data_s = self.train_loss_mean = 0.0
        self._start_clock()

    def _start_clock(self):
        self.data_s, self.ev_pairs = 0.0, []
        self.sync()
        self.t0 = time.perf_counter()

    def data_begin(self):
        """before a batch is gathered: the mark data_end takes"""
        td = time.perf_counter()
        if not self.cuda:
            return td, None, None
        import torch
        eb, ee = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        eb.record()
        return td, eb, ee

    def data_end(self, mark):
        """after the batch is gathered: its time counts in a timed step"""
        td, eb, ee = mark
        if self.cuda:
            ee.record()
            if self.timing:
                self.ev_pairs.append((eb, ee))
        elif self.timing:
            self.data_s += time.perf_counter() - td

    def add(self, part, n, took, step):
        """a finished optimizer step: part, this rank's share of its world-mean loss (a 0-d float64 tensor);
        n, its samples over all ranks; took, False where the scaler skipped it; step, the run's optimizer steps
        with this one (the clock starts afresh once it reaches --timing-skip-steps)"""
        import torch
        fin = torch.isfinite(part)
        part = torch.where(fin, part, torch.zeros_like(part))
        self.loss_acc += part
        self.finite_acc += fin.double()
        self.ival_acc += part
        self.ival_n += fin.double()
        self.steps += 1
        self.skipped += not took
        self.samples += n
        if self.timing:
            self.timed_samples += n
        if not self.timing and step >= self.timing_skip_steps:
            self._start_clock()
            self.timing = True

    @staticmethod
    def _world_mean(acc, n, world, dist):
        """the world's sum of the shares over the finite steps' count (every rank counts each step): NaN
        where none was finite"""
        tot, cnt = world_sum([acc, n], world, dist)
        cnt /= world
        return tot / cnt if cnt > 0 else float("nan")

    def log_point(self, step, epoch, scale, curve, world, dist):
        """a log point (every --log-interval steps and at the epoch's last step), on every rank: the
        interval's world-mean loss, appended to curve as the loss curve's point {step, epoch, loss, scale};
        the next interval starts from nothing. Returns the mean."""
        mean = self._world_mean(self.ival_acc, self.ival_n, world, dist)
        curve.append({"step": step, "epoch": epoch, "loss": mean, "scale": scale})
        self.ival_acc.zero_()
        self.ival_n.zero_()
        return mean

    @staticmethod
    def progress_line(epoch, done, n_train, mean, took):
        """the line a log point prints every --log-interval steps: done of n_train samples of the epoch, the
        interval's mean loss, and whether the last step was skipped"""
        return "Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f%s" % (
            epoch, done, n_train, 100.0 * done / n_train, mean, "" if took else "\t(step skipped: gradient overflow)")

    def stop_clock(self):
        """the epoch's end (after its last step, before the evaluation): waits for the device; (time_s,
        data_s): the timed steps' seconds (0 where none was timed) and their data seconds (the events' on a
        GPU)"""
        self.sync()
        self.time_s = time.perf_counter() - self.t0 if self.timing else 0.0
        if self.cuda:
            self.data_s = sum(x.elapsed_time(y) for x, y in self.ev_pairs) * 1e-3
        return self.time_s, self.data_s

    def train_loss(self, world, dist):
        """the epoch's world-mean train loss, over its finite steps (every rank calls it)"""
        self.train_loss_mean = self._world_mean(self.loss_acc, self.finite_acc, world, dist)
        return self.train_loss_mean

    def epoch_record(self, epoch, eval_s, test_loss, test_acc, extra=None):
        """the record's epoch, after stop_clock and train_loss; extra: the peer's own fields after
        test_accuracy (bert_glue.py's test_metric)"""
        rec = {"epoch": epoch, "time_s": self.time_s, "compute_time_s": self.time_s - self.data_s,
               "data_time_s": self.data_s, "eval_time_s": eval_s, "steps": self.steps,
               "skipped_steps": self.skipped, "train_loss": self.train_loss_mean, "test_loss": test_loss,
               "test_accuracy": test_acc}
        rec.update(extra or {})
        rec.update({"samples": self.samples, "timed_samples": self.timed_samples})
        return rec

    def done_line(self, epoch, unit, test_loss, test_acc, scale, metric=""):
        """the line at an epoch's end; unit: what samples/s counts (images, samples); metric: the text after
        the test accuracy (bert_glue.py's task metric)"""
        return ("Epoch %d done: %.3f s, %.1f %s/s, train loss %.4f, test loss %.4f, test accuracy %.2f%%%s, "
                "skipped steps %d, loss scale %g" % (
                    epoch, self.time_s, self.timed_samples / self.time_s if self.time_s > 0 else 0.0, unit,
                    self.train_loss_mean, test_loss, test_acc, metric, self.skipped, scale))


# ---- memory ----

def proc_status_kb(key):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class MemoryMeter:
    """peak_memory_bytes. Made once the data set is resident: it reads VmRSS then and, on the CPU,
    resets VmHWM through /proc/self/clear_refs.
      cuda  torch.cuda.max_memory_allocated() less the resident data set.
      cpu   parameters + gradients + optimizer state + the most bytes autograd saved for one backward
            (saved_scope around each forward: torch.autograd.graph.saved_tensors_hooks, each storage
            once, the parameters' own left out): comparable with ampbench's tracked total, and
            activations = those saved bytes. The process's resident-set growth (VmHWM less VmRSS
            after the data set was loaded: allocator caches, oneDNN scratch, the Python heap) is kept
            apart as resident_set_growth."""

    def __init__(self, dev, cuda, resident_bytes):
        self.dev, self.cuda, self.resident_bytes = dev, cuda, resident_bytes
        self.rss_base_kb = proc_status_kb("VmRSS")
        self.hwm_reset = reset_peak_rss() if not cuda else False
        self.peak_rss_kb = 0
        self.saved_peak = 0  # the most bytes autograd saved for one backward (the CPU's comparable figure)

    def saved_scope(self, model):
        """Around a forward pass on the CPU: counts the tensors autograd saves for backward through
        torch.autograd.graph.saved_tensors_hooks, each storage once and the parameters' own not at all
        (they are counted as parameters), and keeps the largest such total. A no-op on a GPU, where
        max_memory_allocated measures."""
        import contextlib
        import torch
        if self.cuda:
            return contextlib.nullcontext()
        def storage(t):  # torch 2.x's untyped storage; torch 1.13's typed one says the same bytes
            return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()

        params = {storage(p).data_ptr() for p in model.parameters()}
        seen = {}

        def pack(t):
            st = storage(t)
            ptr = st.data_ptr()
            if ptr not in params and ptr not in seen:
                seen[ptr] = st.nbytes()
            return t

        @contextlib.contextmanager
        def scope():
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                yield
            self.saved_peak = max(self.saved_peak, sum(seen.values()))

        return scope()

    def read(self, model, opt):
        """(torch.cuda.max_memory_allocated or None on the CPU, the record's peak_memory_bytes)"""
        import torch
        p_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        opt_bytes = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                        if torch.is_tensor(t))
        if self.cuda:
            raw_peak = torch.cuda.max_memory_allocated(self.dev)
            total = raw_peak - self.resident_bytes
            method = ("torch.cuda.max_memory_allocated less the resident data set (%d bytes)" % self.resident_bytes)
        else:
            raw_peak = None
            hwm = proc_status_kb("VmHWM")
            if hwm is not None:
                self.peak_rss_kb = max(self.peak_rss_kb, hwm)
            rss = max(0, (self.peak_rss_kb - (self.rss_base_kb or 0)) * 1024) if self.rss_base_kb else 0
            if self.saved_peak > 0:
                total = 2 * p_bytes + opt_bytes + self.saved_peak
                method = ("cpu: parameters + gradients + optimizer state + the most bytes autograd saved for one "
                          "backward (saved_tensors_hooks, each storage once, the parameters' own left out): what a "
                          "GPU run holds beyond its allocator's slack, comparable with ampbench's tracked total; the "
                          "process's resident-set growth (allocator caches, oneDNN scratch, the Python heap) is "
                          "resident_set_growth, apart")
                mem = {"parameters": p_bytes, "master_weights": 0, "gradients": p_bytes, "optimizer_state": opt_bytes,
                       "activations": self.saved_peak, "workspace": 0, "total": total, "method": method,
                       "resident_set_growth": rss}
                return raw_peak, mem
            total = rss
            method = ("cpu: peak resident-set growth of the process (VmHWM%s minus VmRSS after the data set was "
                      "loaded): allocator caches, oneDNN scratch and the Python heap included; not comparable "
                      "with torch.cuda.max_memory_allocated or ampbench's tracked total"
                      % (" reset through /proc/self/clear_refs" if self.hwm_reset else
                         ", NOT reset: the peak may predate the run"))
        return raw_peak, {"parameters": p_bytes, "master_weights": 0, "gradients": p_bytes,
                          "optimizer_state": opt_bytes, "activations": max(0, total - 2 * p_bytes - opt_bytes),
                          "workspace": 0, "total": total, "method": method}


# ---- the record ----

def record_head(commit, started, complete, interrupted):
    return {"schema_version": 1, "tool": "pytorch", "git_commit": commit, "started_at": started,
            "complete": complete, "interrupted": interrupted}


def host_record(dev, cuda, blas, cpu=None):
    """the record's host; cpu (and device on the CPU) is cpu_model() unless given"""
    import torch
    if cpu is None:
        cpu = cpu_model()
    return {"hostname": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "threads": torch.get_num_threads(), "backend": dev.type,
            "device": torch.cuda.get_device_name(dev) if cuda else cpu, "blas": blas}


def blas_desc(cuda, lib, version):
    """"torch V, <lib> <version>" and cuDNN's version on cuda, whether oneDNN is there on the CPU"""
    import torch
    return "torch %s, %s %s%s" % (torch.__version__, lib, version,
                                  (", cuDNN %s" % torch.backends.cudnn.version()) if cuda else
                                  (", oneDNN %s" % ("on" if torch.backends.mkldnn.is_available() else "off")))


def run_totals(epochs, samples_key="timed_samples"):
    """epochs, total_time_s, samples_per_s (epochs' samples_key over their time_s), final_test_accuracy"""
    total_time = sum(x["time_s"] for x in epochs)
    samples = sum(x[samples_key] for x in epochs)
    return {"epochs": epochs, "total_time_s": total_time,
            "samples_per_s": samples / total_time if total_time > 0 else 0.0,
            "final_test_accuracy": epochs[-1]["test_accuracy"] if epochs else None}


def predictions_record(pred, gold, classes):
    """test_predictions as ampbench writes it (core/result.c): the last evaluation example by example,
    predicted class ids (a byte each, two little-endian past 256 classes) and a bitset of the right
    ones (bit i%8 of byte i/8), both base64; None when there was no evaluation"""
    import base64
    if not pred:
        return None
    w = 2 if classes > 256 else 1
    ids = bytes(pred) if w == 1 else b"".join(int(k).to_bytes(2, "little") for k in pred)
    bits = bytearray((len(pred) + 7) // 8)
    for i, (p_, g) in enumerate(zip(pred, gold)):
        if p_ == g:
            bits[i // 8] |= 1 << (i % 8)
    enc = ("base64; predicted: %s per example; correct: bit i%%8 of byte i/8" %
           ("uint16 little-endian" if w == 2 else "one byte"))
    return {"n": len(pred), "classes": classes, "encoding": enc,
            "predicted": base64.b64encode(ids).decode(), "correct": base64.b64encode(bytes(bits)).decode()}


def data_parallel_record(world, accum_steps, backend, peaks_per_rank, total, bucket_mb=25.0):
    """DDP always all-reduces its buckets while backward runs (overlap), bucket_cap_mb = bucket_mb: a ring
    (NCCL's, or gloo's), never a parameter server"""
    return {"world_size": world, "accum_steps": accum_steps, "allreduce_dtype": "fp32",
            "engine": "nccl" if backend == "nccl" else "none", "torch_backend": backend,
            "overlap": world > 1, "bucket_mb": bucket_mb, "sync": "ring", "ps_shards": 0,
            "peak_memory_bytes_per_rank": peaks_per_rank or [total]}


def add_fixed_recipe_args(ap, fixed):
    """The recipe options (`ampbench recipe --model M`, the registry's, which run_all.sh passes to both
    tools) that this peer does not vary: each is taken at the one value the peer trains with, and any
    other value is refused (check_fixed_recipe_args), so that a recipe it cannot follow never passes
    silently."""
    for name, value in fixed.items():
        ap.add_argument("--" + name, type=type(value), default=value,
                        help="%s only: this peer's fixed recipe (ampbench recipe)" % (value,))


def check_fixed_recipe_args(ap, a, fixed):
    for name, value in fixed.items():
        got = getattr(a, name.replace("-", "_"))
        if got != value:
            ap.error("--%s %s: this peer trains with %s only (its fixed recipe)" % (name, got, value))


def add_bucket_arg(ap):
    """--bucket-mb: DDP's bucket_cap_mb, the size of ampbench's --bucket-mb, so both tools' buckets match"""
    ap.add_argument("--bucket-mb", type=float, default=25.0,
                    help="DistributedDataParallel's bucket_cap_mb (ampbench's --bucket-mb)")


def gpu_record(dev, total_mem, free0, peak_used, resident_bytes, raw_peak):
    """the record's gpu: the device, its driver and the memory the run took (free0, total_mem: mem_get_info
    before the run; peak_used: the most in use seen at an epoch's end)"""
    import torch
    props = torch.cuda.get_device_properties(dev)
    try:
        drv = torch._C._cuda_getDriverVersion()
        drv = "%d.%d" % (drv // 1000, (drv % 1000) // 10)
    except Exception:  # noqa: BLE001
        drv = ""
    return {"name": props.name, "compute_capability": "%d.%d" % (props.major, props.minor),
            "driver_version": drv, "cuda_runtime_version": torch.version.cuda or "",
            "cublas_version": "", "cudnn_version": "cuDNN %s" % torch.backends.cudnn.version(),
            "memory_total_bytes": total_mem, "driver_used_bytes_before": total_mem - free0,
            "driver_used_bytes_peak": peak_used, "driver_used_bytes_by_run": peak_used - (total_mem - free0),
            "resident_data_bytes": resident_bytes, "cuda_graph": False,
            "torch_max_memory_allocated_bytes": raw_peak}


def finite_or_none(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite_or_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite_or_none(v) for v in x]
    return x


def write_text_atomic(path, text):
    """text and a newline to path through a temporary file and a rename"""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def write_atomic(path, rec):
    write_text_atomic(path, json.dumps(finite_or_none(rec), indent=2))  # JSON has no NaN


def finish_run(a, lead, world, dist, peak_total, record, write, interrupted):
    """The end of a run: every rank's peak (peak_total()) gathered under data parallelism, the record
    written (--out) or printed, the process group closed; the exit status (130 when interrupted)."""
    peaks = None
    if world > 1:
        mine = peak_total()
        peaks = [None] * world
        dist.all_gather_object(peaks, mine)
    write(not interrupted, interrupted, peaks)
    if a.out and lead and not a.quiet:
        print("result: %s%s" % (a.out, " (interrupted)" if interrupted else ""))
    if a.out == "" and lead:
        print(json.dumps(finite_or_none(record(not interrupted, interrupted, peaks)), indent=2))
    if world > 1:
        dist.destroy_process_group()
    return 130 if interrupted else 0


def run_main(prog, main):
    """sys.exit(main()); a Ctrl-C outside the training loop exits 130 with one line"""
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before training started, or a second Ctrl-C outside the loop
        print("%s: interrupted" % prog, file=sys.stderr)
        sys.exit(130)
