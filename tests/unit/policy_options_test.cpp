// Policy options set by name (`--policy-opt`, Policy::options, set_policy_option), read from the
// registry: every option of every policy takes back its own printed value, refuses values out of
// its range, and a set option changes what the policy does (welder's group size).
#include <doctest/doctest.h>

#include <filesystem>

#include "../schedule_util.h"
#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "policy/policy_options.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;
using tessel::testing::source_path;

TEST_CASE("policy options: every registered policy's options round-trip and refuse bad values") {
  int total = 0;
  for (auto& policy : policies()) {
    CAPTURE(policy->name());
    const std::vector<PolicyOption> options = policy->options();
    for (const PolicyOption& o : options) {
      CAPTURE(o.name);
      ++total;
      CHECK(!o.description.empty());
      const std::string value = o.get();
      CHECK(!value.empty());
      CHECK(set_policy_option(*policy, o.name + "=" + value) == "");
      CHECK(policy->options().size() == options.size());
      // Not a value of any kind the builders take.
      const std::string why = set_policy_option(*policy, o.name + "=not a value");
      CHECK(why.find("policy " + std::string(policy->name()) + " option " + o.name) == 0);
      CHECK(o.get() == value);  // a refused value leaves the option as it was
    }
    const std::string unknown = set_policy_option(*policy, "no_such_option=1");
    CHECK(unknown.find("no_such_option") != std::string::npos);
    CHECK(set_policy_option(*policy, "missing equals").find("NAME=VALUE") != std::string::npos);
  }
  CHECK(total >= 10);
}

TEST_CASE("policy options: names, ranges and effect") {
  std::unique_ptr<Policy> welder;
  for (auto& p : policies())
    if (p->name() == "welder") welder = std::move(p);
  REQUIRE(welder);
  CHECK(set_policy_option(*welder, "max_grup_nodes=1").find("did you mean max_group_nodes?") != std::string::npos);
  CHECK(set_policy_option(*welder, "max_group_nodes=0").find("expects an integer from 1") != std::string::npos);
  CHECK(set_policy_option(*welder, "max_padding_waste=1.5").find("expects a number from 0 to 0.99") != std::string::npos);
  CHECK(set_policy_option(*welder, "edge_levels=registers+dram").find("got \"dram\"") != std::string::npos);
  CHECK(set_policy_option(*welder, "edge_levels=smem") == "");

  // One node per group: the BERT layer's schedule has as many kernels as nodes (welder fuses
  // otherwise).
  const OpGraph g = lower_model(load_model(source_path("experiments/models/bert_base_layer.json")));
  const HwSpec spec = load_hw_spec(source_path("hw_specs/nvidia-h100-sxm.json"));
  AnalyticCostModel cost;
  const Schedule fused = welder->schedule(PolicyContext{g, spec, cost});
  CHECK(set_policy_option(*welder, "max_group_nodes=1") == "");
  const Schedule alone = welder->schedule(PolicyContext{g, spec, cost});
  CHECK(fused.groups.size() < alone.groups.size());
  for (const ScheduleGroup& sg : alone.groups) CHECK(sg.group.nodes.size() == 1);
}
