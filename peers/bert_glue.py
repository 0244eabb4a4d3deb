#!/usr/bin/env python3
"""BERT fine-tuning on a GLUE task in PyTorch + Hugging Face transformers: the peer `ampbench train --model bert ...` is compared with.

Model: transformers' BertForSequenceClassification (BertModel, its pooler, dropout, a Linear classifier
over the pooled [CLS] vector), num_labels from the task, cross-entropy on the logits.
  --init-from DIR  a Hugging Face checkpoint folder (config.json, model.safetensors or pytorch_model.bin,
                   vocab.txt); the architecture comes from its config.json and the weights through
                   from_pretrained (a BertModel checkpoint without the "bert." prefix loads too). What the
                   checkpoint lacks (the classifier) gets transformers' initialisation: normal, std
                   config.initializer_range (0.02), bias 0.
  --model bert       the architecture of --init-from DIR (the default when --init-from is given)
  --model bert-base  BertConfig() defaults: 12 layers, hidden 768, 12 heads, feed-forward 3072, vocab 30522,
                     512 positions (the default without --init-from; random initialisation, seeded)
  --model bert-tiny  2 layers, hidden 128, 2 heads, feed-forward 512 (the suite's small test configuration)
  With --init-from, --model bert-base/bert-tiny checks that the checkpoint has that shape.
Dropout (hidden and attention probabilities) and the layer-norm epsilon come from the config (0.1,
1e-12 for all three). The parameter count and the multiply-adds per sample of the forward pass at
--max-seq-len L (counted analytically: per layer 4LH^2 for Q, K, V and the output projection, 2LHF for
the feed-forward pair, 2L^2H for QK^T and AV; then H^2 for the pooler and HC for the classifier;
embeddings, layer norm, softmax and GELU not counted) are printed and recorded.

Tokenizer: transformers' WordPiece BertTokenizer, the slow Python one (transformers 4.x BertTokenizer,
5.x BertTokenizerLegacy), do_lower_case=True, over the vocabulary of --init-from DIR (its vocab.txt;
--vocab is then ignored) or --vocab FILE (default <repo>/../shared/data/bert-base-uncased/vocab.txt).
[CLS] A [SEP] (B [SEP]), truncation longest_first to --max-seq-len (a pair loses tokens from the longer
side, the second on a tie), padded to --max-seq-len with [PAD], token type ids 0 for A and its [SEP] and
1 for B and its [SEP], attention mask 1 on the tokens. Where only a tokenizers-backed (fast) BertTokenizer
exists, its WordPieces are packed by this script with the slow tokenizer's truncation rule (peer.packing
says which). Both splits are tokenized once before training (not timed) and stay resident on the device
as int64 tensors (input ids, token types, attention mask, labels); a batch is an index_select there.

Data (--dataset, --data = the task's folder, default <repo>/../shared/data/glue/<task> or $AB_GLUE_DIR/<task>):
train.tsv and dev.tsv (MNLI: dev_matched.tsv), read as transformers' GLUE processors read them
(UTF-8 with an optional BOM, tab-separated, no quoting):
  sst2  SST-2  header; sentence = column 0, label = column 1 (0/1)                        accuracy
  cola  CoLA   no header; sentence = column 3, label = column 1 (0/1)           Matthews correlation
  rte   RTE    header; sentence1/2 = columns 1, 2, label = last (entailment/not_entailment) accuracy
  mrpc  MRPC   header; sentences = columns 3, 4, label = column 0 (0/1)                   F1 (class 1)
  qnli  QNLI   header; question/sentence = columns 1, 2, label = last                         accuracy
  qqp   QQP    header; questions = columns 3, 4, label = column 5 (rows short of columns are
               skipped, as the processor skips them)                                      F1 (class 1)
  mnli  MNLI   header; sentences = columns 8, 9, label = last (contradiction/entailment/neutral) accuracy
A label index is its position in that list; a label outside it, a row short of columns, or a first row
that is data where the layout has a header (another task's folder) is a one-line error (exit 1).
--train-subset/--test-subset N keep the first N rows.
The metrics are sklearn's definitions: Matthews = (c s - sum_k t_k p_k) / sqrt((s^2 - sum p_k^2)
(s^2 - sum t_k^2)) over the confusion counts (0 where the denominator is 0); F1 = 2TP / (2TP + FP + FN)
for class 1 (0 where that is 0/0). Recorded in percent: test_metric (accuracy %, Matthews x 100,
F1 x 100) beside test_accuracy (always accuracy %).

Recipe: AdamW (torch.optim.AdamW, betas 0.9/0.999, eps 1e-8), lr 2e-5, weight decay 0.01 on every
parameter except biases and layer-norm weights (names with "bias" or "LayerNorm.weight", and any
nn.LayerNorm parameter), batch 32 per rank, 3 epochs, gradient clipping of the global L2 norm to 1.0
(torch.nn.utils.clip_grad_norm_ on the unscaled gradients: under amp after scaler.unscale_; 0 = off).
--accum-steps K: K micro-batches of --batch-size per optimizer step, each micro-batch's summed loss
scaled by 1/(samples in the step), i.e. the loss divided by K for full steps. The learning rate of
optimizer step s (0-based, counted over the whole run, skipped AMP steps included) with base lr L,
W warm-up steps and T steps in all (epochs x steps per epoch, or --max-steps if smaller) is
  s < W          L * s / W                       (linear warm-up from 0; step 0 has lr 0)
  otherwise, with t = (s - W) / (T - W):
  constant       L
  linear         L * (1 - t)                     (reaches 0 at s = T, just after the last step)
  cosine         L * 0.5 * (1 + cos(pi * t))
which is ampbench's ab_lr_at and Hugging Face's get_{linear,cosine}_schedule_with_warmup.
  order          a seeded permutation per epoch (--no-shuffle keeps the file order); the last step of
                 an epoch may be short (no drop_last). Dropout masks come from torch's seeded generator.
  evaluation     on the dev split after every epoch, dropout off, in batches of --batch-size.

Precision (--precision): fp32 (no TF32 unless --tf32: ampbench's fp32 is plain fp32); amp =
torch.autocast(float16) + GradScaler (init scale 65536, growth 2, backoff 0.5, interval 2000, as
ampbench; the scale is read back every step to record overflow events), or with --loss-scale S a
static scale (peer_common.StaticScaler: loss times S, gradients divided by S, a step with an inf/NaN
gradient skipped and recorded, S never changed; S = 1 is AMP without loss scaling); bf16 =
autocast(bfloat16), no scaler. Where the installed PyTorch cannot autocast to the dtype on the device (PyTorch 1.13
autocasts only to bf16 on a CPU) the script says so in one line and exits 2. --attn-implementation
passes eager or sdpa to transformers (transformers >= 4.36; 4.30 has eager only); auto keeps the
library's default (4.30: eager; 5.x: sdpa), recorded in peer.attn_implementation.

Data parallel: launched under torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or mpirun (OMPI_COMM_WORLD_*,
or PMI_RANK/PMI_SIZE), the script runs DistributedDataParallel, nccl on cuda and gloo on cpu
(mpirun: MASTER_ADDR/MASTER_PORT default to 127.0.0.1:29500, one node). A step takes world x accum x
batch samples of the shared permutation, cut in blocks of batch dealt to the ranks in turn (ampbench's
ab_shard_step): rank r's k-th micro-batch is block r + k x world. Each micro-batch's summed loss is
scaled by world / (samples in the step), so that DDP's gradient average is the mean over the step's
samples even when a short last step leaves the ranks unequal shares; DDP's all-reduce runs on each
rank's last micro-batch (no_sync before it), and a rank with no samples runs one zero-weighted forward
and backward so that the all-reduce still meets. Rank 0 prints and writes the record.

Times: epochs[].time_s is the training part of an epoch (evaluation excluded); data_time_s is batch
assembly (CUDA events on cuda); --timing-skip-steps N leaves the first N steps of the run out of
time_s and of samples_per_s (first-step set-up: kernel selection, allocator growth), and is recorded
in peer.timing_skip_steps; 0 (the default) times every step, as ampbench does. Tokenization, model
loading and evaluation are outside the timings.

Memory, peak_memory_bytes (peak_memory_bytes.method names which):
  cuda  torch.cuda.max_memory_allocated() less the resident data set (ampbench keeps data sets out
        of its categories); the raw figure is gpu.torch_max_memory_allocated_bytes.
  cpu   parameters + gradients + optimizer state + the bytes autograd saves for one backward,
        comparable with ampbench's tracked total; the resident-set growth apart
        (peer_common.MemoryMeter says how each is counted).
--memory-limit on the CPU is not enforced: fits_in_memory says whether that comparable total is
within it.
--memory-limit SIZE caps PyTorch's caching allocator on a GPU (set_per_process_memory_fraction of
the device's memory; the CUDA context is outside it, as it is outside ampbench's cap): a run that
does not fit writes its record with fits_in_memory false and out_of_memory, and exits 3.

Ctrl-C (or SIGTERM) stops after the current step; the epoch in progress is evaluated and recorded,
the result is written with complete=false, interrupted=true, and the exit status is 130. A second
Ctrl-C stops at once with the epochs already finished. The record is written atomically (temporary
file, rename) after every epoch (complete=false) and at the end.

--dry-run reads and tokenizes both splits, prints their counts and stops (no model, no training).
"""
import argparse
import contextlib
import csv
import gc
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

