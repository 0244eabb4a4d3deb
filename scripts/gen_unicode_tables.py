#!/usr/bin/env python3
"""Writes data_loaders/unicode_tables.c, the Unicode data the WordPiece tokenizer
(data_loaders/wordpiece.c) needs to match Hugging Face's BertTokenizer, from this Python's
unicodedata: character classes (C*, Zs, Mn, P*), the lowercase mapping of str.lower(), and per
code point the result of NFD followed by dropping category Mn (BasicTokenizer's strip accents).
The output depends only on the Unicode version of unicodedata, which its first line names.

  scripts/gen_unicode_tables.py [--check] [OUT]     (OUT: data_loaders/unicode_tables.c)

--check compares instead of writing and exits 1 when the file differs (another Unicode version,
or an edited file). Every assumption wordpiece.c makes about the data is asserted here, and the
table-driven strip accents is checked against unicodedata.normalize on crafted strings."""
import os
import sys
import unicodedata as ud

MAX_CP = 0x110000
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3  # decomposed arithmetically in wordpiece.c
BARRIER = 0x110000  # in a strip sequence: a dropped combining mark of class 0 ends a reordering run
SEQ = 0x80000000

# character classes, as unicode_tables.h numbers them
OTHER, CONTROL, SPACE, MARK_BARRIER, MARK, PUNCT, REORDER = range(7)
AB_UC_CLASS_BITS = 3


def nfd(s):
    return ud.normalize("NFD", s)


def strip_accents(s):
    """transformers' BasicTokenizer._run_strip_accents"""
    return "".join(c for c in nfd(s) if ud.category(c) != "Mn")


def char_class(cp):
    c = chr(cp)
    cat = ud.category(c)
    if cat[0] == "C":
        return CONTROL
    if cat == "Zs":
        return SPACE
    if cat == "Mn":
        # a mark is a reordering barrier when its decomposition holds a character of class 0
        return MARK_BARRIER if any(ud.combining(x) == 0 for x in nfd(c)) else MARK
    if cat[0] == "P":
        return PUNCT
    if ud.combining(c):
        return REORDER  # survives strip accents and takes part in canonical ordering
    return OTHER


def classes():
    out, prev = [], None
    for cp in range(MAX_CP):
        k = char_class(cp)
        if k != prev:
            out.append((cp, k))
            prev = k
    return out


def lower_tables():
    """single code point mappings as (lo, hi, delta, stride) runs; longer ones apart"""
    runs, multi = [], []
    mapped = {cp: chr(cp).lower() for cp in range(MAX_CP) if chr(cp).lower() != chr(cp)}
    for cp in sorted(mapped):
        low = mapped[cp]
        # tokenize() lowers the text one character at a time, then BasicTokenizer lowers each word
        # again: that second pass must change nothing, and without a capital sigma in the result
        # str.lower()'s final-sigma context never arises.
        assert low.lower() == low and "\u03a3" not in low, hex(cp)
        if len(low) != 1:
            multi.append((cp, [ord(x) for x in low]))
            continue
        delta = ord(low) - cp
        if runs:
            lo, hi, d, stride = runs[-1]
            step = cp - hi
            # a stride-2 run must not cover a mapped code point it skips (runs stay disjoint)
            if d == delta and (step == 1 and stride in (0, 1) or step == 2 and stride in (0, 2) and hi + 1 not in mapped):
                runs[-1] = [lo, cp, d, step]
                continue
        runs.append([cp, cp, delta, 0])
    return [(lo, hi, d, max(stride, 1)) for lo, hi, d, stride in runs], multi


def ccc(cp):
    return ud.combining(chr(cp))


def strip_sequence(cp):
    """NFD of one code point with the marks of category Mn dropped, a BARRIER left where a dropped
    mark of combining class 0 ends a reordering run and is not made redundant by a neighbouring
    starter (a survivor of class 0)"""
    out = []
    for x in nfd(chr(cp)):
        if ud.category(x) != "Mn":
            out.append(ord(x))
        elif ccc(ord(x)) == 0:
            out.append(BARRIER)
    keep = []
    for i, v in enumerate(out):
        if v == BARRIER:
            # first in the sequence, a barrier ends the run the text before had open
            prev_resets = bool(keep) and (keep[-1] == BARRIER or ccc(keep[-1]) == 0)
            nxt = out[i + 1] if i + 1 < len(out) else None
            next_resets = nxt is not None and (nxt == BARRIER or ccc(nxt) == 0)
            if prev_resets or next_resets:
                continue
        keep.append(v)
    return keep


