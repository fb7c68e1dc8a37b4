// The registry of cost models (one line per model) and CostBreakdown's named terms.
#include "cost_model/analytic_model.h"
#include "cost_model/roofline_model.h"

namespace tessel {

double CostBreakdown::term(std::string_view name) const {
  for (const CostTerm& t : terms)
    if (t.name == name) return t.seconds;
  return 0;
}

double& CostBreakdown::term_ref(std::string_view name) {
  for (CostTerm& t : terms)
    if (t.name == name) return t.seconds;
  terms.push_back(CostTerm{std::string(name), 0});
  return terms.back().seconds;
}

std::vector<std::unique_ptr<CostModel>> cost_models() {
  std::vector<std::unique_ptr<CostModel>> models;
  models.push_back(std::make_unique<AnalyticCostModel>());  // the default
  models.push_back(std::make_unique<RooflineCostModel>());
  return models;
}

}  // namespace tessel
