// Graphs spread over two GPUs of this machine (distributed/device_runner.h): each GPU's program
// compiled onto its DeviceContext, tensors resident, NCCL between them, every collective kind,
// checked against the single-device interpreter. [SKIP] without two GPUs or NCCL.
#include <doctest/doctest.h>

#include <thread>

#include "../model_builder.h"
#include "cuda_check.h"
#include "distributed/device_runner.h"
#include "policy/shard_plan.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

bool two_gpus(std::vector<std::unique_ptr<DeviceCommunicator>>* comms) {
  if (!gpu_available()) return false;
  if (find_backend("cuda")->device_count() < 2) {
    MESSAGE("[SKIP] fewer than 2 GPUs");
    return false;
  }
  std::string why;
  *comms = nccl_mesh(2, &why);
  if (comms->empty()) {
    MESSAGE("[SKIP] ", why);
    return false;
  }
  return true;
}

OpGraph mlp_f16(int64_t tokens, int64_t hidden, int64_t ffn) {
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {tokens, hidden});
  const std::string h = b.op("MatMul", {x, b.weight("w1", {hidden, ffn}, 1, -0.2, 0.2)});
  const std::string a = b.op("Relu", {h});
  const std::string y = b.op("MatMul", {a, b.weight("w2", {ffn, hidden}, 2, -0.2, 0.2)});
  return b.graph(b.op("Add", {y, x}));
}

/// Runs `plan` on both GPUs: two direct steps, then three timed steps replayed from a CUDA graph,
/// and checks the outputs after them. Returns whether both GPUs captured their step as a graph.
bool check_on_two_gpus(const OpGraph& g, const ShardPlan& plan, std::vector<std::unique_ptr<DeviceCommunicator>>& comms) {
  const std::vector<HostTensor> inputs = gpu_test_inputs(g, 5);
  const std::vector<HostTensor> expected = interpret(g, inputs);
  CompileRequest base;
  base.backend = "cuda";
  base.spec = gpu_spec();
  std::vector<std::vector<HostTensor>> pieces(2);
  std::vector<std::string> errors(2);
  std::vector<int> graphs(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<DeviceContext> ctx = find_backend("cuda")->device_context(r);
        DeviceSpmdRunner runner(partition(g, plan, r), base, *ctx, *comms[r]);
        std::vector<HostTensor> in;
        for (size_t i = 0; i < inputs.size(); ++i) in.push_back(take_piece(inputs[i], plan.inputs[i], plan.mesh, r));
        runner.set_inputs(in);
        runner.enqueue_step();
        runner.enqueue_step();  // a second step over the first one's buffers gives the same values
        TimingOptions timing;
        timing.warmup = 1;
        timing.repeats = 3;
        bool used = false;
        if (runner.time(timing, &used).size() != 3) errors[r] = "timed the wrong number of steps";
        graphs[r] = used ? 1 : 0;
        pieces[r] = runner.outputs();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO("GPU " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
  }
  for (size_t o = 0; o < expected.size(); ++o) {
    const HostTensor whole = assemble({pieces[0][o], pieces[1][o]}, expected[o].shape(), plan.outputs[o], plan.mesh);
    const CompareResult c = compare_compiled(whole, expected[o], computed_precision(g, g.outputs()[o]));
    INFO("output " << o << ": " << c.message);
    CHECK(c.ok);
  }
  return graphs[0] && graphs[1];
}

}  // namespace

TEST_CASE("cuda distributed: an MLP on two GPUs through NCCL, every collective kind, matches the interpreter") {
  std::vector<std::unique_ptr<DeviceCommunicator>> comms;
  if (!two_gpus(&comms)) return;
  const OpGraph g = mlp_f16(128, 128, 256);
  REQUIRE(g.num_nodes() == 4);
  ShardPlan plan = replicated_plan(g, parse_mesh("2", "t"));
  plan.nodes = {{{1}}, {{1}}, {{2}}, {{0}}};  // Megatron, partial sums reduce-scattered by rows
  check_on_two_gpus(g, plan, comms);
  plan.nodes = {{{1}}, {{1}}, {{2}}, {{-1}}};  // Megatron, partial sums all-reduced
  check_on_two_gpus(g, plan, comms);
  plan.nodes = {{{0}}, {{1}}, {{1}}, {{0}}};  // rows, then columns: an all-to-all
  check_on_two_gpus(g, plan, comms);
  plan.nodes = {{{0}}, {{0}}, {{0}}, {{0}}};  // rows, gathered at the end
  check_on_two_gpus(g, plan, comms);
}

TEST_CASE("cuda distributed: nodes overlapped with ring shifts on a side stream match the interpreter, also replayed as a graph") {
  std::vector<std::unique_ptr<DeviceCommunicator>> comms;
  if (!two_gpus(&comms)) return;
  // x given by rows, the first product column-parallel: x's rows all-gathered, or shifted around
  // the ring while the product runs in two pieces (then the row-parallel product, reduce-scattered).
  const OpGraph g = mlp_f16(256, 128, 256);
  const HwSpec pair = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h200-x2.json");
  ShardPlan plan = replicated_plan(g, parse_mesh("2", "t"));
  plan.inputs = {{AxisLayout::sharded(0)}};
  plan.nodes = {{{1}}, {{1}}, {{2}}, {{0}}};
  plan.outputs = {{AxisLayout::sharded(0)}};
  check_on_two_gpus(g, plan, comms);
  choose_overlap(g, plan, pair, ShardSearchOptions::Overlap::on);
  REQUIRE(plan.shifted_input(0) == 0);
  // Replayed as a CUDA graph too (the side stream joins the capture), the outputs still right.
  CHECK(check_on_two_gpus(g, plan, comms));
}