PROG = "bert_glue.py"
DEFAULT_VOCAB = os.path.normpath(os.path.join(pc.REPO_ROOT, "..", "shared", "data", "bert-base-uncased", "vocab.txt"))

# The GLUE processors' layouts (transformers/data/processors/glue.py): folder, dev file, header row,
# text-a column, text-b column (None: single sentence), label column, label list, metric, and
# whether rows short of columns are skipped (QQP) rather than an error.
TASKS = {
    "sst2": dict(folder="SST-2", dev="dev.tsv", header=True, a=0, b=None, label=1, labels=["0", "1"],
                 metric="accuracy", skip_short=False),
    "cola": dict(folder="CoLA", dev="dev.tsv", header=False, a=3, b=None, label=1, labels=["0", "1"],
                 metric="matthews", skip_short=False),
    "rte": dict(folder="RTE", dev="dev.tsv", header=True, a=1, b=2, label=-1,
                labels=["entailment", "not_entailment"], metric="accuracy", skip_short=False),
    "mrpc": dict(folder="MRPC", dev="dev.tsv", header=True, a=3, b=4, label=0, labels=["0", "1"],
                 metric="f1", skip_short=False),
    "qnli": dict(folder="QNLI", dev="dev.tsv", header=True, a=1, b=2, label=-1,
                 labels=["entailment", "not_entailment"], metric="accuracy", skip_short=False),
    "qqp": dict(folder="QQP", dev="dev.tsv", header=True, a=3, b=4, label=5, labels=["0", "1"],
                metric="f1", skip_short=True),
    "mnli": dict(folder="MNLI", dev="dev_matched.tsv", header=True, a=8, b=9, label=-1,
                 labels=["contradiction", "entailment", "neutral"], metric="accuracy", skip_short=False),
}

# --model presets (BertConfig field names); "bert" = the architecture of --init-from DIR
PRESETS = {
    "bert-base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    "bert-tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=256),  # ampbench's
}


def parse_size(text):
    """'8G', '512M', '1.5G', '4096' (bytes): powers of 1024, as ampbench's --memory-limit"""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        die("--memory-limit: '%s' is not a size (e.g. 8G)" % text, 2)
    unit = m.group(2).upper()
    v = float(m.group(1)) * (1024 ** ("KMGT".index(unit) + 1) if unit else 1)
    if v < 1:
        die("--memory-limit: '%s' is not a positive size" % text, 2)
    return int(v)


def die(msg, status=1):
    pc.die(PROG, msg, status)


# ---- data: GLUE TSV files (no torch needed) ----

def read_glue_split(path, task, what):
    """[(text_a, text_b or None, label index)] of one GLUE TSV file; a one-line error on bad input."""
    t = TASKS[task]
    try:
        with open(path, "r", encoding="utf-8-sig") as f:
            lines = list(csv.reader(f, delimiter="\t", quotechar=None))
    except FileNotFoundError:
        die("%s: no such file (the GLUE %s task folder holds %s; set --data)" % (path, t["folder"], what))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        die("%s: %s" % (path, getattr(e, "strerror", None) or e))
    need = max(t["a"], t["b"] if t["b"] is not None else 0, t["label"] if t["label"] >= 0 else 0) + 1
    rows, skipped = [], 0
    index = {name: i for i, name in enumerate(t["labels"])}
    for ln, line in enumerate(lines, 1):
        if t["header"] and ln == 1:
            # a header whose label column holds a label is a data row: another task's file (CoLA has no header)
            if len(line) >= need and line[t["label"]] in index:
                die("%s:1: a data row where the GLUE %s layout has its header (is --data the right task's folder?)"
                    % (path, t["folder"]))
            continue
        if not line:  # an empty line
            continue
        if len(line) < need:
            if t["skip_short"]:
                skipped += 1
                continue
            die("%s:%d: %d column%s, the GLUE %s layout needs at least %d%s" % (
                path, ln, len(line), "" if len(line) == 1 else "s", t["folder"], need,
                " (is --data the right task's folder?)" if ln <= 2 else ""))
        label = line[t["label"]]
        if label not in index:
            die("%s:%d: label %r is not one of %s (is --data the right task's folder?)"
                % (path, ln, label, "/".join(t["labels"])))
        rows.append((line[t["a"]], line[t["b"]] if t["b"] is not None else None, index[label]))
    if not rows:
        die("%s: no examples" % path)
    return rows, skipped


