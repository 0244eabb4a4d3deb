#!/usr/bin/env python3
"""README's claims table against the files its footnotes name. Each figure of the "measured here"
column is computed here from the committed records (or read from the REPORT.md the harness wrote
from them) and formatted with README's rounding; the test fails when README does not hold that text
in the claim's row, when a footnoted file is missing, or when a number in a row's measured cell is
covered by no computed figure (so a changed digit cannot pass as an uncovered number). It then
changes every digit of every number in the measured cells, one at a time, and requires each change
to fail the check. README's CPU speed tables (the Zen 5 and Zen 4 EPYC sets) are checked cell by
cell against the bench outputs they were copied from (bench/cpu_mlp.sh's, cpu_resnet.sh's and
cpu_bert.sh's), and every digit of them changed in turn must fail that check too.
Usage: readme_figures.py REPO_ROOT [README]   (README defaults to REPO_ROOT/README.md)"""
import json
import math
import os
import re
import statistics
import sys

root = sys.argv[1]
readme_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "README.md")
R = os.path.join(root, "results", "cpu", "2026-12-02-epyc-2core")
failures = []


def fail(msg):
    failures.append(msg)


def load(*parts, base=R):
    path = os.path.join(base, *parts)
    if not os.path.isfile(path):
        fail("footnoted file missing: %s" % os.path.relpath(path, root))
        return None
    with open(path) as f:
        return json.load(f) if path.endswith(".json") else f.read()


# ---- formatting, as README writes figures ----
def mb(b):
    return "{:,}".format(int(round(b / 1e6)))


def pct1(x):
    return "%.1f%%" % x


def peak(r):
    return r["peak_memory_bytes"]["total"]


def sps(r):
    return r["samples_per_s"]


def modelled_saving(f, a):
    """the step model's AMP time saving per sample (step_model of both records, one GPU)"""
    def per_sample(r):
        w = r["workload"]
        if r.get("step_model", {}).get("gpu") != "rtx3090":
            fail("%s: no step_model on the rtx3090" % w.get("model"))
            return math.nan
        return r["step_model"]["step_time_s"] / (w["batch_size"] * w.get("accum_steps", 1) * r.get("world_size", 1))
    return 100 * (1 - per_sample(a) / per_sample(f))


def proj(r, n, kind, source="modelled:rtx3090"):
    """the projection point (n, kind) of record r, whose step must be the one source names (None: any)"""
    if source and r["projection"].get("step_source") != source:
        fail("%s: the projection's step is %s, not the one modelled on the rtx3090" % (
            r.get("workload", {}).get("model"), r["projection"].get("step_source")))
    for p in r["projection"]["points"]:
        if p["n"] == n and p.get("kind", "gpus") == kind:
            return p
    fail("no %d-%s projection point in %s" % (n, kind, r.get("workload", {}).get("model")))
    return {"speedup": math.nan}


def mean_sd(records):
    acc = [r["final_test_accuracy"] for r in records]
    return statistics.mean(acc), statistics.stdev(acc)


def report_interval(report, label):
    """the interval cell of REPORT.md's difference row named label"""
    m = re.search(r"\n\| %s \|[^\n]*\| ([+-]\d+\.\d\d) \| (\[[^\]]+\]) \|" % re.escape(label), report or "")
    if not m:
        fail("REPORT.md has no '%s' row" % label)
        return ("?", "?")
    return m.group(1), m.group(2)


def seed_figures(acc, report):
    """(FP32 mean, sd, AMP mean, sd, peer FP32 mean, sd) over the three seeds, and REPORT.md's AMP - FP32
    and ampbench - peer rows (difference, interval)"""
    f = mean_sd([acc[("fp32", 0, s)] for s in (1, 2, 3)])
    a = mean_sd([acc[("amp", 0, s)] for s in (1, 2, 3)])
    p = mean_sd([acc[("fp32", 1, s)] for s in (1, 2, 3)])
    return f + a + p, report_interval(report, "ampbench AMP - FP32"), report_interval(report, "FP32: ampbench - pytorch")


