// match_attention (attention_pattern.h): walks back from O through P, the softmax's two
// reductions and the elementwise chain to S, checking each node's body and reads.
#include "tilegraph/attention_pattern.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "tilegraph/error.h"
#include "tilegraph/value_bounds.h"

namespace tessel {

namespace {

// The most elementwise steps between S and the softmax that the matcher follows (scale, mask,
// bias and casts take three or four).
constexpr int kMaxEpilogue = 8;

bool is_input(const Expr& e, int slot) { return e.op() == ExprOp::input && e.index() == slot; }

// `acc` reads, per tensor dimension r, axis axes[r] of the reader's domain (-1: the constant 0).
bool reads_axes(const Access& acc, const std::vector<int>& axes) {
  if (acc.is_gather() || acc.map.num_results() != static_cast<int>(axes.size())) return false;
  for (size_t r = 0; r < axes.size(); ++r) {
    const AffineExpr& row = acc.map.result(static_cast<int>(r));
    if (row.offset != 0) return false;
    for (int a = 0; a < static_cast<int>(row.coeffs.size()); ++a)
      if (row.coeffs[a] != (a == axes[r] ? 1 : 0)) return false;
  }
  return true;
}

std::vector<int> iota_axes(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Its output is its spatial domain, row-major (no reshape).
bool output_is_domain(const TeNode& node) {
  std::vector<int64_t> e = node.extents();
  e.resize(node.num_spatial());
  return node.output().shape == e;
}

std::vector<int64_t> spatial_extents(const TeNode& node) {
  std::vector<int64_t> e = node.extents();
  e.resize(node.num_spatial());
  return e;
}

bool only_readers(const OpGraph& g, NodeId n, std::set<NodeId> allowed) {
  const TensorId t = g.node_output(n);
  for (TensorId o : g.outputs())
    if (o == t) return false;
  for (NodeId c : g.consumers(t))
    if (!allowed.count(c)) return false;
  return true;
}

// A plain copy: body in0, one non-gather input of the same dtype, no reshape.
bool is_copy(const TeNode& node) {
  return node.num_reduction() == 0 && node.inputs().size() == 1 && !node.inputs()[0].is_gather() &&
         is_input(node.body(), 0) && node.output().dtype == node.inputs()[0].type.dtype && output_is_domain(node);
}

// mul(in_a, in_b) with {a, b} = {0, 1}.
bool is_product(const Expr& e) {
  return e.op() == ExprOp::mul && e.operands().size() == 2 &&
         ((is_input(e.operands()[0], 0) && is_input(e.operands()[1], 1)) ||
          (is_input(e.operands()[0], 1) && is_input(e.operands()[1], 0)));
}

// exp(sub(in_x, in_m)).
bool is_shifted_exp(const Expr& e, int x, int m) {
  return e.op() == ExprOp::exp && e.operands().size() == 1 && e.operands()[0].op() == ExprOp::sub &&
         is_input(e.operands()[0].operands()[0], x) && is_input(e.operands()[0].operands()[1], m);
}

// A copy that moves its input's elements: body in0, one non-gather input of the same dtype read
// through a permutation of its domain's axes (every tensor dimension one axis, coefficient 1,
// offset 0, the extents equal); its output may be a reshape of its domain (row-major, the same
// order). `axis[r]` is the domain axis that reads dimension r.
bool moves_elements(const TeNode& node, std::vector<int>* axis) {
  if (node.num_reduction() != 0 || node.inputs().size() != 1 || node.inputs()[0].is_gather() || !is_input(node.body(), 0) ||
      node.output().dtype != node.inputs()[0].type.dtype)
    return false;
  const Access& a = node.inputs()[0];
  const int ns = node.num_spatial();
  if (a.map.num_results() != ns || a.type.rank() != ns) return false;
  std::vector<int> of(ns, -1);
  std::vector<char> used(ns, 0);
  for (int r = 0; r < ns; ++r) {
    const AffineExpr& row = a.map.result(r);
    if (row.offset != 0) return false;
    for (int x = 0; x < static_cast<int>(row.coeffs.size()); ++x) {
      if (row.coeffs[x] == 0) continue;
      if (row.coeffs[x] != 1 || of[r] >= 0 || x >= ns || used[x]) return false;
      of[r] = x;
      used[x] = 1;
    }
    if (of[r] < 0 || node.axes()[of[r]].extent != a.type.shape[r]) return false;
  }
  if (axis) *axis = of;
  return true;
}

// Where O's axes land in the domain of the last of `copies` (each moving the one before): O's axis
// a is axis land[a] there.
std::vector<int> landing_axes(const OpGraph& g, NodeId o, const std::vector<NodeId>& copies) {
  std::vector<int> land = iota_axes(g.node(o).num_spatial());
  for (NodeId c : copies) {
    std::vector<int> axis;
    const bool moves = moves_elements(g.node(c), &axis);
    TESSEL_ASSERT(moves, "an output copy moves elements");
    for (int& l : land) l = axis[l];
  }
  return land;
}

// Row-major strides over the spatial domain of `node`.
std::vector<int64_t> domain_strides(const TeNode& node) {
  const int ns = node.num_spatial();
  std::vector<int64_t> st(ns, 1);
  for (int a = ns - 2; a >= 0; --a) st[a] = st[a + 1] * node.axes()[a + 1].extent;
  return st;
}

// The copies after O that a kernel can store through (AttentionPattern::output_copies): each the
// only reader of the node before, which is no graph output and has its domain as its output; the
// longest such chain that keeps O's last axis innermost.
std::vector<NodeId> output_copies_of(const OpGraph& g, NodeId o) {
  std::vector<NodeId> chain;
  for (NodeId cur = o;;) {
    if (!output_is_domain(g.node(cur))) break;
    const std::vector<NodeId> readers = g.consumers(g.node_output(cur));
    if (readers.size() != 1 || !only_readers(g, cur, {readers[0]}) || !moves_elements(g.node(readers[0]), nullptr)) break;
    chain.push_back(readers[0]);
    cur = readers[0];
  }
  const int ns = g.node(o).num_spatial();
  while (!chain.empty()) {
    const std::vector<int> land = landing_axes(g, o, chain);
    if (domain_strides(g.node(chain.back()))[land[ns - 1]] == 1) break;
    chain.pop_back();
  }
  return chain;
}

}  // namespace

std::vector<int64_t> attention_store_strides(const OpGraph& graph, const AttentionPattern& p) {
  const TeNode& last = graph.node(p.sink());
  const std::vector<int64_t> st = domain_strides(last);
  const std::vector<int> land = landing_axes(graph, p.out, p.output_copies);
  std::vector<int64_t> out(land.size());
  for (size_t a = 0; a < land.size(); ++a) out[a] = st[land[a]];
  return out;
}

std::vector<NodeId> AttentionPattern::nodes(const OpGraph& graph) const {
  std::set<NodeId> all(operand_copies.begin(), operand_copies.end());
  all.insert(score_epilogue.begin(), score_epilogue.end());
  for (NodeId n : {scores, max, sum, probs}) all.insert(n);
  std::vector<NodeId> out;
  for (NodeId n : graph.topological_order())
    if (all.count(n)) out.push_back(n);
  out.push_back(this->out);
  out.insert(out.end(), output_copies.begin(), output_copies.end());
  return out;
}

std::optional<AttentionPattern> match_attention(const OpGraph& g, NodeId o, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<AttentionPattern> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  // An output copy: the pattern of the node it copies, if it ends here.
  if (moves_elements(g.node(o), nullptr) && g.producer(g.node_inputs(o)[0]) >= 0) {
    NodeId first = o;
    while (moves_elements(g.node(first), nullptr) && g.producer(g.node_inputs(first)[0]) >= 0 &&
           moves_elements(g.node(g.producer(g.node_inputs(first)[0])), nullptr))
      first = g.producer(g.node_inputs(first)[0]);
    const NodeId core = g.producer(g.node_inputs(first)[0]);
    if (core < 0) return fail(cat("'", g.node(o).name(), "' copies a graph input"));
    std::string reason;
    std::optional<AttentionPattern> p = match_attention(g, core, &reason);
    if (!p) return fail(cat("'", g.node(o).name(), "' copies a node that ends no attention pattern: ", reason));
    const auto at = std::find(p->output_copies.begin(), p->output_copies.end(), o);
    if (at == p->output_copies.end())
      return fail(cat("'", g.node(o).name(), "' is not a copy of the attention output '", g.node(p->out).name(),
                      "' that a kernel can store through"));
    p->output_copies.erase(at + 1, p->output_copies.end());
    return p;
  }
  AttentionPattern p;
  p.out = o;
  const TeNode& on = g.node(o);
  const int ns = on.num_spatial();
  if (on.combiner() != Combiner::sum || on.num_reduction() != 1 || ns < 2 || on.inputs().size() != 2 || !is_product(on.body()))
    return fail(cat("'", on.name(), "' is not a product summed over one axis"));
  // O reads P at (b.., m, r): the spatial prefix, then its reduction axis.
  std::vector<int> p_axes = iota_axes(ns - 1);
  p_axes.push_back(ns);
  for (int slot = 0; slot < 2 && p.probs < 0; ++slot) {
    const NodeId prod = g.producer(g.node_inputs(o)[slot]);
    if (prod >= 0 && reads_axes(on.inputs()[slot], p_axes) && g.node(prod).num_reduction() == 0) p.probs = prod, p.probs_slot = slot;
  }
  if (p.probs < 0) return fail(cat("no input of '", on.name(), "' is a node read at (batch.., m, k)"));

  // P = exp(X - M) / L, read at (b.., m, n) and (b.., m, 0).
  const TeNode& pn = g.node(p.probs);
  if (pn.num_spatial() != ns || !output_is_domain(pn) || pn.inputs().size() != 3 || !only_readers(g, p.probs, {o}))
    return fail(cat("'", pn.name(), "' is not a softmax output read only by '", on.name(), "'"));
  const Expr& pb = pn.body();
  if (pb.op() != ExprOp::div || !is_input(pb.operands()[1], 2) || !is_shifted_exp(pb.operands()[0], 0, 1))
    return fail(cat("'", pn.name(), "' is not exp(x - max) / sum"));
  std::vector<int> row0 = iota_axes(ns - 1);
  row0.push_back(-1);
  if (!reads_axes(pn.inputs()[0], iota_axes(ns)) || !reads_axes(pn.inputs()[1], row0) || !reads_axes(pn.inputs()[2], row0))
    return fail(cat("'", pn.name(), "' does not read the softmax's rows"));
  const NodeId x = g.producer(g.node_inputs(p.probs)[0]);
  p.max = g.producer(g.node_inputs(p.probs)[1]);
  p.sum = g.producer(g.node_inputs(p.probs)[2]);
  if (x < 0 || p.max < 0 || p.sum < 0) return fail(cat("'", pn.name(), "' reads a graph input where a softmax step belongs"));

  // M = max_r X[b.., m, r]; L = sum_r exp(X[b.., m, r] - M[b.., m, 0]).
  std::vector<int> x_axes = iota_axes(ns - 1);
  x_axes.push_back(ns);
  const TeNode& mn = g.node(p.max);
  const TeNode& ln = g.node(p.sum);
  for (const TeNode* r : {&mn, &ln})
    if (r->num_spatial() != ns || r->num_reduction() != 1 || r->axes()[ns - 1].extent != 1 ||
        r->axes()[ns].extent != pn.axes()[ns - 1].extent)
      return fail(cat("'", r->name(), "' is not a reduction over the rows of '", pn.name(), "'"));
  if (mn.combiner() != Combiner::max || mn.inputs().size() != 1 || !is_input(mn.body(), 0) ||
      !reads_axes(mn.inputs()[0], x_axes) || g.producer(g.node_inputs(p.max)[0]) != x)
    return fail(cat("'", mn.name(), "' is not the row max of the softmax's input"));
  std::vector<int> m_axes = iota_axes(ns);
  if (ln.combiner() != Combiner::sum || ln.inputs().size() != 2 || !is_shifted_exp(ln.body(), 0, 1) ||
      !reads_axes(ln.inputs()[0], x_axes) || g.producer(g.node_inputs(p.sum)[0]) != x ||
      !(reads_axes(ln.inputs()[1], m_axes) || reads_axes(ln.inputs()[1], row0)) || g.producer(g.node_inputs(p.sum)[1]) != p.max)
    return fail(cat("'", ln.name(), "' is not the row sum of exp(x - max)"));
  if (!only_readers(g, p.max, {p.sum, p.probs}) || !only_readers(g, p.sum, {p.probs}) ||
      !only_readers(g, x, {p.max, p.sum, p.probs}))
    return fail("a softmax intermediate is read outside the softmax");

  // X back to S through elementwise steps, each read at the same point by the next.
  const std::vector<int64_t> extents = spatial_extents(pn);
  std::vector<NodeId> chain;
  NodeId cur = x;
  while (g.node(cur).num_reduction() == 0) {
    if (static_cast<int>(chain.size()) >= kMaxEpilogue)
      return fail(cat("more than ", kMaxEpilogue, " elementwise steps between the scores and the softmax"));
    const TeNode& en = g.node(cur);
    if (en.num_spatial() != ns || spatial_extents(en) != extents || !output_is_domain(en))
      return fail(cat("'", en.name(), "' is not elementwise over the scores"));
    chain.push_back(cur);
    NodeId next = -1;
    for (size_t k = 0; k < en.inputs().size(); ++k) {
      const NodeId prod = g.producer(g.node_inputs(cur)[k]);
      if (prod < 0 || en.inputs()[k].is_gather() || !reads_axes(en.inputs()[k], iota_axes(ns))) continue;
      const TeNode& pr = g.node(prod);
      if (pr.num_spatial() != ns || spatial_extents(pr) != extents || !only_readers(g, prod, {cur})) continue;
      if (next >= 0) return fail(cat("'", en.name(), "' combines two computed score-shaped tensors"));
      next = prod;
    }
    if (next < 0) return fail(cat("'", en.name(), "' does not read the scores"));
    cur = next;
  }
  p.scores = cur;
  std::reverse(chain.begin(), chain.end());
  p.score_epilogue = chain;
  const TeNode& sn = g.node(p.scores);
  if (sn.combiner() != Combiner::sum || sn.num_reduction() != 1 || sn.inputs().size() != 2 || !is_product(sn.body()) ||
      !output_is_domain(sn))
    return fail(cat("'", sn.name(), "' is not a product summed over one axis"));
  std::vector<int64_t> o_batch = spatial_extents(on), s_batch = extents;
  if (std::vector<int64_t>(o_batch.begin(), o_batch.end() - 1) != std::vector<int64_t>(s_batch.begin(), s_batch.end() - 1))
    return fail(cat("'", sn.name(), "' and '", on.name(), "' differ in their batch or row extents"));

  // Copies in front of Q, K and V.
  auto copies = [&](NodeId reader, int slot) {
    TensorId t = g.node_inputs(reader)[slot];
    for (NodeId prod = g.producer(t); prod >= 0 && is_copy(g.node(prod)) && only_readers(g, prod, {reader});
         prod = g.producer(t)) {
      p.operand_copies.push_back(prod);
      reader = prod;
      t = g.node_inputs(prod)[0];
    }
  };
  copies(p.scores, 0);
  copies(p.scores, 1);
  copies(o, 1 - p.probs_slot);
  p.output_copies = output_copies_of(g, o);
  return p;
}

int64_t AttentionKeyRanges::visited() const {
  int64_t n = 0;
  for (size_t b = 0; b < first.size(); ++b) n += end[b] - first[b];
  return n;
}

int64_t AttentionKeyRanges::plain() const {
  int64_t n = 0;
  for (size_t b = 0; b < plain_first.size(); ++b) n += plain_end[b] - plain_first[b];
  return n;
}

double attention_logit_bound(const OpGraph& graph, const AttentionPattern& p) {
  const TeNode& x = graph.node(p.logits());
  ValueBounds bounds(graph);
  bounds.assume(graph.node_output(p.scores), Interval{-kAttentionScoreBound, kAttentionScoreBound});
  IndexBox box;
  for (int a = 0; a < x.num_spatial(); ++a) {
    box.lo.push_back(0);
    box.hi.push_back(x.axes()[a].extent - 1);
  }
  const Interval r = bounds.node(p.logits(), box);
  // A finite logit is within its dtype's range: an f16 sum past 65504 is -inf (which the kernels
  // handle), not a large finite value.
  const double finite = x.output().dtype == DType::f16 ? 65504.0 : std::numeric_limits<double>::infinity();
  return std::max(std::min(std::abs(r.lo), finite), std::min(std::abs(r.hi), finite));
}

std::optional<AttentionKeyRanges> attention_key_ranges(const OpGraph& graph, const AttentionPattern& p, int64_t rows,
                                                       int64_t chunk) {
  if (p.score_epilogue.empty() || rows <= 0 || chunk <= 0) return std::nullopt;
  const TeNode& x = graph.node(p.logits());
  const int ns = x.num_spatial();
  if (ns < 2) return std::nullopt;
  const std::vector<int64_t> extents = spatial_extents(x);
  const int64_t queries = extents[ns - 2], keys = extents[ns - 1];
  ValueBounds bounds(graph);
  bounds.assume(graph.node_output(p.scores), Interval{-kAttentionScoreBound, kAttentionScoreBound});
  AttentionKeyRanges r;
  r.rows = rows;
  r.chunk = chunk;
  r.chunks = (keys + chunk - 1) / chunk;
  const int64_t blocks = (queries + rows - 1) / rows;
  bool any = false;
  // The score steps that read a side input per point (a mask; a scalar scale is not one), each
  // with that input and the identity it must hold over a box to be dropped (0 for a sum or a
  // difference, 1 for a product); none droppable when one has another form.
  struct Step {
    NodeId node;
    int input;
    double identity;
  };
  std::vector<Step> steps;
  bool droppable = true;
  for (size_t i = 0; i < p.score_epilogue.size() && droppable; ++i) {
    const NodeId n = p.score_epilogue[i];
    const TeNode& node = graph.node(n);
    const NodeId chained = i == 0 ? p.scores : p.score_epilogue[i - 1];
    for (int k = 0; k < static_cast<int>(node.inputs().size()); ++k) {
      const TensorId t = graph.node_inputs(n)[k];
      if (graph.producer(t) == chained || graph.tensor(t).type.num_elements() <= 1) continue;
      const Expr& body = node.body();
      const ExprOp op = body.op();
      const bool binary_of_inputs = (op == ExprOp::add || op == ExprOp::sub || op == ExprOp::mul) && body.operands().size() == 2 &&
                                    body.operands()[0].op() == ExprOp::input && body.operands()[1].op() == ExprOp::input;
      const bool side_second = binary_of_inputs && body.operands()[1].index() == k;
      if (!binary_of_inputs || (op == ExprOp::sub && !side_second) || node.output().dtype != node.inputs()[k].type.dtype) {
        droppable = false;
        break;
      }
      steps.push_back({n, k, op == ExprOp::mul ? 1.0 : 0.0});
    }
  }
  if (!droppable) steps.clear();
  auto box_of = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    IndexBox box;
    for (int a = 0; a < ns - 2; ++a) {
      box.lo.push_back(0);
      box.hi.push_back(extents[a] - 1);
    }
    box.lo.push_back(m0);
    box.hi.push_back(m1);
    box.lo.push_back(n0);
    box.hi.push_back(n1);
    return box;
  };
  // The logits over query rows [m0, m1] and keys [n0, n1] of every batch point.
  auto logits = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { return bounds.node(p.logits(), box_of(m0, m1, n0, n1)); };
  auto plain = [&](int64_t m0, int64_t m1, int64_t c) {
    if (steps.empty()) return false;
    const IndexBox box = box_of(m0, m1, c * chunk, std::min(keys, (c + 1) * chunk) - 1);
    for (const Step& st : steps) {
      const Interval v = bounds.input(st.node, st.input, box);
      if (v.lo != st.identity || v.hi != st.identity) return false;
    }
    return true;
  };
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t m0 = b * rows, m1 = std::min(queries, m0 + rows) - 1;
    std::vector<Interval> per_chunk;
    double floor = -std::numeric_limits<double>::infinity();  // a lower bound of every row's maximum
    for (int64_t c = 0; c < r.chunks; ++c) {
      per_chunk.push_back(logits(m0, m1, c * chunk, std::min(keys, (c + 1) * chunk) - 1));
      floor = std::max(floor, per_chunk.back().lo);
    }
    for (int64_t n : {int64_t{0}, keys - 1}) floor = std::max(floor, logits(m0, m1, n, n).lo);
    int32_t first = 0, end = static_cast<int32_t>(r.chunks);
    if (std::isfinite(floor)) {
      auto excluded = [&](int64_t c) { return per_chunk[c].hi - floor < -kAttentionExcludedGap; };
      while (first < end && excluded(first)) ++first;
      while (end > first && excluded(end - 1)) --end;
      TESSEL_ASSERT(first < end, "every chunk of a block excluded, yet its rows have a finite maximum");
    }
    any |= first > 0 || end < r.chunks;
    r.first.push_back(first);
    r.end.push_back(end);
    // The first run of plain chunks in [first, end).
    int32_t pf = first;
    while (pf < end && !plain(m0, m1, pf)) ++pf;
    int32_t pe = pf;
    while (pe < end && plain(m0, m1, pe)) ++pe;
    if (pe == pf) pf = pe = first;
    any |= pe > pf;
    r.plain_first.push_back(pf);
    r.plain_end.push_back(pe);
  }
  if (!any) return std::nullopt;
  for (const Step& st : steps) r.plain_steps.push_back(st.node);
  return r;
}

std::optional<AttentionPattern> match_attention_to(const OpGraph& graph, NodeId sink, std::string* why) {
  std::optional<AttentionPattern> p = match_attention(graph, sink, why);
  if (p && sink == p->out) p->output_copies.clear();
  return p;
}

}  // namespace tessel
