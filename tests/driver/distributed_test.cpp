// Graphs spread over a device mesh (docs/distributed.md): plans found by the search and plans
// pinned by hand, every collective kind, partitioned per device and run with ranks as threads
// (distributed/), each checked against the single-device interpreter. The same under mpirun with
// processes as ranks: tests/CMakeLists.txt's mpirun tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>

#include "distributed/spmd_runner.h"
#include "../model_builder.h"
#include "policy/shard_plan.h"
#include "tilegraph/compare.h"
#include "tilegraph/interpreter.h"

using namespace tessel;
using tessel::testing::ModelBuilder;

namespace {

HwSpec cpu_cluster() { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx512-cluster-16.json"); }
HwSpec dgx() { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-dgx-h100.json"); }

std::vector<HostTensor> random_inputs(const OpGraph& g) {
  std::vector<HostTensor> out;
  uint64_t seed = 11;
  for (TensorId t : g.inputs()) out.push_back(materialize_random(g.tensor(t).type, RandomInit{RandomInit::Dist::normal, 0, 1, seed++}));
  return out;
}

/// Runs `plan` on threads as ranks and checks every rank's outputs against the interpreter.
/// Returns the transfers device 0 ran.
std::vector<Transfer> check_plan_runs(const OpGraph& g, const ShardPlan& plan, SegmentCompiler compile = interpreter_segments(),
                                      std::vector<HostTensor> inputs = {}) {
  if (inputs.empty()) inputs = random_inputs(g);
  const std::vector<HostTensor> expected = interpret(g, inputs);
  const int64_t n = plan.mesh.devices();
  std::vector<std::unique_ptr<Communicator>> comms = thread_mesh(n);
  std::vector<std::vector<HostTensor>> got(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        got[r] = run_sharded(g, plan, inputs, *comms[r], compile);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        comms[r]->abort();
      }
    });
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    REQUIRE(got[r].size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const CompareResult c = compare_tensors(got[r][i], expected[i]);
      INFO("output " << i << ": " << c.message);
      CHECK(c.ok);
    }
  }
  return partition(g, plan, 0).transfers;
}

bool has(const std::vector<Transfer>& ts, Collective c) {
  return std::any_of(ts.begin(), ts.end(), [&](const Transfer& t) { return t.step.collective == c; });
}

OpGraph mlp(int64_t tokens, int64_t hidden, int64_t ffn) {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {tokens, hidden});
  const std::string h = b.op("MatMul", {x, b.weight("w1", {hidden, ffn}, 1, -0.3, 0.3)});
  const std::string a = b.op("Relu", {h});
  const std::string y = b.op("MatMul", {a, b.weight("w2", {ffn, hidden}, 2, -0.3, 0.3)});
  return b.graph(b.op("Add", {y, x}));
}