def task_files(data_dir, task):
    t = TASKS[task]
    if not os.path.isdir(data_dir):
        die("%s: no such folder (the GLUE %s task folder with train.tsv and %s; set --data)"
            % (data_dir, t["folder"], t["dev"]))
    return os.path.join(data_dir, "train.tsv"), os.path.join(data_dir, t["dev"])


# ---- tokenizer ----

def load_vocab_file(path):
    vocab = {}
    with open(path, "r", encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab.setdefault(line.rstrip("\n"), i)
    return vocab


def make_tokenizer(vocab_path):
    """(tokenizer, class name, slow?) for the WordPiece vocabulary file, lower-casing."""
    import transformers
    try:
        vocab = load_vocab_file(vocab_path)
    except OSError as e:
        die("%s: %s (the WordPiece vocabulary, one token a line; set --vocab)" % (vocab_path, e.strerror or e))
    except UnicodeDecodeError as e:
        die("%s: not UTF-8 text (%s)" % (vocab_path, e))
    for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
        if special not in vocab:
            die("%s: no %s token: not a BERT WordPiece vocabulary" % (vocab_path, special))
    tok = None
    try:  # transformers 5.x keeps the Python WordPiece tokenizer under this name
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
        tok = BertTokenizerLegacy(vocab_file=vocab_path, do_lower_case=True)
    except ImportError:
        pass
    if tok is None:
        cls = transformers.BertTokenizer  # 4.x: the slow one
        try:
            tok = cls(vocab_file=vocab_path, do_lower_case=True)
        except TypeError:
            tok = None
        if tok is None or getattr(tok, "is_fast", False):  # a tokenizers-backed class: give it the vocabulary itself
            tok = cls(vocab=dict(vocab), do_lower_case=True)
    slow = not getattr(tok, "is_fast", False)
    # the vocabulary really is the file's (a 5.x BertTokenizer(vocab_file=...) would silently build a tiny one)
    ids = tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    if ids != [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")] or len(tok) < len(vocab):
        die("%s: transformers %s's %s did not take this vocabulary (%d tokens, special ids %s)"
            % (vocab_path, transformers.__version__, type(tok).__name__, len(tok), ids))
    return tok, type(tok).__name__, slow, len(vocab)


def truncate_pair(a, b, remove):
    """The slow tokenizer's longest_first rule for a pair: tokens come off the end of the longer side,
    off the second on a tie (transformers' truncate_sequences, 4.x loop and 5.x closed form alike)."""
    first = min(abs(len(b) - len(a)), remove)
    second = remove - first
    if len(a) > len(b):
        ka, kb = first + second // 2, second - second // 2
    else:
        ka, kb = second // 2, first + second - second // 2
    return a[:len(a) - ka], b[:len(b) - kb]


def pack(ids_a, ids_b, L, cls_id, sep_id, pad_id):
    """[CLS] A [SEP] (B [SEP]) truncated longest_first to L and padded: (input ids, token types, mask)."""
    remove = len(ids_a) + (len(ids_b) if ids_b is not None else 0) + (3 if ids_b is not None else 2) - L
    if remove > 0:
        if ids_b is None:
            ids_a = ids_a[:len(ids_a) - remove]
        else:
            ids_a, ids_b = truncate_pair(ids_a, ids_b, remove)
    ids = [cls_id] + list(ids_a) + [sep_id]
    tt = [0] * len(ids)
    if ids_b is not None:
        ids += list(ids_b) + [sep_id]
        tt += [1] * (len(ids_b) + 1)
    n = len(ids)
    return ids + [pad_id] * (L - n), tt + [0] * (L - n), [1] * n + [0] * (L - n)


def tokenize_rows(tok, slow, rows, L, chunk=4096):
    """(input ids, token types, attention mask) as lists of L ints a row, and how many rows reached L."""
    pair = rows[0][1] is not None
    ids, tts, masks = [], [], []
    for pos in range(0, len(rows), chunk):
        part = rows[pos:pos + chunk]
        ta = [r[0] for r in part]
        tb = [r[1] for r in part] if pair else None
        if slow:
            enc = tok(ta, tb, max_length=L, truncation="longest_first", padding="max_length",
                      return_token_type_ids=True, return_attention_mask=True)
            ids += enc["input_ids"]
            tts += enc["token_type_ids"]
            masks += enc["attention_mask"]
        else:  # WordPieces from the fast tokenizer, packed with the slow one's rule
            wa = tok(ta, add_special_tokens=False)["input_ids"]
            wb = tok(tb, add_special_tokens=False)["input_ids"] if pair else [None] * len(ta)
            for x, y in zip(wa, wb):
                i, t, m = pack(x, y, L, tok.cls_token_id, tok.sep_token_id, tok.pad_token_id)
                ids.append(i)
                tts.append(t)
                masks.append(m)
    for i, seq in enumerate(ids):
        if len(seq) != L:
            die("row %d tokenized to %d tokens, not --max-seq-len %d" % (i + 1, len(seq), L), 2)
    full = sum(1 for m in masks if m[-1] == 1)
    return ids, tts, masks, full


# ---- metrics (sklearn's definitions) ----

def confusion(gold, pred, k):
    c = [[0] * k for _ in range(k)]
    for g, p in zip(gold, pred):
        c[g][p] += 1
    return c


def matthews(gold, pred, k):
    c = confusion(gold, pred, k)
    s = len(gold)
    correct = sum(c[i][i] for i in range(k))
    t = [sum(c[i]) for i in range(k)]  # true counts
    p = [sum(c[i][j] for i in range(k)) for j in range(k)]  # predicted counts
    cov_tp = correct * s - sum(t[i] * p[i] for i in range(k))
    cov_pp = s * s - sum(x * x for x in p)
    cov_tt = s * s - sum(x * x for x in t)
    if cov_pp * cov_tt == 0:
        return 0.0
    return cov_tp / math.sqrt(cov_tt * cov_pp)


def f1_positive(gold, pred, positive=1):
    tp = sum(1 for g, p in zip(gold, pred) if g == positive and p == positive)
    fp = sum(1 for g, p in zip(gold, pred) if g != positive and p == positive)
    fn = sum(1 for g, p in zip(gold, pred) if g == positive and p != positive)
    d = 2 * tp + fp + fn
    return 2.0 * tp / d if d else 0.0


def task_metric(metric, gold, pred, k):
    """the task's metric in percent"""
    if metric == "matthews":
        return 100.0 * matthews(gold, pred, k)
    if metric == "f1":
        return 100.0 * f1_positive(gold, pred)
    return 100.0 * sum(1 for g, p in zip(gold, pred) if g == p) / len(gold)


# ---- arguments, environment ----

# Hugging Face's Trainer as this peer runs it: AdamW, no weight decay on biases and LayerNorm
# weights (ampbench recipe --model bert)
FIXED = {"optimizer": "adamw", "momentum": 0.0, "wd-exclude": "bias-norm"}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default=None, choices=["bert", "bert-base", "bert-tiny"],
                    help="architecture [bert (from --init-from) with --init-from, else bert-base]")
    ap.add_argument("--init-from", default="", metavar="DIR",
                    help="Hugging Face checkpoint folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt)")
    ap.add_argument("--dataset", default="sst2", choices=sorted(TASKS))
    ap.add_argument("--data", default="", metavar="DIR",
                    help="the task's folder [$AB_GLUE_DIR/<task> or <repo>/../shared/data/glue/<task>]")
    ap.add_argument("--vocab", default="", metavar="FILE",
                    help="WordPiece vocabulary when --init-from has none [<repo>/../shared/data/bert-base-uncased/vocab.txt]")
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp", "bf16"])
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 matmuls (cuda)")
    ap.add_argument("--attn-implementation", default="auto", choices=["auto", "eager", "sdpa"],
                    help="transformers' attention implementation (auto: the library's default)")
    ap.add_argument("--epochs", type=int, default=3)
    pc.add_bucket_arg(ap)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N optimizer steps in all (0 = no limit)")
    ap.add_argument("--batch-size", type=int, default=32, help="per rank, per micro-batch")
    ap.add_argument("--accum-steps", type=int, default=1, help="micro-batches per optimizer step")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--weight-decay", type=float, default=0.01, help="AdamW's, not on biases and LayerNorm weights")
    ap.add_argument("--lr-schedule", default="linear", choices=["constant", "linear", "cosine"])
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--clip-grad-norm", type=float, default=1.0, help="max global L2 norm of the gradients (0 = off)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-subset", type=int, default=0, help="first N training rows (0 = all)")
    ap.add_argument("--test-subset", type=int, default=0, help="first N dev rows (0 = all)")
    ap.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True,
                    help="a seeded permutation per epoch; --no-shuffle keeps the file order")
    pc.add_scaler_options(ap)  # --init-scale ... --growth-interval, --timing-skip-steps, --log-interval, --threads
    ap.add_argument("--memory-limit", default="", metavar="SIZE",
                    help="GPU: cap the caching allocator at SIZE (8G: powers of 1024) with "
                         "torch.cuda.set_per_process_memory_fraction; a run that does not fit writes "
                         "fits_in_memory false and exits 3. CPU: recorded, not enforced")
    ap.add_argument("--find-max-batch", action="store_true",
                    help="the largest --batch-size whose training step fits --memory-limit (the comparable "
                         "total on the CPU, the capped allocator on a GPU), as ampbench --find-max-batch; "
                         "writes a 'pytorch-fit' record to --out and exits")
    ap.add_argument("--out", default="", help="JSON result file (written atomically after each epoch)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="read and tokenize the data, print the counts, stop")
    pc.add_fixed_recipe_args(ap, FIXED)
    a = ap.parse_args()
    pc.check_fixed_recipe_args(ap, a, FIXED)
    pc.check_counts(PROG, a, ("epochs", "batch_size", "log_interval", "accum_steps"),
                    ("max_steps", "warmup_steps", "train_subset", "test_subset", "timing_skip_steps", "threads"))
    pc.check_loss_scale(PROG, a)
    if a.max_seq_len < 8:
        die("--max-seq-len must be at least 8", 2)
    if a.clip_grad_norm < 0 or not math.isfinite(a.clip_grad_norm):
        die("--clip-grad-norm must be a finite number >= 0", 2)
    if a.model is None:
        a.model = "bert" if a.init_from else "bert-base"
    if a.model == "bert" and not a.init_from:
        die("--model bert takes its architecture from --init-from DIR (or choose --model bert-base or bert-tiny)", 2)
    if not a.data:
        root = os.environ.get("AB_GLUE_DIR") or os.path.join(pc.REPO_ROOT, "..", "shared", "data", "glue")
        a.data = os.path.normpath(os.path.join(root, TASKS[a.dataset]["folder"]))
    return a


def import_torch():
    pc.import_or_reexec(PROG, __file__, ("torch", "transformers"), "torch or transformers",
                        "PyTorch and Hugging Face transformers are needed (%s): pip install transformers", 2)


def transformers_at_least(transformers, major, minor):
    try:
        v = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    except ValueError:
        return True
    return v >= (major, minor)


# ---- the model ----

def build_model(a, num_labels, tok_vocab_size):
    """(model, description of the weights, config) on the CPU in fp32; seeded by the caller."""
    import transformers
    from transformers import BertConfig, BertForSequenceClassification

    attn_kw = {}
    if a.attn_implementation != "auto":
        if transformers_at_least(transformers, 4, 36):
            attn_kw = {"attn_implementation": a.attn_implementation}
        elif a.attn_implementation == "sdpa":
            die("--attn-implementation sdpa: transformers %s has eager attention only" % transformers.__version__, 2)
    if a.init_from:
        d = a.init_from
        if not os.path.isfile(os.path.join(d, "config.json")):
            die("%s: no config.json (--init-from wants a Hugging Face checkpoint folder)" % d)
        weights = [f for f in ("model.safetensors", "pytorch_model.bin") if os.path.isfile(os.path.join(d, f))]
        if not weights:
            die("%s: neither model.safetensors nor pytorch_model.bin" % d)
        try:
            cfg = BertConfig.from_pretrained(d, num_labels=num_labels)
        except Exception as e:  # noqa: BLE001
            die("%s/config.json: %s" % (d, str(e).splitlines()[0] if str(e) else type(e).__name__))
        if getattr(cfg, "model_type", "bert") != "bert":
            die("%s: model_type %r, not a BERT checkpoint" % (d, cfg.model_type), 2)
        if a.model in PRESETS:
            got = {k: getattr(cfg, k) for k in PRESETS[a.model]}
            if got != PRESETS[a.model]:
                die("--model %s with --init-from %s: the checkpoint has %s, not %s (use --model bert)"
                    % (a.model, d, got, PRESETS[a.model]), 2)
        has_st = getattr(transformers.utils, "is_safetensors_available", lambda: True)()
        use_st_io = weights[0] == "model.safetensors" and not has_st
        if not use_st_io:
            try:
                try:
                    model, info = BertForSequenceClassification.from_pretrained(d, config=cfg, output_loading_info=True,
                                                                                **attn_kw)
                except TypeError:
                    model, info = BertForSequenceClassification.from_pretrained(d, config=cfg, **attn_kw), None
            except (OSError, ValueError, RuntimeError) as e:
                die("%s: from_pretrained: %s" % (d, str(e).splitlines()[0] if str(e) else type(e).__name__))
            missing = sorted(info.get("missing_keys", [])) if info else []
            unexpected = sorted(info.get("unexpected_keys", [])) if info else []
            loader = "transformers from_pretrained"
        else:  # the safetensors package missing: read the file with st_io, load the state dict ourselves
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import st_io
            model = (BertForSequenceClassification._from_config(cfg, **attn_kw) if attn_kw
                     else BertForSequenceClassification(cfg))
            sd = st_io.load(os.path.join(d, "model.safetensors"))
            own = model.state_dict()
            mapped = {}
            for k, v in sd.items():
                name = k if k in own else "bert." + k
                mapped[name] = v
            res = model.load_state_dict({k: v for k, v in mapped.items() if k in own}, strict=False)
            missing = sorted(k for k in res.missing_keys)
            unexpected = sorted(k for k in mapped if k not in own)
            loader = "peers/st_io.py + load_state_dict (no safetensors package)"
        n_tensors = len(model.state_dict()) - len(missing)
        fresh = [k for k in missing if not k.endswith("position_ids") and not k.endswith("token_type_ids")]
        desc = "%s/%s: %d tensors (%s)%s%s" % (
            d, weights[0], n_tensors, loader,
            "; fresh: %s (normal std %g, bias 0)" % (", ".join(fresh), cfg.initializer_range) if fresh else "",
            "; unused: %s" % ", ".join(unexpected) if unexpected else "")
        body = [k for k in fresh if not k.startswith("classifier.")]
        if body:
            print("%s: warning: %s lacks %s: freshly initialised" % (PROG, d, ", ".join(body)), file=sys.stderr)
    else:
        cfg = BertConfig(num_labels=num_labels, **PRESETS[a.model])
        model = (BertForSequenceClassification._from_config(cfg, **attn_kw) if attn_kw
                 else BertForSequenceClassification(cfg))
        desc = ("transformers initialisation, seed %d (Linear and Embedding normal std %g, bias 0, LayerNorm 1/0)"
                % (a.seed, cfg.initializer_range))
    if a.max_seq_len > cfg.max_position_embeddings:
        die("--max-seq-len %d exceeds the model's %d positions" % (a.max_seq_len, cfg.max_position_embeddings), 2)
    if tok_vocab_size > cfg.vocab_size:
        die("the vocabulary has %d tokens, the model's embedding %d" % (tok_vocab_size, cfg.vocab_size), 2)
    return model.float(), desc, cfg


def find_max_batch(a, prog, say, dev, cuda, amp, ac_dtype, limit, data, n_train, resident_bytes, k_labels,
                   vocab_size, started):
    """The largest batch whose one training step (forward, backward, AdamW's step, so its state exists)
    holds at most `limit`: on the CPU the comparable total (parameters, gradients, optimizer state,
    the tensors autograd saves, MemoryMeter), on a GPU max_memory_allocated under the capped
    allocator (an out-of-memory error is a batch that does not fit). Probes 1 and 2 give the bytes a
    sample adds; the search starts where that line crosses the limit and walks to the boundary, as
    ampbench --find-max-batch does. Writes a "pytorch-fit" record to --out."""
    import gc
    import torch
    import torch.nn.functional as F
    if not limit:
        die("--find-max-batch needs --memory-limit SIZE (the 8 GB question: --memory-limit 8G)", 2)
    t_ids, t_tt, t_mask, t_y = data
    autocast = pc.make_autocast(dev, ac_dtype)
    probes = {}

    def probe(B):
        if B in probes:
            return probes[B]
        torch.manual_seed(a.seed)
        model = opt = None
        total, fits = None, False
        try:
            model = build_model(a, k_labels, vocab_size)[0].to(dev)
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
            scaler = pc.make_scaler(a, dev, amp)
            meter = pc.MemoryMeter(dev, cuda, resident_bytes)
            if cuda:
                torch.cuda.reset_peak_memory_stats(dev)
            idx = torch.arange(B, device=dev) % n_train
            with meter.saved_scope(model), autocast():
                out = model(input_ids=t_ids[idx], attention_mask=t_mask[idx], token_type_ids=t_tt[idx]).logits
                loss = F.cross_entropy(out.float(), t_y[idx])
            if amp:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            total = meter.read(model, opt)[1]["total"]
            fits = total <= limit
        except torch.cuda.OutOfMemoryError:
            fits = False
        finally:
            del model, opt
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
        probes[B] = (fits, total)
        say("batch %d: %s%s" % (B, "fits" if fits else "does not fit",
                                ", %s bytes" % format(total, ",") if total is not None else " (out of memory)"))
        return probes[B]

    commit, dirty = pc.git_info()
    best = None
    ok1, m1 = probe(1)
    if ok1:
        ok2, m2 = probe(2)
        if not ok2:
            best = 1
        else:
            # the line through batches 1 and 2 where it crosses the limit, then the boundary around it
            per = m2 - m1
            guess = max(3, int((limit - (m1 - per)) // per)) if per and per > 0 else 4
            lo, hi = 2, None  # lo fits; hi, when known, does not
            ok = probe(guess)[0]
            lo, hi = (guess, None) if ok else (lo, guess)
            step = 1
            while hi is None:  # up from a guess that fits: +1, +2, +4, ... until one does not
                b = lo + step
                if probe(b)[0]:
                    lo = b
                    step *= 2
                else:
                    hi = b
            step = 1
            while hi - lo > 1:  # down from one that does not: -1, -2, -4, ... until one does
                b = max(lo + 1, hi - step)
                if probe(b)[0]:
                    lo = b
                    break
                hi = b
                step *= 2
            while hi - lo > 1:  # then halve what is left
                b = (lo + hi) // 2
                if probe(b)[0]:
                    lo = b
                else:
                    hi = b
            best = lo
    rec = {
        "tool": "pytorch-fit", "schema_version": 1, "git_commit": commit,
        "script": "peers/bert_glue.py", "torch": torch.__version__,
        "model": a.model, "dataset": a.dataset, "precision": a.precision, "device": str(dev),
        "max_seq_len": a.max_seq_len, "accum_steps": 1, "memory_limit_bytes": limit,
        "limited_by": "--memory-limit" + (" (the capped caching allocator)" if cuda else
                                          " (the comparable total: not enforced on the CPU, compared)"),
        "method": ("one training step per probe (forward, backward, AdamW's step) of a fresh model; " +
                   ("torch.cuda.max_memory_allocated less the resident data set" if cuda else
                    "parameters + gradients + optimizer state + the tensors autograd saved (saved_tensors_hooks, "
                    "each storage once): comparable with ampbench's tracked total")),
        "max_batch": best, "peak_memory_at_max_batch_bytes": probes[best][1] if best else None,
        "first_batch_refused": (best or 0) + 1,
        "refused_would_need_bytes": probes.get((best or 0) + 1, (False, None))[1],
        "started_at": started,
        "probes": [{"batch": b, "fits": f, **({"peak_memory_bytes": t} if f else {"would_need_bytes": t})}
                   for b, (f, t) in sorted(probes.items())],
    }
    say("largest batch whose step holds at most %s bytes: %s" % (format(limit, ","), best))
    if dirty is not None:
        rec["git_dirty"] = dirty
    if a.out:
        pc.write_atomic(a.out, rec)
    return 0


def main():
    a = parse_args()
    started = pc.utc_now()
    import_torch()
    rank, world, local_rank = pc.launcher_env(PROG)
    lead = rank == 0
    say = pc.make_say(lead, a.quiet)
    task = TASKS[a.dataset]

    # ---- data: read, checked, tokenized (not timed) ----
    train_path, dev_path = task_files(a.data, a.dataset)
    train_rows, train_skipped = read_glue_split(train_path, a.dataset, "train.tsv")
    dev_rows, dev_skipped = read_glue_split(dev_path, a.dataset, task["dev"])
    n_train_all, n_test_all = len(train_rows), len(dev_rows)
    n_train = min(a.train_subset, n_train_all) if a.train_subset > 0 else n_train_all
    n_test = min(a.test_subset, n_test_all) if a.test_subset > 0 else n_test_all
    train_rows, dev_rows = train_rows[:n_train], dev_rows[:n_test]

    import transformers
    transformers.logging.set_verbosity_error()  # the loading report and truncation notes: our own lines say it
    vocab_path = a.vocab or DEFAULT_VOCAB
    if a.init_from and os.path.isfile(os.path.join(a.init_from, "vocab.txt")):
        own = os.path.join(a.init_from, "vocab.txt")
        if a.vocab and os.path.realpath(a.vocab) != os.path.realpath(own) and lead:
            print("%s: --vocab %s ignored: --init-from %s has its own vocab.txt" % (PROG, a.vocab, a.init_from),
                  file=sys.stderr)
        vocab_path = own
    elif a.init_from and not os.path.isdir(a.init_from):
        die("%s: no such folder (--init-from)" % a.init_from)
    tok, tok_class, slow, vocab_size = make_tokenizer(vocab_path)
    L = a.max_seq_len
    k_labels = len(task["labels"])
    kind = "sentence pairs" if task["b"] is not None else "sentences"
    packing = ("%s __call__ (truncation longest_first, padding max_length)" % tok_class if slow else
               "%s WordPieces (fast), packed by bert_glue.py with the slow tokenizer's longest_first rule" % tok_class)

    def counts(rows):
        c = [0] * k_labels
        for r in rows:
            c[r[2]] += 1
        return ", ".join("%s %d" % (name, c[i]) for i, name in enumerate(task["labels"]))

    def tokenize_splits(train_rows, dev_rows):
        """both splits tokenized (not timed), their descriptions and the seconds it took"""
        t_tok = time.perf_counter()
        tr = tokenize_rows(tok, slow, train_rows, L)
        te_ = tokenize_rows(tok, slow, dev_rows, L)
        tok_s = time.perf_counter() - t_tok
        def skipped(k):
            return " (%d short row%s skipped)" % (k, "" if k == 1 else "s") if k else ""

        train_desc = "GLUE %s train.tsv, %d of %d %s%s (%s), WordPiece to %d tokens, %d at the limit" % (
            task["folder"], n_train, n_train_all, kind, skipped(train_skipped), counts(train_rows), L, tr[3])
        test_desc = "GLUE %s %s, %d of %d %s%s (%s), WordPiece to %d tokens, %d at the limit" % (
            task["folder"], task["dev"], n_test, n_test_all, kind, skipped(dev_skipped), counts(dev_rows), L, te_[3])
        return tr, te_, train_desc, test_desc, tok_s

    if a.dry_run:
        _tr, _te, train_desc, test_desc, tok_s = tokenize_splits(train_rows, dev_rows)
        print("%s: %s (%s): %d train and %d dev %s; %s; %s; tokenized with %s from %s in %.1f s"
              % (PROG, a.dataset, a.data, n_train_all, n_test_all, kind, train_desc, test_desc, packing,
                 vocab_path, tok_s))
        return 0

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    # ---- device, precision, distribution ----
    dev, cuda = pc.select_device(PROG, a, lead, local_rank)
    limit = parse_size(a.memory_limit) if a.memory_limit else 0
    if limit and cuda:
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / torch.cuda.get_device_properties(dev).total_memory),
                                                   dev)
    elif limit and lead:
        print("%s: --memory-limit is recorded but not enforced on the CPU" % PROG, file=sys.stderr)
    pc.set_tf32(a.tf32)
    amp = a.precision == "amp"
    ac_dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(a.precision)

    # does this torch autocast to the dtype on this device? (1.13: CPU bf16 only)
    pc.check_precision(PROG, a.precision, dev, cuda, ac_dtype,
                       lambda: F.linear(torch.ones(2, 8, device=dev), torch.ones(4, 8, device=dev)),
                       "matmuls stay float32")

    # ---- tokenization, after the checks above so that a mode this machine cannot run fails at once ----
    tr, te_, train_desc, test_desc, tok_s = tokenize_splits(train_rows, dev_rows)
    say("%s: tokenized %d + %d rows to %d tokens in %.1f s (%s, %s)"
        % (a.dataset, n_train, n_test, L, tok_s, tok_class, "slow" if slow else "fast + own packing"))

    dist, backend = pc.init_distributed(rank, world, cuda)

    torch.manual_seed(a.seed)  # the model's initialisation (the same on every rank) and the dropout masks
    perm_gen = torch.Generator().manual_seed(a.seed)  # the same order on every rank

    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
        free0, total_mem = torch.cuda.mem_get_info(dev)

    def resident(tok_out, rows):
        return (torch.tensor(tok_out[0], dtype=torch.long).to(dev), torch.tensor(tok_out[1], dtype=torch.long).to(dev),
                torch.tensor(tok_out[2], dtype=torch.long).to(dev),
                torch.tensor([r[2] for r in rows], dtype=torch.long).to(dev))

    t_ids, t_tt, t_mask, t_y = resident(tr, train_rows)
    v_ids, v_tt, v_mask, v_y = resident(te_, dev_rows)
    gold = [r[2] for r in dev_rows]
    del tr, te_, train_rows, dev_rows
    gc.collect()
    resident_bytes = sum(t.numel() * t.element_size() for t in (t_ids, t_tt, t_mask, t_y, v_ids, v_tt, v_mask, v_y))
    meter = pc.MemoryMeter(dev, cuda, resident_bytes)  # VmRSS now; VmHWM reset on the CPU

    if a.find_max_batch:
        return find_max_batch(a, PROG, say, dev, cuda, amp, ac_dtype, limit, (t_ids, t_tt, t_mask, t_y), n_train,
                              resident_bytes, k_labels, vocab_size, started)

    # ---- model ----
    model, weights_desc, cfg = build_model(a, k_labels, vocab_size)
    model = model.to(dev)
    model.train()
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    H, Lyr, Fh = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size
    macs_per_sample = Lyr * (4 * L * H * H + 2 * L * H * Fh + 2 * L * L * H) + H * H + H * k_labels
    attn_impl = getattr(model.config, "_attn_implementation", None) or "eager (transformers %s)" % transformers.__version__
    arch = {"layers": Lyr, "hidden": H, "heads": cfg.num_attention_heads, "ffn": Fh, "vocab": cfg.vocab_size,
            "max_positions": cfg.max_position_embeddings, "type_vocab": cfg.type_vocab_size,
            "hidden_dropout": cfg.hidden_dropout_prob, "attention_dropout": cfg.attention_probs_dropout_prob,
            "classifier_dropout": getattr(cfg, "classifier_dropout", None), "layer_norm_eps": cfg.layer_norm_eps,
            "hidden_act": cfg.hidden_act, "num_labels": k_labels}
    say("model %s: %d layers, hidden %d, %d heads, ffn %d: %s parameters, %s multiply-adds per sample of %d tokens "
        "(forward); attention %s" % (a.model, Lyr, H, cfg.num_attention_heads, Fh, format(n_params, ","),
                                     format(macs_per_sample, ","), L, attn_impl))
    say("weights: %s" % weights_desc)

    net = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, device_ids=[dev.index] if cuda else None, bucket_cap_mb=a.bucket_mb)
    ln_ids = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters(recurse=False)}
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if ("bias" in name or "LayerNorm.weight" in name or id(p) in ln_ids) else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    n_decay = sum(p.numel() for p in decay)
    scaler = pc.make_scaler(a, dev, amp)
    autocast = pc.make_autocast(dev, ac_dtype)
    sync = pc.make_sync(dev, cuda)

    def forward(m, ids, tt, mask):
        return m(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits

    # ---- schedule ----
    group = a.batch_size * a.accum_steps * world
    steps_per_epoch = (n_train + group - 1) // group
    total_steps = steps_per_epoch * a.epochs
    if a.max_steps > 0:
        total_steps = min(total_steps, a.max_steps)

    # ---- stopping ----
    stop_requested = pc.StopRequest(world, dev, dist)

    def evaluate():
        """(mean loss, accuracy %, task metric %) over the dev rows"""
        model.eval()
        loss_sum = torch.zeros((), device=dev, dtype=torch.float64)
        preds = []
        with torch.no_grad():
            for pos in range(0, n_test, a.batch_size):
                sl = slice(pos, min(n_test, pos + a.batch_size))
                with autocast():
                    out = forward(model, v_ids[sl], v_tt[sl], v_mask[sl])
                loss_sum += F.cross_entropy(out.float(), v_y[sl], reduction="sum").double()
                preds.append(out.argmax(1))
        model.train()
        pred = torch.cat(preds).tolist()
        state["pred"] = pred
        acc = 100.0 * sum(1 for g, p in zip(gold, pred) if g == p) / n_test
        return loss_sum.item() / n_test, acc, task_metric(task["metric"], gold, pred, k_labels)

    # ---- the record ----
    commit, dirty = pc.git_info()
    state = {"epochs": [], "curve": [], "peak_used": 0}
    scale_log = pc.LossScaleLog(scaler.get_scale() if amp else 1.0)

    def record(complete, interrupted, peaks_per_rank=None):
        raw_peak, mem = meter.read(model, opt)
        epochs = state["epochs"]
        rec = {
            **pc.record_head(commit, started, complete, interrupted),
            "workload": {"model": a.model, "dataset": a.dataset, "train_samples": n_train, "test_samples": n_test,
                         "batch_size": a.batch_size, "epochs": a.epochs, "max_steps": a.max_steps,
                         "optimizer": "adamw", "lr": a.lr, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8,
                         "weight_decay": a.weight_decay, "weight_decay_parameters": n_decay,
                         "seed": a.seed, "accum_steps": a.accum_steps, "parameters": n_params,
                         "macs_per_sample": macs_per_sample, "lr_schedule": a.lr_schedule,
                         "warmup_steps": a.warmup_steps, "timing_skip_steps": a.timing_skip_steps,
                         "total_steps": total_steps, "shuffle": a.shuffle, "augment": False,
                         "train_subset": a.train_subset, "test_subset": a.test_subset,
                         "train_data": train_desc, "test_data": test_desc,
                         "max_seq_len": L, "metric": task["metric"], "num_labels": k_labels,
                         "labels": task["labels"], "init_from": a.init_from or None,
                         "clip_grad_norm": a.clip_grad_norm, "vocab": vocab_path, "architecture": arch,
                         "weights": weights_desc,
                         "notes": "no batch norm: data parallelism changes nothing but the sharding; dropout masks "
                                  "from each rank's torch generator (seed %d)" % a.seed},
            "precision": a.precision, "world_size": world,
            "host": pc.host_record(dev, cuda, pc.blas_desc(cuda, "transformers", transformers.__version__)),
            **pc.run_totals(epochs),
            "final_test_metric": epochs[-1]["test_metric"] if epochs else None,
            "peak_memory_bytes": mem,
            "memory_limit_bytes": limit or None, "memory_limit_enforced": bool(limit and cuda),
            # on the CPU the cap is not enforced: the run fits when its comparable total is within it
            "fits_in_memory": state.get("oom") is None and not (limit and not cuda and mem["total"] > limit),
            "mixed_precision": scale_log.mixed_precision_record(a.precision, a.init_scale, a.growth_factor, a.backoff_factor,
                                        a.growth_interval, epochs, a.loss_scale),
            "loss_curve": state["curve"],
            "peer": {"script": "peers/bert_glue.py", "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizer": tok_class, "tokenizer_slow": slow,
                     "packing": packing, "tokenize_time_s": tok_s, "attn_implementation": attn_impl,
                     "tf32": a.tf32, "timing_skip_steps": a.timing_skip_steps, "resident_data": True,
                     "ddp_backend": backend},
        }
        if dirty is not None:
            rec["git_dirty"] = dirty
        tp = pc.predictions_record(state.get("pred"), gold, k_labels)
        if tp:
            rec["test_predictions"] = tp
        if world > 1 or a.accum_steps > 1:
            rec["data_parallel"] = pc.data_parallel_record(world, a.accum_steps, backend, peaks_per_rank,
                                                           mem["total"], a.bucket_mb)
        if cuda:
            rec["gpu"] = pc.gpu_record(dev, total_mem, free0, state["peak_used"], resident_bytes, raw_peak)
        return rec

    def write(complete, interrupted, peaks=None):
        if a.out and lead:
            pc.write_atomic(a.out, record(complete, interrupted, peaks))

    say("%s on %s, %s, batch %d%s%s, %d steps (%d a epoch), lr %g %s, warm-up %d, weight decay %g, clip %g, %s%s"
        % (a.model, dev, a.precision, a.batch_size, " x %d accum" % a.accum_steps if a.accum_steps > 1 else "",
           " x %d ranks (%s)" % (world, backend) if world > 1 else "", total_steps, steps_per_epoch, a.lr,
           a.lr_schedule, a.warmup_steps, a.weight_decay, a.clip_grad_norm, train_desc,
           ", no shuffle" if not a.shuffle else ""))

    # ---- training ----
    params = [p for p in model.parameters() if p.requires_grad]
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
                blocks = pc.shard_blocks(n, a.batch_size, world, rank) or [None]  # None: a zero-weighted pass
                opt.zero_grad(set_to_none=True)
                step_loss = torch.zeros((), device=dev, dtype=torch.float64)
                for k, blk in enumerate(blocks):
                    mark = tally.data_begin()
                    idx = order[pos + blk[0]:pos + blk[1]] if blk is not None else order[:1]
                    xb = t_ids.index_select(0, idx)
                    tb = t_tt.index_select(0, idx)
                    mb = t_mask.index_select(0, idx)
                    yb = t_y.index_select(0, idx)
                    tally.data_end(mark)
                    # DDP's all-reduce on this rank's last micro-batch only
                    ctx = net.no_sync() if world > 1 and k < len(blocks) - 1 else contextlib.nullcontext()
                    with ctx:
                        with meter.saved_scope(net), autocast():
                            out = forward(net, xb, tb, mb)
                            loss_sum = F.cross_entropy(out.float(), yb, reduction="sum")
                        if blk is None:  # DDP's all-reduce must meet on every rank
                            loss_sum = loss_sum * 0.0
                        loss = loss_sum * (world / n)
                        if amp:
                            scaler.scale(loss).backward()
                        else:
                            loss.backward()
                    step_loss += loss_sum.detach().double()
                for g in opt.param_groups:
                    g["lr"] = pc.lr_at(a.lr_schedule, a.lr, step, total_steps, a.warmup_steps)
                took = True
                if amp:
                    if a.clip_grad_norm > 0:
                        scaler.unscale_(opt)
                        torch.nn.utils.clip_grad_norm_(params, a.clip_grad_norm)
                    scaler.step(opt)
                    scaler.update()
                    # one host sync per step, as ampbench's read-back; a static scale says itself whether it skipped
                    took = scale_log.update(scaler.get_scale(), step, e, getattr(scaler, "last_skipped", None))
                else:
                    if a.clip_grad_norm > 0:
                        torch.nn.utils.clip_grad_norm_(params, a.clip_grad_norm)
                    opt.step()
                step += 1
                # this rank's share of the step's world-mean loss; summed over ranks at log points
                tally.add(step_loss / n, n, took, step)
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
            test_loss, test_acc, test_metric = evaluate()
            eval_s = time.perf_counter() - te
            state["epochs"].append(tally.epoch_record(e, eval_s, test_loss, test_acc, {"test_metric": test_metric}))
            say(tally.done_line(e, "samples", test_loss, test_acc, scale_log.scale,
                                "" if task["metric"] == "accuracy" else ", test %s %.2f" % (
                                    "Matthews x 100" if task["metric"] == "matthews" else "F1 x 100", test_metric)))
            sys.stdout.flush()
            write(False, False)
            if interrupted or (a.max_steps > 0 and step >= a.max_steps):
                break
    except torch.cuda.OutOfMemoryError as err:  # under --memory-limit, or the GPU's own memory
        state["oom"] = str(err).splitlines()[0][:300]
        if lead:
            print("%s: out of memory: %s" % (PROG, state["oom"]), file=sys.stderr)
        if a.out and lead:
            rec = record(False, False)
            rec["out_of_memory"] = {"message": state["oom"]}
            pc.write_atomic(a.out, rec)
        return 3
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
