// The registry of cost models: one line per model.
#include "cost_model/analytic_model.h"
#include "cost_model/roofline_model.h"

namespace tessel {

std::vector<std::unique_ptr<CostModel>> cost_models() {
  std::vector<std::unique_ptr<CostModel>> models;
  models.push_back(std::make_unique<AnalyticCostModel>());  // the default
  models.push_back(std::make_unique<RooflineCostModel>());
  return models;
}

}  // namespace tessel