/// A BERT-style encoder layer: 4 heads of 8, batch 2, sequence 8.
OpGraph bert_layer() {
  const int64_t B = 2, S = 8, H = 32, heads = 4, hd = 8, F = 64;
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {B, S, H});
  auto proj = [&](const std::string& in, const std::string& name, int64_t k, int64_t n, uint64_t seed) {
    const std::string mm = b.op("MatMul", {in, b.weight(name + "_w", {k, n}, seed, -0.3, 0.3)});
    return b.op("Add", {mm, b.weight(name + "_b", {n}, seed + 100, -0.1, 0.1)});
  };
  auto heads_of = [&](const std::string& t, std::vector<int64_t> perm) {
    const std::string r = b.op("Reshape", {t, b.weight_i64(t + "_shape", {B, S, heads, hd})});
    return b.op("Transpose", {r}, {{"perm", perm}});
  };
  const std::string q = heads_of(proj(x, "q", H, H, 1), {0, 2, 1, 3});
  const std::string k = heads_of(proj(x, "k", H, H, 2), {0, 2, 3, 1});
  const std::string v = heads_of(proj(x, "v", H, H, 3), {0, 2, 1, 3});
  const std::string s = b.op("Mul", {b.op("MatMul", {q, k}), b.weight("scale", {1}, 9, 0.35, 0.35)});
  const std::string p = b.op("Softmax", {s});
  const std::string o = b.op("Transpose", {b.op("MatMul", {p, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const std::string merged = b.op("Reshape", {o, b.weight_i64("merged_shape", {B, S, H})});
  const std::string attn = b.op("Add", {proj(merged, "o", H, H, 4), x});
  const std::string ln1 = b.op("LayerNormalization", {attn, b.weight("g1", {H}, 5, 0.9, 1.1), b.weight("b1", {H}, 6, -0.1, 0.1)});
  const std::string f = b.op("Gelu", {proj(ln1, "f1", H, F, 7)});
  const std::string out = b.op("Add", {proj(f, "f2", F, H, 8), ln1});
  return b.graph(b.op("LayerNormalization", {out, b.weight("g2", {H}, 10, 0.9, 1.1), b.weight("b2", {H}, 11, -0.1, 0.1)}));
}

/// A LLaMA-style block's MLP half: RMSNorm, SwiGLU, residual.
OpGraph llama_mlp(int64_t tokens, int64_t hidden, int64_t ffn) {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {tokens, hidden});
  const std::string n = b.op("RMSNormalization", {x, b.weight("norm", {hidden}, 1, 0.9, 1.1)});
  const std::string gate = b.op("MatMul", {n, b.weight("gate_w", {hidden, ffn}, 2, -0.3, 0.3)});
  const std::string up = b.op("MatMul", {n, b.weight("up_w", {hidden, ffn}, 3, -0.3, 0.3)});
  const std::string act = b.op("Mul", {b.op("Mul", {gate, b.op("Sigmoid", {gate})}), up});
  const std::string down = b.op("MatMul", {act, b.weight("down_w", {ffn, hidden}, 4, -0.3, 0.3)});
  return b.graph(b.op("Add", {down, x}));
}

ShardSearch search(const OpGraph& g, const std::string& mesh, const std::string& pins = "", const HwSpec& spec = cpu_cluster()) {
  const Mesh m = parse_mesh(mesh, "test");
  ShardSearchOptions o;
  std::istringstream ss(pins);
  std::string pin;
  while (ss >> pin) parse_pin(pin, m, o.constraints);
  return search_shard_plan(g, m, spec, o);
}

}  // namespace

TEST_CASE("distributed: an MLP in Megatron's plan (pinned) moves one all-reduce's bytes and matches the interpreter on 2 and 4 ranks") {
  const OpGraph g = mlp(16, 32, 64);
  for (int64_t ranks : {2, 4}) {
    CAPTURE(ranks);
    const ShardSearch s = search(g, std::to_string(ranks), "w1=S1 w2=S0");
    const std::vector<Transfer> ts = check_plan_runs(g, s.plan);
    // The row-parallel product's partial sums: one all-reduce, or (Megatron's sequence-parallel
    // form, cheaper for the residual add after it) a reduce-scatter and an all-gather.
    REQUIRE(!ts.empty());
    REQUIRE(ts.size() <= 2);
    CHECK((has(ts, Collective::all_reduce) || has(ts, Collective::reduce_scatter)));
    double bytes = 0;
    for (const PlannedTransfer& t : s.cost.transfers) bytes += t.cost.bytes_per_device;
    const double p = static_cast<double>(ranks);
    CHECK(bytes == doctest::Approx(2 * (p - 1) / p * 16 * 32 * 4));
  }
}

TEST_CASE("distributed: every collective kind runs and matches the interpreter") {
  const OpGraph g = mlp(16, 32, 64);
  const Mesh mesh = parse_mesh("4", "t");
  REQUIRE(g.num_nodes() == 4);
  // Nodes: MatMul, Relu, MatMul, Add. Domain axes: MatMul (m, n, k); Relu, Add (m, n).
  ShardPlan plan = replicated_plan(g, mesh);
  // Megatron with the output left sharded by rows: the partial sums are reduce-scattered.
  plan.nodes = {{{1}}, {{1}}, {{2}}, {{0}}};
  CHECK(has(check_plan_runs(g, plan), Collective::reduce_scatter));
  // Rows first, then columns from the ReLU on: an all-to-all turns rows into columns.
  plan.nodes = {{{0}}, {{1}}, {{1}}, {{0}}};
  const auto ts = check_plan_runs(g, plan);
  CHECK(has(ts, Collective::all_to_all));
  // Rows everywhere, the output gathered at the end.
  plan.nodes = {{{0}}, {{0}}, {{0}}, {{0}}};
  CHECK(has(check_plan_runs(g, plan), Collective::all_gather));
  // Given sharded, returned sharded: no communication at all.
  plan.inputs = {{AxisLayout::sharded(0)}};
  plan.outputs = {{AxisLayout::sharded(0)}};
  CHECK(check_plan_runs(g, plan).empty());
}

TEST_CASE("distributed: i64 values past 2^53 cross every collective exactly") {
  // The MLP in i64 on inputs near 2^55: its sums and the partial sums the collectives combine are
  // exact only as integers (the communicator carries doubles; i64 crosses it as bit patterns and
  // reductions combine in int64), and wrap alike in every order.
  ModelBuilder b(DType::i64);
  const std::string x = b.input("x", {16, 32});
  const std::string h = b.op("MatMul", {x, b.weight("w1", {32, 64}, 1, -3, 3)});
  const std::string y = b.op("MatMul", {b.op("Relu", {h}), b.weight("w2", {64, 32}, 2, -3, 3)});
  const OpGraph g = b.graph(b.op("Add", {y, x}));
  REQUIRE(g.num_nodes() == 4);
  std::vector<int64_t> values(16 * 32);
  for (size_t k = 0; k < values.size(); ++k) values[k] = (int64_t{1} << 55) + 2 * static_cast<int64_t>(k) + 1;  // odd: no doubles
  const std::vector<HostTensor> inputs = {HostTensor::from_integers(TensorType{DType::i64, {16, 32}}, values)};
  const Mesh mesh = parse_mesh("4", "t");
  ShardPlan plan = replicated_plan(g, mesh);
  std::set<Collective> ran;
  for (const std::vector<NodeSharding>& nodes : std::vector<std::vector<NodeSharding>>{
           {{{1}}, {{1}}, {{2}}, {{-1}}}, {{{1}}, {{1}}, {{2}}, {{0}}}, {{{0}}, {{1}}, {{1}}, {{0}}}, {{{0}}, {{0}}, {{0}}, {{0}}}}) {
    plan.nodes = nodes;
    for (const Transfer& t : check_plan_runs(g, plan, interpreter_segments(), inputs)) ran.insert(t.step.collective);
  }
  CHECK(ran == std::set<Collective>{Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all});
}

TEST_CASE("distributed: a BERT layer, searched and pinned to head parallelism, on 2, 4 and 2x2 ranks") {
  const OpGraph g = bert_layer();
  for (const char* mesh : {"2", "4", "2x2"}) {
    CAPTURE(mesh);
    const ShardSearch s = search(g, mesh);
    check_plan_runs(g, s.plan);
    CHECK(std::isfinite(s.cost.total_s()));
  }
  // Heads over 2 ranks: Q/K/V column-parallel, the output projection row-parallel.
  const ShardSearch heads = search(g, "2", "q_w=S1 k_w=S1 v_w=S1 o_w=S0 f1_w=S1 f2_w=S0");
  const auto ts = check_plan_runs(g, heads.plan);
  CHECK((has(ts, Collective::all_reduce) || has(ts, Collective::reduce_scatter)));
  // Batch over one mesh axis, heads over the other.
  const ShardSearch both = search(g, "dp=2,tp=2", "x=S0,R q_w=R,S1 k_w=R,S1 v_w=R,S1 o_w=R,S0");
  check_plan_runs(g, both.plan);
}

TEST_CASE("distributed: a LLaMA MLP on 2 and 4 ranks, with kernels compiled for the CPU") {
  const OpGraph g = llama_mlp(16, 32, 64);
  CompileRequest base;
  base.backend = "cpu";
  base.options.threads = 1;
  base.options.opt_level = 1;
  for (const char* mesh : {"2", "4"}) {
    CAPTURE(mesh);
    const ShardSearch s = search(g, mesh, "gate_w=S1 up_w=S1 down_w=S0");
    const auto ts = check_plan_runs(g, s.plan, compiled_segments(base));
    CHECK((has(ts, Collective::all_reduce) || has(ts, Collective::reduce_scatter)));
  }
}

TEST_CASE("distributed: the search finds the optimum on small graphs and the heuristic is close to it") {
  const OpGraph g = mlp(8192, 4096, 16384);  // priced only, never run
  Mesh mesh = parse_mesh("2", "t");
  ShardSearchOptions exact;
  const ShardSearch e = search_shard_plan(g, mesh, dgx(), exact);
  CHECK(e.exact);
  ShardSearchOptions heuristic;
  heuristic.exhaustive_limit = 0;
  const ShardSearch h = search_shard_plan(g, mesh, dgx(), heuristic);
  CHECK_FALSE(h.exact);
  CHECK(h.cost.total_s() >= e.cost.total_s() * (1 - 1e-9));
  CHECK(h.cost.total_s() <= e.cost.total_s() * 1.5);
  // The plan found beats computing everything on every device.
  CHECK(e.cost.total_s() < price_plan(g, replicated_plan(g, mesh), dgx()).total_s());
}

TEST_CASE("distributed: z3 bounds the search from below, and its plan, where kept, is legal and runs") {
  // Small graphs, where the enumeration gives the optimum: the bound is at or below it (equal
  // where every tensor is read in one layout besides its own), and z3's plan is priced no lower.
  for (const char* mesh_text : {"2", "4"}) {
    INFO("mesh " << std::string(mesh_text));
    const OpGraph g = mlp(8192, 4096, 16384);
    const Mesh mesh = parse_mesh(mesh_text, "t");
    ShardSearchOptions o;
    o.z3_bound_ms = 60000;
    o.overlap = ShardSearchOptions::Overlap::off;  // (the bound is on plans without ring shifts)
    const ShardSearch e = search_shard_plan(g, mesh, dgx(), o);
    REQUIRE(e.exact);
    REQUIRE(e.bound);
    CHECK(e.bound->why_not.empty());
    CHECK(e.bound->optimal);
    CHECK(e.bound->lower_s > 0);
    CHECK(e.bound->lower_s <= e.cost.total_s() * (1 + 1e-9));
    REQUIRE(e.bound->has_plan);
    CHECK(e.bound->plan_s >= e.bound->lower_s * (1 - 1e-9));
    CHECK(e.bound->plan_s >= e.cost.total_s() * (1 - 1e-9));  // (the enumeration saw every plan)
  }
  // A BERT layer on 2 devices: the heuristic's price is at or above the bound; the plan kept is
  // the cheaper of the two, legal, and matches the interpreter on threads as ranks.
  {
    const OpGraph g = bert_layer();
    const Mesh mesh = parse_mesh("2", "t");
    ShardSearchOptions o;
    o.exhaustive_limit = 0;
    o.z3_bound_ms = 60000;
    o.overlap = ShardSearchOptions::Overlap::off;
    const ShardSearch s = search_shard_plan(g, mesh, cpu_cluster(), o);
    REQUIRE(s.bound);
    const ShardBound& b = *s.bound;
    REQUIRE(b.why_not.empty());
    CHECK(b.optimal);
    CHECK(s.heuristic_s >= b.lower_s * (1 - 1e-9));
    CHECK(s.cost.total_s() <= s.heuristic_s * (1 + 1e-9));
    CHECK(s.cost.total_s() >= b.lower_s * (1 - 1e-9));
    REQUIRE(b.has_plan);
    CHECK_FALSE(check_plan(g, b.plan));
    check_plan_runs(g, b.plan);
    // With a memory cap z3's plans keep the weights within it. (The cap makes z3's search much
    // slower -- 50 s to prove this one optimal here --, so it gets 3 s: a bound and a plan or not.)
    ShardSearchOptions capped = o;
    capped.memory_per_device_bytes = price_plan(g, replicated_plan(g, mesh), cpu_cluster()).weight_bytes_per_device * 3 / 4;
    capped.z3_bound_ms = 3000;
    const ShardSearch c = search_shard_plan(g, mesh, cpu_cluster(), capped);
    REQUIRE(c.bound);
    CHECK(c.cost.weight_bytes_per_device <= capped.memory_per_device_bytes);
    if (c.bound->why_not.empty()) CHECK(c.heuristic_s >= c.bound->lower_s * (1 - 1e-9));
    if (c.bound->has_plan)
      CHECK(price_plan(g, c.bound->plan, cpu_cluster()).weight_bytes_per_device <= capped.memory_per_device_bytes);
    capped.memory_per_device_bytes = 16;
    CHECK_THROWS_WITH_AS(search_shard_plan(g, mesh, cpu_cluster(), capped), doctest::Contains("MiB per device"), UserError);
  }
}

TEST_CASE("distributed: bad pins and meshes are UserErrors naming them") {
  const OpGraph g = mlp(16, 32, 64);
  CHECK_THROWS_WITH_AS(search(g, "2", "nothing=S0"), doctest::Contains("nothing"), UserError);
  CHECK_THROWS_WITH_AS(search(g, "2", "w1=S5"), doctest::Contains("w1"), UserError);
  CHECK_THROWS_WITH_AS(search(g, "2", "w1=S0,S1"), doctest::Contains("mesh axes"), UserError);
  CHECK_THROWS_WITH_AS(search(g, "3", "w1=S1"), doctest::Contains("divide"), UserError);
  const HwSpec lone = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx512-server.json");
  CHECK_THROWS_WITH_AS(search(g, "2", "", lone), doctest::Contains("interconnect"), UserError);
}

TEST_CASE("distributed: a memory cap per device makes the search shard the weights, and the plan runs") {
  const OpGraph g = bert_layer();
  const Mesh mesh = parse_mesh("4", "t");
  ShardSearchOptions free;
  const ShardSearch whole = search_shard_plan(g, mesh, cpu_cluster(), free);
  ShardSearchOptions capped;
  capped.memory_per_device_bytes = whole.cost.weight_bytes_per_device / 3;
  REQUIRE(capped.memory_per_device_bytes > 0);
  const ShardSearch s = search_shard_plan(g, mesh, cpu_cluster(), capped);
  CHECK(s.cost.fits);
  CHECK(s.cost.weight_bytes_per_device <= capped.memory_per_device_bytes);
  check_plan_runs(g, s.plan);
  capped.memory_per_device_bytes = 16;  // less than any split of the weights
  CHECK_THROWS_WITH_AS(search_shard_plan(g, mesh, cpu_cluster(), capped), doctest::Contains("MiB per device"), UserError);
}

namespace {

/// y = x w with x given sharded by rows and w's columns split (the all-gather-GEMM of Megatron's
/// sequence parallelism): the plan all-gathers x before the product.
OpGraph ag_gemm(int64_t m, int64_t k, int64_t n, DType dtype = DType::f32) {
  ModelBuilder b(dtype);
  const std::string x = b.input("x", {m, k});
  return b.graph(b.op("MatMul", {x, b.weight("w", {k, n}, 1, -3, 3)}));
}

ShardPlan ag_gemm_plan(const OpGraph& g, const Mesh& mesh, int mesh_axis = 0) {
  ShardPlan plan = replicated_plan(g, mesh);
  plan.inputs[0][mesh_axis] = AxisLayout::sharded(0);
  plan.nodes[0].split[mesh_axis] = 1;  // columns of w (domain m, n, k)
  plan.outputs[0][mesh_axis] = AxisLayout::sharded(1);
  return plan;
}

HwSpec h200_pair() { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h200-x2.json"); }

}  // namespace

TEST_CASE("distributed: a node overlapped with ring shifts (Mercury's shift) matches the interpreter on 2, 3, 4 and 2x2 ranks") {
  const OpGraph g = ag_gemm(24, 16, 12);
  for (const char* m : {"2", "3", "4"}) {
    CAPTURE(m);
    const Mesh mesh = parse_mesh(m, "t");
    ShardPlan plan = ag_gemm_plan(g, mesh);
    CHECK(has(check_plan_runs(g, plan), Collective::all_gather));
    choose_overlap(g, plan, cpu_cluster(), ShardSearchOptions::Overlap::on);
    REQUIRE(plan.shifted_input(0) == 0);
    const std::vector<Transfer> ts = check_plan_runs(g, plan);
    CHECK(!has(ts, Collective::all_gather));
    CHECK(static_cast<int64_t>(ts.size()) == mesh.devices() - 1);  // P - 1 shifts, no gather
    CHECK(has(ts, Collective::shift));
  }
  // On one axis of a 2 x 2 mesh (the other axis splits the rows of the product).
  const Mesh grid = parse_mesh("dp=2,tp=2", "t");
  ShardPlan plan = ag_gemm_plan(g, grid, 1);
  choose_overlap(g, plan, cpu_cluster(), ShardSearchOptions::Overlap::on);
  REQUIRE(plan.shifted_input(0) == 0);
  CHECK(has(check_plan_runs(g, plan), Collective::shift));
  // The LLaMA MLP with its input given by rows and Megatron's column/row split: the RMSNorm's output
  // is all-gathered for both projections; each runs on the same shifted blocks.
  const OpGraph mlp_g = llama_mlp(16, 32, 64);
  ShardSearchOptions o;
  o.overlap = ShardSearchOptions::Overlap::on;
  for (const char* pin : {"x=S0", "gate_w=S1", "up_w=S1", "down_w=S0"}) parse_pin(pin, parse_mesh("2", "t"), o.constraints);
  const ShardSearch s = search_shard_plan(mlp_g, parse_mesh("2", "t"), cpu_cluster(), o);
  const std::vector<Transfer> ts = check_plan_runs(mlp_g, s.plan);
  if (!s.plan.shifted.empty()) CHECK(has(ts, Collective::shift));
  // i64 blocks cross the shifts exactly.
  const OpGraph gi = ag_gemm(8, 4, 6, DType::i64);
  std::vector<int64_t> big(8 * 4);
  for (size_t k = 0; k < big.size(); ++k) big[k] = (int64_t{1} << 55) + 2 * static_cast<int64_t>(k) + 1;
  ShardPlan pi = ag_gemm_plan(gi, parse_mesh("2", "t"));
  choose_overlap(gi, pi, cpu_cluster(), ShardSearchOptions::Overlap::on);
  CHECK(has(check_plan_runs(gi, pi, interpreter_segments(), {HostTensor::from_integers(TensorType{DType::i64, {8, 4}}, big)}),
            Collective::shift));
}

TEST_CASE("distributed: the model overlaps where the shifts hide behind the pieces, and not where they cannot") {
  const HwSpec spec = h200_pair();
  const Mesh mesh = parse_mesh("2", "t");
  // Large: 16384 tokens of 4096 into 8192 columns per device -- pieces of ~0.7 ms against a 64 MiB
  // shift of ~0.3 ms: overlapped, the step hides the gather.
  {
    const OpGraph g = ag_gemm(16384, 4096, 16384, DType::f16);
    ShardPlan plan = ag_gemm_plan(g, mesh);
    const double sequential = price_plan(g, plan, spec).total_s();
    choose_overlap(g, plan, spec, ShardSearchOptions::Overlap::automatic);
    REQUIRE(plan.shifted_input(0) == 0);
    const PlanCost c = price_plan(g, plan, spec);
    CHECK(c.total_s() < sequential);
    REQUIRE(c.transfers.size() == 1);
    CHECK(c.transfers[0].overlapped);
    CHECK(c.transfers[0].exposed_s == 0);
    CHECK(format_shard_plan(g, plan, c, spec).find("overlapped with the node's pieces") != std::string::npos);
  }
  // Small: 256 tokens -- the pieces take microseconds, each shift pays the link's latency and
  // the join a launch: kept as an all-gather.
  {
    const OpGraph g = ag_gemm(256, 1024, 1024, DType::f16);
    ShardPlan plan = ag_gemm_plan(g, mesh);
    choose_overlap(g, plan, spec, ShardSearchOptions::Overlap::automatic);
    CHECK(plan.shifted.empty());
  }
  // A node whose gathered input is read by a reduction axis cannot run on shifts (x's columns).
  {
    const OpGraph g = ag_gemm(64, 64, 64);
    ShardPlan plan = replicated_plan(g, mesh);
    plan.inputs[0][0] = AxisLayout::sharded(1);
    choose_overlap(g, plan, spec, ShardSearchOptions::Overlap::on);
    CHECK(plan.shifted.empty());
    plan.shifted = {0};
    CHECK_THROWS_AS(partition(g, plan, 0), UserError);
  }
  CHECK_THROWS_AS(parse_overlap("sometimes", "--overlap"), UserError);
}

TEST_CASE("distributed: the program is cut so that each ring shift runs beside the piece that does not need it") {
  // x -> ReLU (by rows) -> MatMul (w's columns) on 3 ranks: the ReLU's rows shifted twice.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {24, 16});
  const OpGraph g = b.graph(b.op("MatMul", {b.op("Relu", {x}), b.weight("w", {16, 12}, 1, -3, 3)}));
  REQUIRE(g.num_nodes() == 2);
  const Mesh mesh = parse_mesh("3", "t");
  ShardPlan plan = replicated_plan(g, mesh);
  plan.inputs[0][0] = AxisLayout::sharded(0);
  plan.nodes = {{{0}}, {{1}}};  // ReLU by rows, the product by w's columns
  plan.outputs[0][0] = AxisLayout::sharded(1);
  choose_overlap(g, plan, cpu_cluster(), ShardSearchOptions::Overlap::on);
  REQUIRE(plan.shifted_input(1) == 0);
  check_plan_runs(g, plan);
  const SpmdProgram p = partition(g, plan, 0);
  const ProgramCut cut = cut_program(p);
  std::string kinds;
  for (const ProgramCut::Step& s : cut.steps) kinds += s.segment >= 0 ? "S" : "T";
  // The ReLU; shift 1 (its block); the piece on the own block beside it; shift 2; the piece on
  // shift 1's block beside it; the last piece and the join.
  CHECK(kinds == "STSTSS");
  auto reads = [&](int step, int transfer) {
    const auto& in = cut.segments[cut.steps[step].segment].inputs;
    return std::find(in.begin(), in.end(), p.transfers[transfer].result) != in.end();
  };
  REQUIRE(p.transfers.size() == 2);
  CHECK_FALSE(reads(2, 0));
  CHECK(reads(4, 0));
  CHECK_FALSE(reads(4, 1));
  CHECK(reads(5, 1));
}
