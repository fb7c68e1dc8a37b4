// Command-line parsing for `tessel`.
#include "cli/args.h"

#include <algorithm>
#include <charconv>

#include "tilegraph/error.h"

namespace tessel {

Args::Args(const std::string& command, std::vector<std::string> argv, const std::set<std::string>& flags,
           const std::set<std::string>& options)
    : command_(command) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() < 2 || a[0] != '-' || a == "-") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(a[1] == '-' ? 2 : 1);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      if (value) throw UserError("command line", "", cat("option --", name, " of 'tessel ", command, "' takes no value"));
      flags_.insert(name);
    } else if (options.count(name)) {
      if (!value) {
        if (i + 1 >= argv.size())
          throw UserError("command line", "", cat("option --", name, " of 'tessel ", command, "' needs a value"));
        value = argv[++i];
      }
      options_[name] = *value;
    } else {
      std::vector<std::string> known(flags.begin(), flags.end());
      known.insert(known.end(), options.begin(), options.end());
      const std::string guess = nearest_word(name, known);
      throw UserError("command line", "", cat("unknown option '", a, "' for 'tessel ", command, "' (",
                                              guess.empty() ? "" : cat("did you mean --", guess, "? "), "see tessel ", command,
                                              " --help)"));
    }
  }
}

std::optional<std::string> Args::option(const std::string& name) const {
  auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

std::string Args::option_or(const std::string& name, const std::string& dflt) const {
  return option(name).value_or(dflt);
}

int64_t Args::int_option(const std::string& name, int64_t dflt) const {
  auto v = option(name);
  if (!v) return dflt;
  int64_t out = 0;
  auto res = std::from_chars(v->data(), v->data() + v->size(), out);
  if (res.ec != std::errc() || res.ptr != v->data() + v->size())
    throw UserError("command line", "", cat("option --", name, " expects an integer, got \"", *v, "\""));
  return out;
}

int64_t Args::int_option(const std::string& name, int64_t dflt, int64_t min, int64_t max) const {
  const int64_t v = int_option(name, dflt);
  if (v < min || v > max)
    throw UserError("command line", "", cat("option --", name, " expects an integer from ", min, " to ", max, ", got ", v));
  return v;
}

const std::string& Args::one_positional(const std::string& what) const {
  if (positional_.size() != 1)
    throw UserError("command line", "", cat("'tessel ", command_, "' expects one ", what, ", got ",
                                            positional_.size(), " arguments"));
  return positional_[0];
}

}  // namespace tessel
