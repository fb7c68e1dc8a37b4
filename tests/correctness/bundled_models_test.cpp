// Every bundled model imports, lowers, and interprets to finite outputs of the declared shapes;
// results do not depend on the interpreter's thread count; the printed IR is deterministic.
#include <cmath>
#include <algorithm>
#include <filesystem>

#include "../test_util.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;

namespace {
std::vector<std::string> bundled_models() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TESSEL_SOURCE_DIR) + "/experiments/models"))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<HostTensor> seeded_inputs(const OpGraph& g) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    in.push_back(materialize_random(g.tensor(g.inputs()[i]).type, RandomInit{RandomInit::Dist::normal, 0, 1, 100 + i}));
  return in;
}
}  // namespace

TEST_CASE("the six bundled models are present") {
  const auto models = bundled_models();
  CHECK(models.size() >= 6);
  bool bert12 = false;
  for (const auto& m : models) bert12 |= m.find("bert") != std::string::npos && m.find("12") != std::string::npos;
  CHECK(bert12);
}

TEST_CASE("every bundled model inspects and interprets to finite values") {
  for (const std::string& path : bundled_models()) {
    CAPTURE(path);
    const ModelDef model = load_model(path);
    const OpGraph g = lower_model(model);
    CHECK(g.num_nodes() > 0);
    CHECK(g.print() == lower_model(model).print());  // deterministic
    const auto outputs = interpret(g, seeded_inputs(g));
    REQUIRE(outputs.size() == model.outputs.size());
    for (const HostTensor& out : outputs) {
      int64_t bad = 0;
      double l2 = 0;
      for (double v : out.values()) {
        bad += !std::isfinite(v);
        l2 += v * v;
      }
      CHECK(bad == 0);
      CHECK(l2 > 0);  // not all zeros
    }
  }
}

TEST_CASE("interpreting the BERT layer gives the same bits on 1 and 2 threads") {
  const OpGraph g = lower_model(load_model(std::string(TESSEL_SOURCE_DIR) + "/experiments/models/bert_base_layer.json"));
  InterpretOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const auto in = seeded_inputs(g);
  CHECK(interpret(g, in, one)[0].values() == interpret(g, in, two)[0].values());
}
