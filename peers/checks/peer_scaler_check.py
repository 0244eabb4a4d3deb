#!/usr/bin/env python3
"""The PyTorch peers' static loss scale (peers/peer_common.py) against plain fp32 training:
StaticScaler at S = 1024 and S = 1 gives the gradients of an unscaled backward (S a power of two: the
same bits), takes clean steps like opt.step(), skips a step whose gradients hold an inf or a NaN with
every weight unchanged and its S unchanged, and LossScaleLog records that step as an overflow event with
the same scale before and after; the amp record says "static" and keeps no growth options;
check_loss_scale refuses what ampbench refuses, in the same words. fp32 on the CPU (PyTorch 1.13
autocasts only to bf16 there): the scaler's arithmetic is on fp32 gradients in amp too.
Exit 77 (skipped) where PyTorch is not importable."""
import argparse
import io
import os
import sys
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import peer_common as pc  # noqa: E402

try:
    import torch
except ImportError as e:
    print("SKIPPED: no PyTorch (%s)" % e)
    sys.exit(77)

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        print("FAIL: %s" % msg, file=sys.stderr)
        failures += 1


def model_and_batch(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    return m, x, y


def train(scale, steps=4, inject=None):
    """(weights after each step, took per step, LossScaleLog); scale None: plain fp32 training"""
    m, x, y = model_and_batch(7)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = pc.StaticScaler(scale) if scale is not None else None
    log = pc.LossScaleLog(scaler.get_scale() if scaler else 1.0)
    weights, took_all, grads = [], [], []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        if scaler:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if step == inject:
            m[0].weight.grad[1, 2] = float("inf") if step % 2 else float("nan")
        if scaler:
            scaler.unscale_(opt)
            grads.append([p.grad.clone() for p in m.parameters()])
            scaler.step(opt)  # after unscale_: not unscaled twice
            scaler.update()
            took = log.update(scaler.get_scale(), step, 1, scaler.last_skipped)
        else:
            grads.append([p.grad.clone() for p in m.parameters()])
            opt.step()
            took = True
        took_all.append(took)
        weights.append([p.detach().clone() for p in m.parameters()])
    return weights, took_all, grads, log


def same(a, b):
    return all(torch.equal(u, v) for u, v in zip(a, b))


ref_w, _, ref_g, _ = train(None)
for s in (1024.0, 1.0):
    w, took, g, log = train(s)
    check(all(took) and not log.events, "S=%g: clean steps skipped: %s" % (s, took))
    check(same(g[0], ref_g[0]), "S=%g: the first step's unscaled gradients differ from fp32's" % s)
    check(all(same(a, b) for a, b in zip(w, ref_w)), "S=%g: weights differ from plain fp32 training" % s)
    for inject in (1, 2):  # an inf at step 1, a NaN at step 2
        w, took, g, log = train(s, inject=inject)
        check(took == [k != inject for k in range(4)], "S=%g, bad gradient at %d: took %s" % (s, inject, took))
        check(same(w[inject], w[inject - 1]), "S=%g: weights moved in the skipped step %d" % (s, inject))
        check(not same(w[inject + 1], w[inject]), "S=%g: the clean step after the skipped one did not step" % s)
        check(log.events == [{"step": inject, "epoch": 1, "scale_before": s, "scale_after": s}],
              "S=%g: events %s" % (s, log.events))
        check(log.scale == s and not log.changes and log.backoffs == 0 and log.growths == 0,
              "S=%g: the scale moved: %s %s" % (s, log.scale, log.changes))
        epochs = [{"skipped_steps": took.count(False)}]
        rec = log.mixed_precision_record("amp", 65536.0, 2.0, 0.5, 2000, epochs, s)
        check(rec["loss_scale_mode"] == "static" and rec["dynamic"] is False and rec["init_scale"] == s
              and rec["final_scale"] == s and rec["skipped_steps"] == 1 and "growth_interval" not in rec,
              "S=%g: amp record %s" % (s, rec))
dyn = pc.LossScaleLog(65536.0).mixed_precision_record("amp", 65536.0, 2.0, 0.5, 2000, [{"skipped_steps": 0}])
check(dyn["loss_scale_mode"] == "dynamic" and dyn["dynamic"] is True and dyn["growth_interval"] == 2000,
      "dynamic amp record %s" % dyn)
off = pc.LossScaleLog(1.0).mixed_precision_record("fp32", 65536.0, 2.0, 0.5, 2000, [{"skipped_steps": 0}])
check(off["loss_scale_mode"] == "none" and off["dynamic"] is False, "fp32 amp record %s" % off)

# the option: ampbench's messages, exit 2
cases = [("12abc", "amp", [], "--loss-scale: '12abc' is neither dynamic nor a number"),
         ("0", "amp", [], "--loss-scale: '0' is not a positive finite scale (or dynamic)"),
         ("-1", "amp", [], "--loss-scale: '-1' is not a positive finite scale (or dynamic)"),
         ("nan", "amp", [], "--loss-scale: 'nan' is not a positive finite scale (or dynamic)"),
         ("inf", "amp", [], "--loss-scale: 'inf' is not a positive finite scale (or dynamic)"),
         ("1e-9", "amp", [], "--loss-scale: '1e-9' is below 2^-24"),
         ("1024", "fp32", [], "--loss-scale 1024: a static loss scale needs --precision amp (fp32 trains without"),
         ("8", "amp", ["--growth-interval=5"], "--loss-scale 8 is static: --growth-interval belongs to the dynamic")]
for v, prec, argv, want in cases:
    a = argparse.Namespace(loss_scale=v, precision=prec)
    err = io.StringIO()
    code = None
    with redirect_stderr(err):
        try:
            pc.check_loss_scale("peer", a, argv)
        except SystemExit as e:
            code = e.code
    check(code == 2 and err.getvalue().startswith("peer: " + want) and err.getvalue().count("\n") == 1,
          "--loss-scale %s (%s %s): exit %s, %r" % (v, prec, argv, code, err.getvalue()))
for v, want in (("dynamic", "dynamic"), ("1", 1.0), ("1024", 1024.0), ("0.5", 0.5)):
    a = argparse.Namespace(loss_scale=v, precision="amp")
    pc.check_loss_scale("peer", a, [])
    check(a.loss_scale == want, "--loss-scale %s read as %r" % (v, a.loss_scale))

print("peer_scaler_check: %d failures" % failures)
sys.exit(1 if failures else 0)
