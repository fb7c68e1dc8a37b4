// A small command-line parser for the `tessel` subcommands: positional arguments, boolean flags
// and `--name value` options, each declared by the subcommand. Anything undeclared is a UserError.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tilegraph/error.h"

namespace tessel {

class Args {
 public:
  /// `flags` take no value; `options` take one (`--name value` or `--name=value`).
  Args(const std::string& command, std::vector<std::string> argv, const std::set<std::string>& flags,
       const std::set<std::string>& options);

  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> option(const std::string& name) const;
  std::string option_or(const std::string& name, const std::string& dflt) const;
  int64_t int_option(const std::string& name, int64_t dflt) const;
  /// The same, and a UserError when the value lies outside [min, max].
  int64_t int_option(const std::string& name, int64_t dflt, int64_t min, int64_t max) const;
  const std::vector<std::string>& positional() const { return positional_; }
  /// The single positional argument `what` (e.g. "MODEL"), or a UserError.
  const std::string& one_positional(const std::string& what) const;

 private:
  std::string command_;
  std::set<std::string> flags_;
  std::map<std::string, std::string> options_;
  std::vector<std::string> positional_;
};

// (edit_distance and nearest_word, for "did you mean": tilegraph/error.h.)

}  // namespace tessel