def grad_paragraph(report, model):
    """the numbers of a workload's 'What it means: in the FP32 run, ...' paragraph in grad-range's REPORT"""
    sec = re.search(r"\n## [^\n]*\(`%s`\)\n(.*?)(?=\n## |\Z)" % re.escape(model), report or "", re.S)
    m = sec and re.search(r"What it means: in the FP32 run, ([\d.]+)% of the non-zero activation gradients .*?"
                          r"against ([\d.]+)% at step 1; ([\d.]+)% more", sec.group(1), re.S)
    acc = sec and re.search(r"the run ends at ([\d.]+)% test accuracy and train loss [\d.]+, against ([\d.]+)%",
                            sec.group(1))
    sub = sec and re.search(r"AMP's dynamic scale \(\d+ at that census\) leaves [\d.]+% of its stored activation "
                            r"gradients in the flush range and ([\d.]+)% subnormal", sec.group(1))
    if not m or not acc or not sub:
        fail("grad-range REPORT.md: no FP32 paragraph for %s" % model)
        return None
    return [float(m.group(k)) for k in (1, 2, 3)] + [float(acc.group(1)), float(acc.group(2)), float(sub.group(1))]


# ---- the records ----
R4 = os.path.join(root, "results", "cpu", "2026-12-04-epyc-2core")
quick = {n: load("run_all-quick", n + ".json", base=R4) for n in (
    "resnet50-fp32", "resnet50-amp", "resnet50-dp-amp", "resnet50-cifar-fp32", "resnet50-cifar-amp",
    "resnet50-cifar-dp-amp", "bert-base-fp32", "bert-base-amp", "bert-base-dp-amp")}
fits = {(s, p): load("bert_fit_map", "fit-%d-%s.json" % (s, p)) for s in (128, 256, 512) for p in ("fp32", "amp")}
acc_r = {(p, t, s): load("accuracy-resnet50-converged", "resnet50-%s%s-s%d.json" % (p, "-pytorch" if t else "", s),
                         base=R4)
         for p, t in (("fp32", 0), ("amp", 0), ("fp32", 1)) for s in (1, 2, 3)}
acc_b = {(p, t, s): load("accuracy-bert", "bert-%s%s-s%d.json" % (p, "-pytorch" if t else "", s))
         for p, t in (("fp32", 0), ("amp", 0), ("fp32", 1)) for s in (1, 2, 3)}
rep_r = load("accuracy-resnet50-converged", "REPORT.md", base=R4)
rep_b = load("accuracy-bert", "REPORT.md")
rep_g = load("grad-range", "REPORT.md")
with open(os.path.join(root, "harness", "reported.json")) as f:
    reported = json.load(f)
claim = {c["id"]: c for c in reported["claims"]}
band = claim["resnet50.amp_accuracy_delta"]


def band_text():
    return "the articles' %g to %+g" % (band["value"], band["value_max"])


def width_text(iv):
    lo, hi = (float(x) for x in iv.strip("[]").split(","))
    return "too wide to tell 1 point from 0" if hi - lo >= 1 else "narrow enough to tell 1 point from 0"
if failures:
    print("\n".join("FAIL " + f for f in failures), file=sys.stderr)
    sys.exit(1)

q = quick
figs = {}  # row key -> list of README texts computed here


def add(row, *texts):
    figs.setdefault(row, []).extend(texts)


# ResNet-50 time: AMP's time over FP32's for the same work = FP32 samples/s over AMP's
add("ResNet-50, CIFAR-10: AMP time saving",
    "%.2fx (CIFAR stem)" % (sps(q["resnet50-cifar-fp32"]) / sps(q["resnet50-cifar-amp"])),
    "%.2fx (torchvision stem)" % (sps(q["resnet50-fp32"]) / sps(q["resnet50-amp"])),
    "**modelled** on an RTX 3090: %.1f%% (CIFAR stem), %.1f%% (torchvision stem)" % (
        modelled_saving(q["resnet50-cifar-fp32"], q["resnet50-cifar-amp"]),
        modelled_saving(q["resnet50-fp32"], q["resnet50-amp"])))
