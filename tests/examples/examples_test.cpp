// The worked examples of policy/README.md ("Adding a policy") and cost_model/README.md ("Adding a
// cost term"): each README quotes its example file, and this test checks that the quote is the
// file (so the README cannot drift), builds the example and checks what it promises.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "../schedule_util.h"
#include "best_of_policy.h"
#include "cost_model/analytic_model.h"
#include "driver/compile.h"
#include "policy/check_schedule.h"
#include "split_k_cost.h"
#include "tilegraph/import/load_model.h"

namespace tessel::testing {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The lines of `text` strictly between the line containing `begin` and the next containing `end`.
std::string between(const std::string& text, const std::string& begin, const std::string& end) {
  const size_t b = text.find(begin);
  REQUIRE_MESSAGE(b != std::string::npos, "no '", begin, "'");
  const size_t from = text.find('\n', b) + 1;
  const size_t e = text.find(end, from);
  REQUIRE_MESSAGE(e != std::string::npos, "no '", end, "' after '", begin, "'");
  return text.substr(from, text.rfind('\n', e) + 1 - from);
}

/// The README's code block under `heading` is the example file's code between its markers.
void check_quoted(const std::string& readme, const std::string& heading, const std::string& example) {
  const std::string section = read_text(source_path(readme)).substr(read_text(source_path(readme)).find(heading));
  const std::string quoted = between(section, "```cpp", "```");
  const std::string code = between(read_text(source_path(example)), "// example:begin", "// example:end");
  CHECK_MESSAGE(quoted == code, readme, " quotes ", example, " differently: update the README's code block");
}

}  // namespace

TEST_CASE("worked example: adding a policy (policy/README.md)") {
  check_quoted("policy/README.md", "## Adding a policy", "tests/examples/best_of_policy.h");
  const examples::BestOfPolicy best_of;
  for (const char* model : {"bert_base_layer", "resnet50_bottleneck"}) {
    CAPTURE(model);
    const OpGraph g = lower_model(load_model(source_path(std::string("experiments/models/") + model + ".json")));
    const HwSpec& spec = shipped_spec("nvidia-h100-sxm");
    CompileRequest r;  // run through the pipeline as any policy is
    r.graph = &g;
    r.backend.clear();
    r.spec = spec;
    r.policy = &best_of;
    r.last = Stage::schedule;
    const Schedule s = compile(r).schedule;
    CHECK(check_schedule(g, spec, s).empty());
    CHECK(s.policy.rfind("best_of:", 0) == 0);
    for (const char* other : {"welder", "roller"})
      CHECK(s.predicted_latency_s <= schedule_as_cli(g, spec, other).predicted_latency_s * (1 + 1e-12));
  }
}

TEST_CASE("worked example: adding a cost term (cost_model/README.md)") {
  check_quoted("cost_model/README.md", "## Adding a cost term", "tests/examples/split_k_cost.h");
  const HwSpec& spec = shipped_spec("nvidia-h100-sxm");
  const OpGraph g = lower_model(load_model(source_path("experiments/models/bert_base_layer.json")));
  const Schedule s = schedule_as_cli(g, spec, "roller");
  const AnalyticCostModel analytic;
  const examples::SplitKPartialsCost with_term(analytic);
  REQUIRE(!s.groups.empty());
  ScheduledGroup group = s.groups.front().group;
  group.kernel.params["split_k"] = 1;
  const CostBreakdown plain = analytic.estimate(g, group, spec);
  CHECK(with_term.estimate(g, group, spec).latency_s == plain.latency_s);
  CHECK(with_term.estimate(g, group, spec).term("split_k_partials") == 0);
  group.kernel.params["split_k"] = 4;
  const CostBreakdown split = with_term.estimate(g, group, spec);
  const double outputs = static_cast<double>(g.node(group.nodes.back()).output().num_elements());
  const double expected = 2.0 * 4 * outputs * 4 / (spec.memory_levels.back().bandwidth_gbps * 1e9);
  CHECK(split.term("split_k_partials") == doctest::Approx(expected));
  CHECK(split.latency_s == doctest::Approx(analytic.estimate(g, group, spec).latency_s + expected));
  CHECK(split.term("compute") == analytic.estimate(g, group, spec).term("compute"));  // the inner model's terms are kept
}

}  // namespace tessel::testing
