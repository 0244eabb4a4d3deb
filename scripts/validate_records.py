#!/usr/bin/env python3
"""Run records (ampbench's and the PyTorch peers') against harness/schema/result.schema.json.
Usage: validate_records.py FILE|DIR ...   (a folder: every *.json under it whose "tool" is ampbench or
pytorch; other JSON files, such as run.json or a fit map, are not run records and are left alone).
Prints one line per record that fails and a count; exit 0 when all are valid, 1 when one is not or
none was found, 77 when jsonschema is not importable (python3-jsonschema)."""
import glob
import json
import os
import sys

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "schema", "result.schema.json")


def validator():
    import jsonschema
    schema = json.load(open(SCHEMA))
    jsonschema.Draft202012Validator.check_schema(schema)
    # Debian's jsonschema 4.10 resolves "#/$defs/..." against the relative $id twice
    # ("ampbench/ampbench/result.schema.json") and fails; the $id names the schema, it constrains nothing
    return jsonschema.Draft202012Validator({k: v for k, v in schema.items() if k != "$id"})


def is_run_record(rec):
    return isinstance(rec, dict) and rec.get("tool") in ("ampbench", "pytorch")


def errors(v, rec):
    return sorted(v.iter_errors(rec), key=lambda e: list(e.path))


def prediction_problems(rec):
    """What the schema cannot say about test_predictions: the two strings decode to n examples, every
    class id is below classes, and the right ones give the record's final test accuracy."""
    import base64
    tp = rec.get("test_predictions") if isinstance(rec, dict) else None
    if not tp:
        return []
    n, c = tp.get("n", 0), tp.get("classes", 0)
    w = 2 if c > 256 else 1
    try:
        pred = base64.b64decode(tp["predicted"], validate=True)
        hit = base64.b64decode(tp["correct"], validate=True)
    except (KeyError, ValueError) as e:
        return ["test_predictions: not base64 (%s)" % e]
    out = []
    if len(pred) != n * w:
        out.append("test_predictions: %d bytes of predicted classes for %d examples" % (len(pred), n))
    if len(hit) != (n + 7) // 8:
        out.append("test_predictions: %d bytes of the correct bitset for %d examples" % (len(hit), n))
    if out:
        return out
    ids = pred if w == 1 else [pred[2 * i] | pred[2 * i + 1] << 8 for i in range(n)]
    if any(k >= c for k in ids):
        out.append("test_predictions: a class id past the %d classes" % c)
    right = sum(hit[i // 8] >> (i % 8) & 1 for i in range(n))
    acc = rec.get("final_test_accuracy")
    if isinstance(acc, (int, float)) and abs(100.0 * right / n - acc) > 1e-6:
        out.append("test_predictions: %d of %d right is %.6f%%, the record says %.6f%%" % (right, n, 100.0 * right / n, acc))
    return out


def main(args):
    try:
        v = validator()
    except ImportError as e:
        print("SKIPPED: python3-jsonschema is not importable (%s)" % e)
        return 77
    paths = []
    for a in args:
        paths += sorted(glob.glob(os.path.join(a, "**", "*.json"), recursive=True)) if os.path.isdir(a) else [a]
    n = bad = 0
    for p in paths:
        try:
            rec = json.load(open(p))
        except (OSError, ValueError) as e:
            print("%s: not readable JSON (%s)" % (p, e))
            bad += 1
            continue
        if not is_run_record(rec):
            continue
        n += 1
        errs = errors(v, rec)
        for e in errs[:3]:
            print("%s: %s at /%s" % (p, e.message, "/".join(str(x) for x in e.path)))
        probs = prediction_problems(rec)
        for m in probs:
            print("%s: %s" % (p, m))
        bad += bool(errs or probs)
    print("validate_records: %d run record(s), %d invalid" % (n, bad))
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
