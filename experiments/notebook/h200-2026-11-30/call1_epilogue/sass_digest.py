# Digest of ncu --page source --print-source sass CSV: opcode histogram of executed warp instructions,
# stall samples per opcode, and the share of instructions/samples in regions split at the first WGMMA / last WGMMA.
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
ci = {h: i for i, h in enumerate(hdr)}
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
ins = [(r[ci["Address"]], r[ci["Source"]], num(r[ci["Instructions Executed"]]), num(r[ci["Warp Stall Sampling (All Samples)"]])) for r in data if len(r) > 5]
tot_i = sum(x[2] for x in ins); tot_s = sum(x[3] for x in ins)
wg = [k for k, x in enumerate(ins) if "WGMMA" in x[1] or "HGMMA" in x[1]]
first, last = (wg[0], wg[-1]) if wg else (0, 0)
print("instructions executed (warp) %.0f, samples %.0f, SASS lines %d, MMA lines %d..%d" % (tot_i, tot_s, len(ins), first, last))
for name, lo, hi in (("before first MMA", 0, first), ("MMA region", first, last + 1), ("after last MMA", last + 1, len(ins))):
    si = sum(x[2] for x in ins[lo:hi]); ss = sum(x[3] for x in ins[lo:hi])
    print("  %-18s instr %5.1f%%  samples %5.1f%%" % (name, 100 * si / max(tot_i, 1), 100 * ss / max(tot_s, 1)))
op_i = collections.Counter(); op_s = collections.Counter()
for a, s, i, sm in ins[last + 1:]:
    op = s.split()[0] if s else "?"
    if op.startswith("@"): op = s.split()[1]
    op = op.split(".")[0]
    op_i[op] += i; op_s[op] += sm
ti = sum(op_i.values()); ts = sum(op_s.values())
print("after last MMA, by opcode (instr %, samples %):")
for op, v in op_i.most_common(25): print("  %-10s %5.1f%%  %5.1f%%" % (op, 100 * v / ti, 100 * op_s[op] / max(ts, 1)))