def strip_tables():
    """for every code point whose strip result is not itself, except Hangul syllables, marks (gone
    whole) and the controls and spaces _clean_text has dealt with before"""
    entries = []
    for cp in range(MAX_CP):
        if HANGUL_FIRST <= cp <= HANGUL_LAST or char_class(cp) in (CONTROL, SPACE, MARK, MARK_BARRIER):
            continue
        seq = strip_sequence(cp)
        if seq != [cp]:
            entries.append((cp, seq))
    return entries


def simulate_strip(s, table, cls_of):
    """wordpiece.c's strip accents, in Python, for the self-check"""
    out, run = [], 0
    for ch in s:
        cp = ord(ch)
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            seq = [ord(x) for x in nfd(ch)]
        else:
            k = cls_of(cp)
            if k == MARK_BARRIER:
                run = len(out)
                continue
            if k == MARK:
                continue
            seq = table.get(cp, [cp])
        for v in seq:
            if v == BARRIER:
                run = len(out)
            elif ccc(v) == 0:
                out.append(v)
                run = len(out)
            else:
                pos = len(out)
                while pos > run and ccc(out[pos - 1]) > ccc(v):
                    pos -= 1
                out.insert(pos, v)
    return "".join(chr(v) for v in out)


def self_check(entries, cls_list):
    import bisect
    starts = [s for s, _ in cls_list]
    kinds = [k for _, k in cls_list]

    def cls_of(cp):
        return kinds[bisect.bisect_right(starts, cp) - 1]

    table = dict(entries)
    for cp in range(MAX_CP):
        # wordpiece.c takes every character outside AB_UC_REORDER and the marks for a starter
        assert cls_of(cp) in (REORDER, MARK, MARK_BARRIER) or ccc(cp) == 0, hex(cp)
    for cp in range(MAX_CP):
        if ud.category(chr(cp)) == "Mn":
            assert strip_accents(chr(cp)) == "", hex(cp)  # a mark goes whole
    for cp, seq in entries:
        for v in seq:
            if v != BARRIER:
                assert ud.category(chr(v)) != "Mn" and not chr(v).isspace(), hex(cp)
                # a survivor of nonzero class is one wordpiece.c reorders: it must be tagged so
                assert (ccc(v) != 0) == (cls_of(v) == REORDER), hex(v)
    # every mark of class 0 and every character that reorders or decomposes into a barrier, each
    # next to the others and to marks of high and low class, as pairs and triples
    probe = sorted({cp for cp, seq in entries if BARRIER in seq or any(v != BARRIER and ccc(v) for v in seq)}
                   | {cp for cp in range(MAX_CP) if cls_of(cp) in (REORDER,)}
                   | {0x0301, 0x0316, 0x05B0, 0x0B56, 0x0E38, 0x302A, 0x1D16D, 0x0041, 0x00C5, 0xAC01})
    extra = [cp for cp in range(MAX_CP) if cls_of(cp) == MARK_BARRIER][::40]
    probe += extra
    for a in probe:
        for b in probe:
            s = chr(a) + chr(b)
            assert simulate_strip(s, table, cls_of) == strip_accents(s), (hex(a), hex(b))
    small = probe[::3]
    for a in small:
        for b in small:
            for c in small[::5]:
                s = chr(a) + chr(b) + chr(c)
                assert simulate_strip(s, table, cls_of) == strip_accents(s), (hex(a), hex(b), hex(c))
    # Python's str.split() separators that survive _clean_text: Zs and C* are dealt with there
    extra_space = [cp for cp in range(MAX_CP) if chr(cp).isspace() and ud.category(chr(cp)) != "Zs"
                   and ud.category(chr(cp))[0] != "C"]
    return extra_space


