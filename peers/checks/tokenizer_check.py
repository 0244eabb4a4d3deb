#!/usr/bin/env python3
"""The WordPiece tokenizer (data_loaders/wordpiece.c, through tests/wordpiece_dump) against
Hugging Face's BertTokenizer (the slow, Python one, from_pretrained on bert-base-uncased's
vocab.txt): input ids, token type ids and attention mask must be equal, element for element, at
max_len 128 with truncation "longest_first" and padding to max_len, on

  1. the first 300 sentences of GLUE SST-2 dev.tsv and of train.tsv (single texts),
  2. the first 300 pairs of RTE dev.tsv (sentence1, sentence2: pairs, some truncated),
  3. crafted texts: accents, CJK, controls, special tokens inside words, long words, marks, and
     pairs where both sides are long (a tie in longest_first),
  4. random strings over those characters and the whole code space (seeded), alone, without
     [CLS]/[SEP], when this Python's Unicode version is the one unicode_tables.c was made from
     (otherwise a code point assigned in one version and not the other would differ).

usage: tokenizer_check.py WORDPIECE_DUMP DATA_ROOT
Exit 0 when all agree, 1 on a mismatch, 77 (skip) without transformers or the data."""
import os
import random
import re
import subprocess
import sys
import unicodedata

MAX_LEN = 128
N_EACH = 300

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: nothing to fetch
try:
    import transformers
    from transformers import BertTokenizer
    from transformers.utils import logging as hf_logging
except Exception as e:  # ImportError, or a broken install
    print("SKIPPED: test_tokenizer_hf: transformers is not importable (%s)" % e)
    sys.exit(77)


