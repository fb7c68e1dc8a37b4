# Which CPU-sweep instances the change alters: the LLVM IR each build emits (--dump llvm, log lines
# dropped) compared per instance. /tmp/tessel_old, /tmp/tessel_new: the two builds; MODELS: the
# instances as models (instances.py --catalog cpu --out DIR).
HW=experiments/op_sweep/runs/cpu-2026-11-30-op-sweep/host-probe.json
for f in ${MODELS:-tmp_diag/cpuall}/*.json; do m=$(basename $f .json)
  for b in old new; do ${OLD_NEW_DIR:-/tmp}/tessel_$b compile $f --hw $HW --device cpu --dump llvm 2>/dev/null | grep -av "^\[\|repro" > /tmp/irx_$b.ll; done
  cmp -s /tmp/irx_old.ll /tmp/irx_new.ll && echo "$m same" || echo "$m differs"
done
