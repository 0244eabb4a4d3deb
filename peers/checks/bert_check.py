#!/usr/bin/env python3
"""BERT against Hugging Face, in float64: the real MiniLM checkpoint (all-MiniLM-L6-v2: 6 layers,
hidden 384, 12 heads) as BertForSequenceClassification with a seeded classifier, a few SST-2 and
RTE dev examples tokenized by transformers' BertTokenizer (padding, a pair, token types), one
training forward and backward without dropout.

  1. The checkpoint is written with the classifier as BertForSequenceClassification's state_dict
     (bert.* and classifier.* names) beside a copy of its config.json.
  2. bert_grads (tests/models/bert_grads.c) loads it as `--model bert --init-from DIR`, runs one fp32
     training forward and backward on the batch, and writes loss, logits and every gradient.
  3. Here, the same in float64 (and in float32, as the conditioning's yardstick).

Tolerances: the logits and the loss go through a well-conditioned forward: NMSE 1e-9 (fp32 of a
few hundred operations deep, 1e-5 relative per element at most). Each gradient is held to ten
times the NMSE that PyTorch's own fp32 gradient has against float64 on the same tensor (and 1e-8
at least): as accurate as the framework users compare it with, within a decade. (The attention
keys' biases have a gradient of 0 in exact arithmetic, a softmax being blind to a constant
added to a row; both fp32 gradients are round-off there, and the yardstick says so.) A wrong
transpose, head split, mask or residual gives an NMSE of order 1.

usage: bert_check.py BERT_GRADS_BINARY DATA_ROOT
Exit 0 when all agree, 1 on a mismatch, 77 (skip) without torch and transformers or the data."""
import json
import os
import shutil
import sys
import tempfile

try:
    import torch
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
except ImportError as e:
    print(f"SKIPPED: PyTorch with transformers is not importable here ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import st_io  # noqa: E402

TOL_FWD_NMSE = 1e-9
TOL_GRAD_FLOOR = 1e-8
TOL_GRAD_FACTOR = 10.0


def nmse(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    if not torch.isfinite(a).all():
        return float("inf")
    den = (b * b).sum().item()
    return ((a - b) ** 2).sum().item() / den if den > 0 else ((a - b) ** 2).sum().item()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, root = sys.argv[1], sys.argv[2]
    ckpt = os.path.join(root, "all-MiniLM-L6-v2")
    sst2, rte = os.path.join(root, "glue", "SST-2", "dev.tsv"), os.path.join(root, "glue", "RTE", "dev.tsv")
    for p in (ckpt, sst2, rte):
        if not os.path.exists(p):
            print(f"SKIPPED: {p} is not here")
            return 77
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    cfg = BertConfig.from_pretrained(ckpt, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    tok = BertTokenizer(os.path.join(ckpt, "vocab.txt"), do_lower_case=True)
    with open(sst2, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:4]
    with open(rte, encoding="utf-8") as f:
        pair = [line.rstrip("\n").split("\t") for line in f][1]
    texts = [(r[0], None) for r in rows] + [(pair[1], pair[2])]
    labels = [int(r[1]) for r in rows] + [1 if pair[3] == "not_entailment" else 0]
    L = 48
    enc = [tok(a, b, max_length=L, truncation="longest_first", padding="max_length") for a, b in texts]
    ids = torch.tensor([e["input_ids"] for e in enc])
    types = torch.tensor([e["token_type_ids"] for e in enc])
    mask = torch.tensor([e["attention_mask"] for e in enc])
    y = torch.tensor(labels)

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        model = BertForSequenceClassification.from_pretrained(ckpt, config=cfg)
        sd = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
        st_io.save(sd, os.path.join(tmp, "model.safetensors"))
        with open(os.path.join(ckpt, "config.json")) as f:
            conf = json.load(f)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(conf, f)
        shutil.copy(os.path.join(ckpt, "vocab.txt"), tmp)
        bpath, opath = os.path.join(tmp, "batch.safetensors"), os.path.join(tmp, "out.safetensors")
        st_io.save({"ids": ids, "types": types, "mask": mask, "y": y}, bpath)
        rc = os.system(f"'{tool}' '{tmp}' 2 '{bpath}' '{opath}'")
        if rc != 0:
            print(f"FAIL bert_grads exited with status {rc}")
            return 1
        out = st_io.load(opath)

        def reference(dtype):
            m = BertForSequenceClassification(cfg).to(dtype)
            m.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in model.state_dict().items()})
            m.train()  # dropout 0: the training forward is deterministic
            o = m(input_ids=ids, token_type_ids=types, attention_mask=mask)
            loss = torch.nn.functional.cross_entropy(o.logits, y)
            loss.backward()
            return m, o.logits, loss

        md, logits, loss = reference(torch.float64)
        m32, _, _ = reference(torch.float32)
        g32 = dict(m32.named_parameters())

        def report(what, err, tol):
            nonlocal failures
            bad = not (err <= tol)
            failures += bad
            if bad or os.environ.get("AB_VERBOSE"):
                print(f"  {'FAIL' if bad else 'ok  '} {what}: nmse {err:.3g} (tolerance {tol:g})")

        report("logits", nmse(out["logits"], logits.detach()), TOL_FWD_NMSE)
        report("loss", nmse(out["loss"].reshape(1), loss.detach().reshape(1)), TOL_FWD_NMSE)
        worst, n = (0.0, ""), 0
        for k, p in md.named_parameters():
            if p.grad is None:
                continue
            e = nmse(out["grad." + k], p.grad)
            tol = max(TOL_GRAD_FLOOR, TOL_GRAD_FACTOR * nmse(g32[k].grad, p.grad))
            report("grad " + k, e, tol)
            worst = max(worst, (e / tol, k))
            n += 1
    print(f"{'ok  ' if failures == 0 else 'FAIL'} MiniLM (transformers {transformers.__version__}): logits, loss and "
          f"{n} gradients against BertForSequenceClassification in float64 (the worst gradient at {worst[0]:.2g} of its "
          f"tolerance, {worst[1]}); loss {out['loss'].item():.6f} vs {loss.item():.6f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
