#!/usr/bin/env python3
"""Result records against harness/schema/result.schema.json (JSON Schema 2020-12, python3-jsonschema):
tiny ampbench runs in fp32, bf16, amp with the dynamic scaler and amp with a static scale that skips
an injected overflow; a record with a gradient census (test_census writes it); every committed run
record (ampbench's and the peers', under results/ and tests/fixtures/); and the census record broken
three ways (a 79-bin histogram, an unknown kind, a missing derived share), which must fail. The
fresh runs' test_predictions must decode to the record's accuracy, and a flipped or truncated one
must be caught (scripts/validate_records.py's prediction_problems).
Usage: schema_check.py AMPBENCH TEST_CENSUS. Exit 77 (skipped) without jsonschema."""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import validate_records as vr  # noqa: E402  (the validator scripts/gpu_unpack.sh uses too)

try:
    validator = vr.validator()
except ImportError as e:
    print("SKIPPED: python3-jsonschema is not importable (%s)" % e)
    sys.exit(77)

ampbench, test_census = sys.argv[1], sys.argv[2]
failures = 0


def fail(msg):
    global failures
    print("FAIL: %s" % msg, file=sys.stderr)
    failures += 1


def errors(rec):
    return vr.errors(validator, rec)


with tempfile.TemporaryDirectory() as tmp:
    tiny = ["--max-steps", "3", "--train-subset", "256", "--test-subset", "64", "--batch-size", "32", "--quiet"]
    runs = {"fp32": [], "bf16": ["--precision", "bf16"], "amp": ["--precision", "amp"],
            "amp-static": ["--precision", "amp", "--loss-scale", "1", "--inject-inf-step", "1"]}
    records = {}
    for name, extra in runs.items():
        out = os.path.join(tmp, name + ".json")
        p = subprocess.run([ampbench, "train"] + tiny + extra + ["--out", out], capture_output=True, text=True)
        if p.returncode != 0:
            fail("ampbench %s exited %d: %s" % (name, p.returncode, p.stderr.strip()))
            continue
        records[name] = json.load(open(out))
    out = os.path.join(tmp, "census.json")
    p = subprocess.run([test_census, out], capture_output=True, text=True)
    if p.returncode != 0:
        fail("test_census exited %d: %s" % (p.returncode, p.stderr.strip()))
    else:
        records["census"] = json.load(open(out))
    committed = 0
    for path in sorted(glob.glob(os.path.join(HERE, "..", "..", "results", "**", "*.json"), recursive=True) +
                       glob.glob(os.path.join(HERE, "fixtures", "**", "*.json"), recursive=True)):
        rec = json.load(open(path))
        if vr.is_run_record(rec):  # run records, not run.json or fits
            records[os.path.relpath(path, os.path.join(HERE, "..", ".."))] = rec
            committed += 1
    if committed < 10:
        fail("only %d committed run records found" % committed)
    for name, rec in records.items():
        for e in errors(rec)[:3]:
            fail("%s: %s at /%s" % (name, e.message, "/".join(str(x) for x in e.path)))
        for m in vr.prediction_problems(rec):
            fail("%s: %s" % (name, m))
    # every fresh run keeps its last evaluation example by example, and a lie in it is caught
    for n in runs:
        if n in records and "test_predictions" not in records[n]:
            fail("the %s run's record has no test_predictions" % n)
    if "fp32" in records and "test_predictions" in records["fp32"]:
        import base64
        r = copy.deepcopy(records["fp32"])
        hit = bytearray(base64.b64decode(r["test_predictions"]["correct"]))
        hit[0] ^= 1  # one example's verdict flipped: the count no longer gives the accuracy
        r["test_predictions"]["correct"] = base64.b64encode(bytes(hit)).decode()
        if not vr.prediction_problems(r):
            fail("a flipped correct bit in test_predictions goes unnoticed")
        r = copy.deepcopy(records["fp32"])
        r["test_predictions"]["predicted"] = r["test_predictions"]["predicted"][:-4]
        if not vr.prediction_problems(r):
            fail("truncated predicted classes in test_predictions go unnoticed")
    modes = {n: records[n]["mixed_precision"].get("loss_scale_mode") for n in runs if n in records}
    if modes != {"fp32": "none", "bf16": "none", "amp": "dynamic", "amp-static": "static"}:
        fail("loss_scale_mode per run: %s" % modes)
    if "amp-static" in records and records["amp-static"]["mixed_precision"]["overflow_events"] != [
            {"step": 1, "epoch": 1, "scale_before": 1, "scale_after": 1}]:
        fail("the static run's overflow events: %s" % records["amp-static"]["mixed_precision"]["overflow_events"])
    census = records.get("census")
    if census:
        if "grad_census" not in census:
            fail("test_census's record has no grad_census")
        else:
            broken = []
            r = copy.deepcopy(census)
            r["grad_census"]["records"][0]["tensors"][0]["hist"].pop()
            broken.append(("a 79-bin histogram", r))
            r = copy.deepcopy(census)
            r["grad_census"]["records"][0]["tensors"][0]["kind"] = "bias"
            broken.append(("kind bias", r))
            r = copy.deepcopy(census)
            del r["grad_census"]["records"][0]["derived"]["activation"]["at_scale_1"]["flush"]
            broken.append(("no derived flush share", r))
            for what, rec in broken:
                if not errors(rec):
                    fail("the schema accepts a census record with %s" % what)

print("schema_check: %d records, %d failures" % (len(records), failures))
sys.exit(1 if failures else 0)