def read_tsv(path, columns):
    """the named columns of a plain TSV file with a header line (no quoting)"""
    with open(path, encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")
    head = lines[0].rstrip("\r").split("\t")
    idx = [head.index(c) for c in columns]
    rows = []
    for line in lines[1:]:
        line = line.rstrip("\r")
        if not line:
            continue
        cells = line.split("\t")
        rows.append(tuple(cells[i] for i in idx))
    return rows


CRAFTED = [
    "Héllo Wörld", "HELLO, world!!", "unaffable", "", "   ", " \r ", "a\x00b\x07c\x1b[0md\u200be",
    "中文字 漢語 日本語", "한국어 가각힣", "İstanbul ΟΔΟΣ ΑΣ.Β", "naïve café résumé Ångström",
    "x[SEP]y [CLS] [PAD][UNK][MASK] [sep] [Sep] [SE P]", "don't stop-believing (ok?) $5.00 #1 @me",
    "«quoted» “smart” ‘single’ — dash… ¿qué? ¡sí!", "a" * 100, "a" * 101, "é" * 101, "ab" * 60 + " end",
    "line\u2028sep\u2029para\u00a0nbsp\u3000ideo", "\ufeffbom \ufffdrepl \ue000private", "Ǆemal ǅ ǆ ĳ Ĳ ß ẞ ﬁ",
    "e\u0301 e\u0316\u0301 \u0344 \u0f73 \u037e \u1fef", "the quick brown fox jumps over the lazy dog " * 8,
]


def main():
    if len(sys.argv) != 3:
        print("usage: tokenizer_check.py WORDPIECE_DUMP DATA_ROOT", file=sys.stderr)
        return 2
    dump, root = sys.argv[1], sys.argv[2]
    vocab_dir = os.path.join(root, "bert-base-uncased")
    files = {k: os.path.join(root, "glue", k) for k in ("SST-2/dev.tsv", "SST-2/train.tsv", "RTE/dev.tsv")}
    missing = [p for p in [os.path.join(vocab_dir, "vocab.txt")] + list(files.values()) if not os.path.isfile(p)]
    if missing:
        print("SKIPPED: test_tokenizer_hf: no %s" % ", ".join(missing))
        return 77
    hf_logging.set_verbosity_error()  # longest_first on pairs warns at every call
    tok = BertTokenizer.from_pretrained(vocab_dir)

    cases = []  # (what, a, b)
    for name in ("SST-2/dev.tsv", "SST-2/train.tsv"):
        for i, (s,) in enumerate(read_tsv(files[name], ["sentence"])[:N_EACH]):
            cases.append(("%s:%d" % (name, i + 2), s, None))
    for i, (a, b) in enumerate(read_tsv(files["RTE/dev.tsv"], ["sentence1", "sentence2"])[:N_EACH]):
        cases.append(("RTE/dev.tsv:%d" % (i + 2), a, b))
    for i, s in enumerate(CRAFTED):
        cases.append(("crafted %d" % i, s, None))
    cases.append(("crafted pair", CRAFTED[-1], CRAFTED[5]))
    cases.append(("crafted pair 2", "short one", CRAFTED[-1] * 2))
    # both long: longest_first reaches a tie (72 + 72 tokens), and then an odd difference
    cases.append(("crafted pair 3", CRAFTED[-1], CRAFTED[-1]))
    cases.append(("crafted pair 4", CRAFTED[-1] + "one more", CRAFTED[-1].upper()))
    cases.append(("crafted pair 5", CRAFTED[-1], "and " + CRAFTED[-1]))
    for what, a, b in cases:
        assert "\n" not in a and "\t" not in a and (b is None or ("\n" not in b and "\t" not in b)), what

    text = "".join(a + ("\t" + b if b is not None else "") + "\n" for _, a, b in cases)
    got = subprocess.run([dump, os.path.join(vocab_dir, "vocab.txt"), str(MAX_LEN)], input=text.encode("utf-8"),
                         capture_output=True)
    if got.returncode not in (0, 1):
        print("FAIL: %s exited with %d: %s" % (dump, got.returncode, got.stderr.decode(errors="replace")))
        return 1
    lines = got.stdout.decode().split("\n")
    bad = truncated = 0
    for k, (what, a, b) in enumerate(cases):
        ref = tok(a, b, max_length=MAX_LEN, truncation="longest_first", padding="max_length")
        want = [ref["input_ids"], ref["token_type_ids"], ref["attention_mask"]]
        line = lines[k] if k < len(lines) else "(no output)"
        fields = line.split("\t")
        mine = [[int(x) for x in f.split()] for f in fields] if len(fields) == 3 else None
        n_full = len(tok.encode(a, b, add_special_tokens=True))
        truncated += n_full > MAX_LEN
        if mine != want:
            bad += 1
            if bad <= 5:
                print("MISMATCH %s: %r%s" % (what, a[:80], "" if b is None else " | %r" % b[:80]))
                print("  hf:   %s" % want[0])
                print("  mine: %s" % line[:600])
    count = {k: sum(w.startswith(k) for w, _, _ in cases) for k in ("SST-2", "RTE", "crafted")}
    print("test_tokenizer_hf: %d texts (%d SST-2, %d RTE pairs, %d crafted), %d of them truncated to %d: %s"
          % (len(cases), count["SST-2"], count["RTE"], count["crafted"], truncated, MAX_LEN,
             "all equal" if not bad else "%d differ" % bad))

    # random strings, ids alone (no special tokens), when the Unicode versions agree
    tables = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data_loaders", "unicode_tables.c")
    with open(tables, encoding="utf-8") as f:
        m = re.search(r"Unicode (\S+) data", f.readline())
    made_from = m.group(1) if m else "?"
    if made_from != unicodedata.unidata_version:
        print("test_tokenizer_hf: random strings left out: unicode_tables.c is Unicode %s, this Python's %s"
              % (made_from, unicodedata.unidata_version))
    else:
        bad_random = random_strings(tok, dump, os.path.join(vocab_dir, "vocab.txt"))
        bad += bad_random
    print("transformers %s, Python unicodedata %s" % (transformers.__version__, unicodedata.unidata_version))
    return 1 if bad else 0


def random_strings(tok, dump, vocab, count=3000, seed=12345):
    rng = random.Random(seed)
    pools = ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", " \t\r  ",
             "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "éèêëÉÈÀÁÂÃÄÅàáâãäåçÇñÑöÖøØüÜßẞæÆœŒİıĳǅǈ",
             "ΑΒΓΔΕΖΗΘΣσςΟΩάέήίόύώΐΰ΅ΆͅΪ", "中文字漢語日本語한국어가각힣ㄱㅏ",
             "\u0300\u0301\u0308\u0327\u0316\u05b0\u0b56\u0e38\u302a\u302e\U0001d16d\U0001d165\U0001d15f"
             "\U0001d160\u1b44\u1b35\u0cc0\u0cbf",
             "\x00\x01\x07\x1b\x7f\x85\u200b\u200d\ufeff\ufffd\ue000\u00ad\u2028\u2029\u00a0\u3000\u2000\u1680\x0b",
             "«»“”‘’„‹›¡¿…–—‐·•†‡§¶、。「」『』【】！？（）",
             "\u037e\u0387\u1fef\u1fed\u1fc1\u2126\u212b\uf900\ufa0e\U0002f800\u0344\u0f73\u0f76\u1e9e\u1e9b"]
    words = ["[SEP]", "[CLS]", "[PAD]", "[UNK]", "[MASK]", "[sep]", "[SE", "P]", "##", "un", "##aff", "able"]

    def any_char():
        while True:
            c = rng.choice([rng.randrange(0x80, 0x800), rng.randrange(0x800, 0x10000),
                            rng.randrange(0x10000, 0x110000), rng.randrange(0x20, 0x7F)])
            if not 0xD800 <= c <= 0xDFFF and c != 0x0A:
                return chr(c)

    strs = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(0, 40)):
            p = rng.randrange(len(pools) + 2)
            parts.append(any_char() if p == len(pools) else rng.choice(words) if p > len(pools)
                         else rng.choice(pools[p]))
        strs.append("".join(parts))
    got = subprocess.run([dump, vocab, "0"], input="".join(s + "\n" for s in strs).encode("utf-8"),
                         capture_output=True)
    lines = got.stdout.decode().split("\n")
    bad = 0
    for k, s in enumerate(strs):
        want = tok.encode(s, add_special_tokens=False)
        line = lines[k] if k < len(lines) else "(no output)"
        mine = [int(x) for x in line.split()] if not line.startswith("error") and line != "(no output)" else line
        if mine != want:
            bad += 1
            if bad <= 5:
                print("MISMATCH random %d: %r\n  hf:   %s\n  mine: %s" % (k, s, want, line[:600]))
    print("test_tokenizer_hf: %d random strings (seed %d), ids alone: %s"
          % (count, seed, "all equal" if not bad else "%d differ" % bad))
    return bad


if __name__ == "__main__":
    sys.exit(main())
