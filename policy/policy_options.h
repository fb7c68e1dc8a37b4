// Policy options settable by name (`--policy-opt NAME=VALUE`, `set_policy_option`): each built-in
// policy lists its typed options struct's fields as PolicyOptions, bound to its own options, with
// these builders (parsing and range checks in one place).
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"

namespace tessel {

/// An integer option in [min, max].
PolicyOption int_option(std::string name, std::string description, int64_t& field, int64_t min, int64_t max);
PolicyOption int_option(std::string name, std::string description, int& field, int min, int max);
/// A real option in [min, max].
PolicyOption real_option(std::string name, std::string description, double& field, double min, double max);
/// true / false (also 1 / 0).
PolicyOption bool_option(std::string name, std::string description, bool& field);
/// A list of words separated by '+' (NAME=registers+smem), each one of `allowed`.
PolicyOption words_option(std::string name, std::string description, std::vector<std::string>& field,
                          std::vector<std::string> allowed);

}  // namespace tessel