def fmt_list(values, fmt, per_line):
    lines = []
    for i in range(0, len(values), per_line):
        lines.append("    " + " ".join(fmt(v) + "," for v in values[i:i + per_line]))
    return "\n".join(lines)


def generate():
    cls_list = classes()
    lower_runs, lower_multi = lower_tables()
    entries = strip_tables()
    extra_space = self_check(entries, cls_list)
    reorder = [cp for cp in range(MAX_CP) if char_class(cp) == REORDER]

    pool = []

    def seq_value(seq):
        if len(seq) == 1 and seq[0] != BARRIER:
            return seq[0]
        assert len(seq) < 8
        off = len(pool)
        pool.extend(seq)
        return SEQ | off << 3 | len(seq)

    # strip keys as ranges of consecutive code points, values one per key
    key_ranges, values = [], []
    for cp, seq in entries:
        if key_ranges and key_ranges[-1][1] + 1 == cp:
            key_ranges[-1][1] = cp
        else:
            key_ranges.append([cp, cp, len(values)])
        values.append(seq_value(seq))
    multi = [(cp, seq_value(seq)) for cp, seq in lower_multi]

    o = []
    o.append("/* Unicode %s data for the WordPiece tokenizer (wordpiece.c), generated from Python's unicodedata\n"
             " * by scripts/gen_unicode_tables.py: do not edit (unicode_tables.h says what each table holds). */"
             % ud.unidata_version)
    o.append('#include "unicode_tables.h"\n')
    o.append('const char ab_uc_unicode_version[] = "%s";\n' % ud.unidata_version)
    o.append("const uint32_t ab_uc_class[] = {")
    o.append(fmt_list([s << AB_UC_CLASS_BITS | k for s, k in cls_list], lambda v: "0x%x" % v, 10))
    o.append("};")
    o.append("const size_t ab_uc_class_count = %d;\n" % len(cls_list))
    o.append("const ab_uc_delta_range ab_uc_lower[] = {")
    o.append(fmt_list(lower_runs, lambda r: "{0x%x, 0x%x, %d, %d}" % r, 4))
    o.append("};")
    o.append("const size_t ab_uc_lower_count = %d;" % len(lower_runs))
    o.append("const ab_uc_pair ab_uc_lower_long[] = {")
    o.append(fmt_list(multi, lambda r: "{0x%x, 0x%x}" % r, 4))
    o.append("};")
    o.append("const size_t ab_uc_lower_long_count = %d;\n" % len(multi))
    o.append("const ab_uc_key_range ab_uc_strip_keys[] = {")
    o.append(fmt_list([tuple(r) for r in key_ranges], lambda r: "{0x%x, 0x%x, %d}" % r, 4))
    o.append("};")
    o.append("const size_t ab_uc_strip_keys_count = %d;" % len(key_ranges))
    o.append("const uint32_t ab_uc_strip_values[] = {")
    o.append(fmt_list(values, lambda v: "0x%x" % v, 10))
    o.append("};\n")
    o.append("const uint32_t ab_uc_seq[] = {")
    o.append(fmt_list(pool, lambda v: "0x%x" % v, 10))
    o.append("};\n")
    o.append("const ab_uc_pair ab_uc_reorder_ccc[] = {")
    o.append(fmt_list([(cp, ccc(cp)) for cp in reorder], lambda r: "{0x%x, %d}" % r, 6))
    o.append("};")
    o.append("const size_t ab_uc_reorder_ccc_count = %d;\n" % len(reorder))
    o.append("const uint32_t ab_uc_split_extra[] = {%s};" % ", ".join("0x%x" % v for v in extra_space))
    o.append("const size_t ab_uc_split_extra_count = %d;" % len(extra_space))
    return "\n".join(o) + "\n"



def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = args[0] if args else os.path.join(root, "data_loaders", "unicode_tables.c")
    text = generate()
    if check:
        with open(out, encoding="utf-8") as f:
            same = f.read() == text
        print("%s: %s (Unicode %s)" % (out, "up to date" if same else "DIFFERS", ud.unidata_version))
        return 0 if same else 1
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print("%s: written (Unicode %s, %d bytes)" % (out, ud.unidata_version, len(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
