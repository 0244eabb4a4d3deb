#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs (tests/fuzz/seeds/<target>/): small valid files, the same
bytes each time (gzip with mtime 0), so the committed seeds can be regenerated and compared.
Regression inputs (seeds/<target>/regress-*) are kept as they are."""
import gzip
import json
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(here, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def idx(code, dims, payload):
    """IDX: 0x0000 0x08 ndim, big-endian dims, unsigned bytes"""
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(payload)


# IDX: two 6x5 images (rows != cols, to tell them apart) and their two labels; raw, gzip, and as
# images + labels pairs end to end (the way fuzz_idx cuts an input for ab_mnist_load).
images = idx(0x08, [2, 6, 5], [(7 * i + 3) % 256 for i in range(2 * 6 * 5)])
labels = idx(0x08, [2], [3, 9])
put("fuzz_idx", "images-raw.idx", images)
put("fuzz_idx", "labels-raw.idx", labels)
put("fuzz_idx", "images.idx.gz", gz(images))
put("fuzz_idx", "labels.idx.gz", gz(labels))
put("fuzz_idx", "pair-raw.idx", images + labels)
put("fuzz_idx", "pair.idx.gz", gz(images) + gz(labels))
put("fuzz_idx", "four-dims.idx", idx(0x08, [1, 2, 2, 3], range(12)))

# CIFAR-10: three records (label byte, 3,072 pixel bytes).
cifar = b""
for label in (0, 9, 3):
    cifar += bytes([label]) + bytes((label * 31 + i) % 256 for i in range(3072))
put("fuzz_cifar10", "three-records.bin", cifar)


def safetensors(tensors, metadata):
    """tensors: (name, dtype, shape, bytes) in buffer order; header padded with spaces to 8 bytes"""
    header, buf = {"__metadata__": metadata}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buf), len(buf) + len(data)]}
        buf += data
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + buf


put("fuzz_safetensors", "f32-f16-i64.safetensors", safetensors([
    ("weight", "F32", [2, 3], struct.pack("<6f", 1.0, -2.5, 0.0, 3.25, 1e-3, -7.0)),
    ("bias", "F16", [3], struct.pack("<3e", 0.5, -1.0, 65504.0)),
    ("steps", "I64", [2], struct.pack("<2q", 7, -1)),
], {"format": "pt"}))
put("fuzz_safetensors", "bf16-f64-u8-empty.safetensors", safetensors([
    ("a.bf16", "BF16", [2, 2], bytes([0x80, 0x3f, 0x00, 0xc0, 0x80, 0x7f, 0xc0, 0x7f])),
    ("b.f64", "F64", [1], struct.pack("<d", 3.5e38)),
    ("c.empty", "F32", [0, 4], b""),
    ("d.u8", "U8", [3], bytes([1, 2, 255])),
    ("e.bool", "BOOL", [], bytes([1])),
], {}))
# the most dimensions the reader takes (AB_ST_MAX_DIMS = 8): one more is the limit's error path
put("fuzz_safetensors", "eight-dims.safetensors", safetensors([
    ("x", "F32", [1, 1, 1, 1, 1, 1, 1, 2], struct.pack("<2f", 0.25, -0.0)),
], {"format": "pt"}))

# fuzz_checkpoint: state.json of a 2-rank run of 3 epochs (the target's keys), one mid-epoch with
# a scaler history, a census record and a curve; one at the run's end
def ckpt_state(epoch, epoch_step, step, n_epochs, census):
    ep = lambda e, steps: {"epoch": e, "time_s": 1.5, "compute_time_s": 1.25, "data_time_s": 0.25,
                           "eval_time_s": 0.5, "steps": steps, "skipped_steps": 1 if e == 1 else 0,
                           "clipped_steps": 0, "samples": steps * 64, "timed_samples": steps * 64,
                           "train_loss": 0.75, "test_loss": "nan", "test_accuracy": 91.5, "test_metric": 91.5}
    listed = epoch if epoch_step > 0 else n_epochs
    return json.dumps({
        "format": "ampbench-checkpoint", "version": 1,
        "keys": {"model": "fuzz", "world_size": "2", "epochs": "3"},
        "position": {"step": step, "epoch": epoch, "epoch_step": epoch_step, "epoch_samples": epoch_step * 64,
                     "shuffle_seed": "%016x" % (1000003 + epoch), "augment_seed": "9e3779b97f4a7c14",
                     "next_lr": 0.025},
        "ranks": [{"passes": step, "batches_tracked": step, "peak_memory_bytes": 1048576},
                  {"passes": step, "batches_tracked": step, "peak_memory_bytes": 1048000}],
        "optimizer": {"steps": step - 1, "state": "momentum_buffer"},
        "scaler": {"scale": 32768, "tracker": 3, "min_scale": 32768, "max_scale": 65536, "growths": 0,
                   "backoffs": 1, "skipped": 1,
                   "events": [{"step": 2, "epoch": 1, "scale_before": 65536, "scale_after": 32768}],
                   "changes": [{"step": 0, "scale": 65536}, {"step": 3, "scale": 32768}]},
        "tally": {"loss_sum": 1.25, "interval_sum": 0.5, "finite_steps": 2, "interval_n": 1,
                  "time_s": 0.75, "data_s": "inf"},
        "record": {"started_at": "2026-12-04T20:00:00Z", "weights_from": "initialised (seed 1)",
                   "n_epochs": n_epochs, "epochs": [ep(e + 1, 10) for e in range(listed)],
                   "curve": [[5, 1, 2.25, 65536], [10, 1, "nan", 32768]],
                   "census": census, "n_test_pred": 0, "n_classes": 10, "comm_time_s": 0.125,
                   "allreduce_time_s": 0.0625, "allreduce_busy_s": 0.125, "bytes_allreduced": 8192, "allreduce_calls": 4,
                   "peak_memory_bytes": [1, 2, 3, 4, 5, 6, 7], "peak_total_bytes": 21, "peak_all_bytes": 28,
                   "resumed_at": [10]},
        "files": {"weights.safetensors": {"bytes": 8, "crc32": "00000000"},
                  "state.safetensors": {"bytes": 8, "crc32": "00000000"}}}, indent=1).encode()


census = [{"step": 1, "loss_scale": 65536, "tensors": [
    {"name": "fc.weight", "kind": 0, "dtype": 1, "n": 100, "zeros": 2, "nonfinite": 0,
     "hist": [0] * 40 + [98] + [0] * 39}]}]
put("fuzz_checkpoint", "mid-epoch.json", ckpt_state(2, 4, 14, 1, census))
put("fuzz_checkpoint", "end.json", ckpt_state(4, 0, 30, 3, []))