# memory
for stem, tag, bold in (("resnet50-cifar", "with the CIFAR stem", True), ("resnet50", "with torchvision's stem", False)):
    f, a = peak(q[stem + "-fp32"]), peak(q[stem + "-amp"])
    s = pct1(100 * (1 - a / f))
    add("ResNet-50: AMP peak-memory saving", "%s %s (%s -> %s MB)" % ("**%s**" % s if bold else s, tag, mb(f), mb(a)))
add("ResNet-50: AMP peak-memory saving", "batch %d" % q["resnet50-fp32"]["workload"]["batch_size"])
# accuracy, ResNet-50 (3 seeds)
(fm, fs, am, as_, pm, ps), (d_amp, iv_amp), (d_tools, iv_tools) = seed_figures(acc_r, rep_r)
w = acc_r[("fp32", 0, 1)]["workload"]
add("ResNet-50: AMP accuracy delta",
    "%d epochs on the %s-image training subset" % (w["epochs"], "{:,}".format(w["train_samples"])),
    "%d seeds" % 3,
    "FP32 %.2f ± %.2f%%, AMP %.2f ± %.2f%%: AMP - FP32 %s points, 95%% interval %s" % (fm, fs, am, as_, d_amp, iv_amp),
    "the AMP seeds spread %.2f%% to %.2f%%" % (min(acc_r[("amp", 0, s)]["final_test_accuracy"] for s in (1, 2, 3)),
                                               max(acc_r[("amp", 0, s)]["final_test_accuracy"] for s in (1, 2, 3))),
    "PyTorch's FP32 at the same recipe %.2f ± %.2f%%: ampbench %s points, %s" % (pm, ps, d_tools, iv_tools),
    "more than the 1.5 points" if abs(float(d_tools)) > 1.5 else "within the 1.5 points",
    band_text(), width_text(iv_amp),
    "the 10% of chance",
    "%d epochs' %g%%" % (reported["workloads"]["resnet50"]["epochs"], claim["resnet50.fp32.accuracy"]["value"]))
# 4 GPUs (projected) and 2 CPU ranks (measured)
add("ResNet-50: 4 GPUs over one AMP GPU",
    "%.2fx (torchvision stem), %.2fx (CIFAR stem) **projected** from the step modelled on an RTX 3090, over a "
    "PCIe-class %.0f GB/s link" % (
        proj(q["resnet50-amp"], 4, "gpus")["speedup"], proj(q["resnet50-cifar-amp"], 4, "gpus")["speedup"],
        proj(q["resnet50-amp"], 4, "gpus")["bandwidth_Bps"] / 1e9),
    "needs 4 GPUs",
    "2 CPU ranks: %.2fx and %.2fx" % (sps(q["resnet50-dp-amp"]) / sps(q["resnet50-amp"]),
                                     sps(q["resnet50-cifar-dp-amp"]) / sps(q["resnet50-cifar-amp"])))
# BERT-base fits (fit map)
lim = fits[(128, "fp32")]["memory_limit_bytes"]
add("BERT-base: FP32 fits an 8 GB GPU",
    "fits up to batch %d, %d and %d in %d GiB at sequence 128, 256 and 512" % (
        fits[(128, "fp32")]["max_batch"], fits[(256, "fp32")]["max_batch"], fits[(512, "fp32")]["max_batch"],
        lim // 2**30))
# [f]: both tools' comparable totals at batch 32
bm = {n: load("bert-base-memory", n + ".json", base=R4) for n in ("bert-base-fp32", "bert-base-fp32-pytorch")}
pfit = {s: load("bert-base-memory", "fit-%d-fp32-pytorch.json" % s, base=R4) for s in (128, 256, 512)}
if all(bm.values()) and all(pfit.values()):
    pt, ab = bm["bert-base-fp32-pytorch"], bm["bert-base-fp32"]
    cap = pt["memory_limit_bytes"]
    for s_, f_ in pfit.items():
        if f_.get("tool") != "pytorch-fit" or f_["memory_limit_bytes"] != cap or f_["max_seq_len"] != s_:
            fail("fit-%d-fp32-pytorch.json is not the peer's fit under the same cap" % s_)
    add("BERT-base: FP32 fits an 8 GB GPU",
        "ampbench holds %s MB at batch %d and sequence %d" % (mb(peak(ab)), ab["workload"]["batch_size"],
                                                             ab["workload"]["max_seq_len"]),
        "PyTorch's autograd holds %s MB at batch %d and fits up to %d, %d and %d, %s %d GiB" % (
            mb(peak(pt)), pt["workload"]["batch_size"], pfit[128]["max_batch"], pfit[256]["max_batch"],
            pfit[512]["max_batch"], "also within" if peak(pt) <= cap and peak(ab) <= cap else "not both within",
            cap // 2**30),
        "resident set grew %s MB" % mb(pt["peak_memory_bytes"]["resident_set_growth"]))
ratios = [fits[(s, "amp")]["max_batch"] / fits[(s, "fp32")]["max_batch"] for s in (128, 256, 512)]
f, a = peak(q["bert-base-fp32"]), peak(q["bert-base-amp"])
add("BERT-base: AMP fits, with a larger batch",
    "%d, %d and %d (%.2fx to %.2fx FP32's)" % (fits[(128, "amp")]["max_batch"], fits[(256, "amp")]["max_batch"],
                                               fits[(512, "amp")]["max_batch"], min(ratios), max(ratios)),
    "%s less memory at batch %d (%s -> %s MB)" % (pct1(100 * (1 - a / f)), q["bert-base-fp32"]["workload"]["batch_size"],
                                                mb(f), mb(a)))
add("BERT-base: AMP epoch-time saving",
    "AMP took %.2fx the FP32 time" % (sps(q["bert-base-fp32"]) / sps(q["bert-base-amp"])),
    "**modelled** on an RTX 3090: %.1f%%" % modelled_saving(q["bert-base-fp32"], q["bert-base-amp"]))
pn = proj(q["bert-base-amp"], 4, "nodes")
add("BERT-base: 4 nodes over one",
    "%.1f%% less **projected** (%.2fx) from the step modelled on an RTX 3090, over a %.1f GB/s network" % (
        100 * (1 - 1 / pn["speedup"]), pn["speedup"], pn["bandwidth_Bps"] / 1e9), "needs 4 GPUs",
    "2 CPU ranks: %.1f%% less" % (100 * (1 - sps(q["bert-base-amp"]) / sps(q["bert-base-dp-amp"]))))
# gradient underflow (grad-range REPORT.md)
g = {m: grad_paragraph(rep_g, m) for m in ("bert", "resnet50", "resnet50-cifar", "bert-base", "mlp")}
if all(g.values()):
    add("Gradient underflow",
        "at scale 1 fp16 would flush %.1f%% of BERT fine-tuning's non-zero activation gradients (%.1f%% at step 1; "
        "%.0f%% more subnormal)" % (g["bert"][0], g["bert"][1], g["bert"][2]),
        "%.1f%% of ResNet-50's (%.2f%% at step 1)" % (g["resnet50"][0], g["resnet50"][1]),
        "%.1f%% with the CIFAR stem" % g["resnet50-cifar"][0], "%.1f%% of BERT-base's" % g["bert-base"][0],
        "%.1f%% of the MLP's" % g["mlp"][0],
        "up to %.1f%% stay subnormal" % max(v[5] for v in g.values()),
        "BERT (MiniLM, one epoch) %.2f%% vs %.2f%% with it" % (g["bert"][3], g["bert"][4]),
        "ResNet-50 %.2f%% vs %.2f%% (2 epochs, one seed)" % (g["resnet50"][3], g["resnet50"][4]),
        "MLP %.2f%% vs %.2f%%" % (g["mlp"][3], g["mlp"][4]),
        "with the CIFAR stem it came out lower, %.2f%% vs %.2f%%" % (g["resnet50-cifar"][3], g["resnet50-cifar"][4]))
# BERT accuracy (3 seeds)
(fm, fs, am, as_, pm, ps), (d_amp, iv_amp), (d_tools, iv_tools) = seed_figures(acc_b, rep_b)
wb = acc_b[("fp32", 0, 1)]["workload"]
add("BERT: AMP trains as well as FP32",
    "on %s SST-2 rows, one epoch, 3 seeds" % "{:,}".format(wb["train_samples"]),
    "FP32 %.2f ± %.2f%%, AMP %.2f ± %.2f%%" % (fm, fs, am, as_),
    "AMP - FP32 %s points, 95%% interval %s" % (d_amp, iv_amp), width_text(iv_amp),
    "%d dev rows" % wb["test_samples"],
    "Hugging Face's FP32 %.2f ± %.2f%% (ampbench %s points, %s, %s the 1.5 points checked)" % (
        pm, ps, d_tools, iv_tools, "more than" if abs(float(d_tools)) > 1.5 else "within"),
    "all-MiniLM-L6-v2")

# the MNIST MLP table (its own run folder, named in the paragraph above the table)
mlp = {n: load("run_all-mlp", n + ".json", base=R4)
       for n in ("mlp-fp32", "mlp-amp", "mlp-dp-amp", "mlp-fp32-pytorch", "mlp-amp-pytorch")}
mlp_figs = {}
if all(mlp.values()):
    f32, a16, dp = mlp["mlp-fp32"], mlp["mlp-amp"], mlp["mlp-dp-amp"]
    pf, pa = mlp["mlp-fp32-pytorch"], mlp["mlp-amp-pytorch"]
    mlp_figs["AMP time saving vs FP32"] = [
        "%s (%s -> %s samples/s" % (pct1(100 * (1 - sps(f32) / sps(a16))), "{:,}".format(round(sps(f32))),
                                    "{:,}".format(round(sps(a16)))),
        "fp16", "PyTorch %s" % ".".join(pf["host"]["blas"].split()[1].split(".")[:2]),
        "%s samples/s in FP32, %s in AMP" % ("{:,}".format(round(sps(pf))), "{:,}".format(round(sps(pa)))),
        "autocast to fp16"]
    mlp_figs["AMP peak-memory saving"] = [
        "%s (%.2f -> %.2f MB" % (pct1(100 * (1 - peak(a16) / peak(f32))), peak(f32) / 1e6, peak(a16) / 1e6), "fp32",
        "fp16"]
    mlp_figs["AMP accuracy delta"] = [
        "%+.2f (%.2f%% -> %.2f%%, one seed" % (a16["final_test_accuracy"] - f32["final_test_accuracy"],
                                              f32["final_test_accuracy"], a16["final_test_accuracy"]),
        "%d overflow steps skipped" % a16["mixed_precision"]["skipped_steps"],
        "PyTorch %.2f%% FP32, %.2f%% AMP" % (pf["final_test_accuracy"], pa["final_test_accuracy"])]
    mlp_figs["data-parallel AMP speed-up over one AMP device"] = [
        "%.2fx with %d CPU ranks (measured)" % (sps(dp) / sps(a16), dp["world_size"]),
        "%.2fx for 4 GPUs **projected** from the step modelled on an RTX 3090" % proj(a16, 4, "gpus")["speedup"],
        "the AMP step **modelled** there: %s ms, against %s ms in FP32" % (
            "%.3f" % (1e3 * a16["step_model"]["step_time_s"]), "%.3f" % (1e3 * f32["step_model"]["step_time_s"]))]

# ---- README's tables ----
NUM = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")


TABLES = (("| claim of the articles |", figs), ("| MNIST MLP 784-256-10 |", mlp_figs))


def table_rows(text, header="| claim of the articles |"):
    start = text.find(header)
    if start < 0:
        return None, start
    rows = {}
    for line in text[start:text.index("\n\n", start)].split("\n")[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows, start


def check(text):
    """the failures of README text against the figures computed from the files"""
    out = []
    for header, table_figs in TABLES:
        out += check_table(text, header, table_figs)
    return out


def check_table(text, header, figs):
    out = []
    rows, _ = table_rows(text, header)
    if rows is None:
        return ["README.md has no table headed '%s'" % header]
    for key, texts in figs.items():
        row = next((c for k, c in rows.items() if k.startswith(key)), None)
        if row is None or len(row) < 3:
            out.append("README's claims table has no row '%s'" % key)
            continue
        cell = row[2]
        covered = [False] * len(cell)
        for t in texts:
            i = cell.find(t)
            if i < 0:
                out.append("row '%s': README lacks '%s' (computed from the files)" % (key, t))
                continue
            while i >= 0:
                for k in range(i, i + len(t)):
                    covered[k] = True
                i = cell.find(t, i + 1)
        for m in NUM.finditer(cell):
            if not all(covered[m.start():m.end()]):
                out.append("row '%s': README's number '%s' is covered by no figure computed from the files" %
                           (key, m.group()))
    for k in rows:
        if not any(k.startswith(key) for key in figs):
            out.append("README's row '%s' has no figures checked here" % k)
    return out


with open(readme_path) as f:
    readme = f.read()
failures += check(readme)
n = sum(len(t) for _, tf in TABLES for t in tf.values())
print("readme_figures: %d figures in %d rows of %d tables checked against the files" %
      (n, sum(len(tf) for _, tf in TABLES), len(TABLES)))

def mutate_digits(line_at, line, lo, hi, checker):
    """changes every digit of every number in line[lo:hi] (README's line at line_at) by one, in turn,
    and counts those changes that checker (README text -> failures) lets pass: (digits, unnoticed).
    The digits of names such as fp16 or MiniLM-L6-v2 are left alone."""
    n = unnoticed = 0
    for m in NUM.finditer(line[lo:hi]):
        for i in range(lo + m.start(), lo + m.end()):
            if not line[i].isdigit():
                continue
            n += 1
            at = line_at + i
            if not checker(readme[:at] + str((int(readme[at]) + 1) % 10) + readme[at + 1:]):
                unnoticed += 1
                failures.append("changing the digit at '%s' goes unnoticed" % line[max(lo, i - 20):i + 20])
    return n, unnoticed


# Every digit of every number in a measured cell, changed by one, must make the check fail.
digits = missed = 0
for header, table_figs in TABLES:
    rows, start = table_rows(readme, header)
    if rows is None or failures:
        continue
    end = readme.index("\n\n", start)
    for line_start in [m.start() for m in re.finditer(r"\n\|", readme[start:end])]:
        line_at = start + line_start + 1
        line = readme[line_at:readme.index("\n", line_at)]
        bars = [i for i, ch in enumerate(line) if ch == "|"]
        if len(bars) < 4 or not any(line[bars[0] + 1:bars[1]].strip().startswith(k) for k in table_figs):
            continue
        d, u = mutate_digits(line_at, line, bars[2] + 1, bars[3], check)  # the measured cell
        digits, missed = digits + d, missed + u
print("readme_figures: %d digits of the measured cells changed one at a time, %d went unnoticed" % (digits, missed))

# ---- README's CPU speed tables, cell by cell against the bench outputs they come from ----
# (anchor: the text that introduces the table in README, the folder of bench/cpu_mlp.sh's,
# cpu_resnet.sh's and cpu_bert.sh's outputs)
CPU_TABLES = (("Training speed on 2 cores of an AMD EPYC (Zen 5", "results/cpu/2026-12-07-epyc-2core/cpu-speed-e019e9d"),
              ("The same set on 2 cores of a Zen 4 EPYC", "results/cpu/2026-12-07-epyc-zen4-2core/cpu-speed-e4d68bf"))
CPU_ROWS = (("MNIST MLP", "mlp"), ("ResNet-50 (7x7", "resnet50"), ("ResNet-50, CIFAR", "resnet50-cifar"),
            ("all-MiniLM", "minilm"), ("BERT-base", "bert-base"))


def bench_cells(folder):
    """each workload's five measured cells, as README writes them, from the bench outputs"""
    text = {}
    for name in ("cpu_mlp.txt", "cpu_resnet.txt", "cpu_bert.txt"):
        t = load(name, base=os.path.join(root, folder))
        if t is None:
            return None
        text[name] = t.split("\n")
    rate, ratio, times = {}, {}, {}
    for line in text["cpu_mlp.txt"]:
        w = line.split()
        if len(w) == 4 and w[0] in ("fp32", "amp", "bf16"):
            rate[("mlp", w[0])] = ("{:,}".format(int(w[1])), "{:,}".format(int(w[2])) if w[2] != "-" else "-")
            ratio[("mlp", w[0])] = w[3]
        m = re.match(r"(amp|bf16) / FP32 time (\S+x)", line)
        if m:
            times[("mlp", m.group(1))] = m.group(2)
    for name, first in (("cpu_resnet.txt", 1), ("cpu_bert.txt", 3)):
        for line in text[name]:
            w = line.split()
            if len(w) == first + 4 and w[first] in ("fp32", "amp", "bf16"):
                rate[(w[0], w[first])] = (w[first + 1], w[first + 2])
                ratio[(w[0], w[first])] = w[first + 3]
            m = re.match(r"(\S+)\s+AMP / FP32 time (\S+x), bf16 / FP32 (\S+x)", line)
            if m:
                times[(m.group(1), "amp")], times[(m.group(1), "bf16")] = m.group(2), m.group(3)
    cells = {}
    for key, w in CPU_ROWS:
        try:
            amp = rate[(w, "amp")][0]
            if w == "mlp":
                amp += " (PyTorch's fp16 autocast: %s)" % rate[(w, "amp")][1]
            cells[key] = ["%s / %s (**%s**)" % (rate[(w, "fp32")] + (ratio[(w, "fp32")],)), amp,
                          "%s / %s (**%s**)" % (rate[(w, "bf16")] + (ratio[(w, "bf16")],)),
                          times[(w, "amp")], times[(w, "bf16")]]
        except KeyError as e:
            fail("%s: no figure %s in its bench outputs" % (folder, e))
    return cells


def cpu_table_start(text, anchor):
    """where the CPU speed table after anchor starts in text, or -1"""
    at = text.find(anchor)
    start = text.find("\n| workload | unit |", at) if at >= 0 else -1
    return start + 1 if start >= 0 else -1


def check_cpu_tables(text, expected):
    out = []
    for (anchor, folder), cells in zip(CPU_TABLES, expected):
        start = cpu_table_start(text, anchor)
        if start < 0:
            out.append("README has no CPU speed table after '%s'" % anchor)
            continue
        rows = {}
        for line in text[start:text.index("\n\n", start)].split("\n")[2:]:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            rows[c[0]] = c
        for key, want in cells.items():
            matching = [c for k, c in rows.items() if k.startswith(key)]
            if len(matching) > 1:
                out.append("CPU table after '%s': %d rows start with '%s'" % (anchor, len(matching), key))
            row = matching[0] if matching else None
            if row is None or row[2:7] != want:
                out.append("CPU table after '%s', row '%s': README has %s, %s gives %s" %
                           (anchor, key, row[2:7] if row else None, folder, want))
        for k in rows:
            if not any(k.startswith(key) for key, _ in CPU_ROWS):
                out.append("CPU table after '%s': row '%s' has no figures checked here" % (anchor, k))
    return out


cpu_expected = [bench_cells(folder) or {} for _, folder in CPU_TABLES]
failures += check_cpu_tables(readme, cpu_expected)
cpu_digits = cpu_missed = 0
if not failures:
    for anchor, _ in CPU_TABLES:
        start = cpu_table_start(readme, anchor)
        end = readme.index("\n\n", start)
        for line_start in [m.start() for m in re.finditer(r"\n\|", readme[start:end])][1:]:
            line_at = start + line_start + 1
            line = readme[line_at:readme.index("\n", line_at)]
            bars = [i for i, ch in enumerate(line) if ch == "|"]
            d, u = mutate_digits(line_at, line, bars[2] + 1, bars[7],  # the five measured cells
                                 lambda text: check_cpu_tables(text, cpu_expected))
            cpu_digits, cpu_missed = cpu_digits + d, cpu_missed + u
print("readme_figures: %d CPU speed cells in %d tables checked against the bench outputs; %d digits changed one at a "
      "time, %d went unnoticed" % (sum(5 * len(c) for c in cpu_expected), len(CPU_TABLES), cpu_digits, cpu_missed))

for f in failures:
    print("FAIL " + f, file=sys.stderr)
sys.exit(1 if failures else 0)
