// Policy options settable by name (policy_options.h, Policy::options).
#include "policy/policy_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tilegraph/error.h"

namespace tessel {

namespace {

std::string text_of(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// The whole of `text` as an integer, or nullopt.
std::optional<int64_t> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

template <class Int>
PolicyOption integer_option(std::string name, std::string description, Int& field, int64_t min, int64_t max) {
  PolicyOption o{std::move(name), std::move(description), {}, {}};
  o.get = [&field] { return std::to_string(field); };
  o.set = [&field, min, max](const std::string& text) -> std::string {
    const std::optional<int64_t> v = parse_int(text);
    if (!v || *v < min || *v > max) return cat("expects an integer from ", min, " to ", max, ", got \"", text, "\"");
    field = static_cast<Int>(*v);
    return "";
  };
  return o;
}

}  // namespace

PolicyOption int_option(std::string name, std::string description, int64_t& field, int64_t min, int64_t max) {
  return integer_option(std::move(name), std::move(description), field, min, max);
}

PolicyOption int_option(std::string name, std::string description, int& field, int min, int max) {
  return integer_option(std::move(name), std::move(description), field, min, max);
}

PolicyOption real_option(std::string name, std::string description, double& field, double min, double max) {
  PolicyOption o{std::move(name), std::move(description), {}, {}};
  o.get = [&field] { return text_of(field); };
  o.set = [&field, min, max](const std::string& text) -> std::string {
    char* end = nullptr;
    errno = 0;
    const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
    if (text.empty() || errno != 0 || end != text.c_str() + text.size() || !(v >= min && v <= max))
      return cat("expects a number from ", text_of(min), " to ", text_of(max), ", got \"", text, "\"");
    field = v;
    return "";
  };
  return o;
}

PolicyOption bool_option(std::string name, std::string description, bool& field) {
  PolicyOption o{std::move(name), std::move(description), {}, {}};
  o.get = [&field] { return std::string(field ? "true" : "false"); };
  o.set = [&field](const std::string& text) -> std::string {
    if (text == "true" || text == "1") field = true;
    else if (text == "false" || text == "0") field = false;
    else return cat("expects true or false, got \"", text, "\"");
    return "";
  };
  return o;
}

PolicyOption words_option(std::string name, std::string description, std::vector<std::string>& field,
                          std::vector<std::string> allowed) {
  PolicyOption o{std::move(name), std::move(description), {}, {}};
  o.get = [&field] {
    std::string out;
    for (const std::string& w : field) out += (out.empty() ? "" : "+") + w;
    return out;
  };
  o.set = [&field, allowed](const std::string& text) -> std::string {
    std::vector<std::string> words;
    std::string known;
    for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
    size_t start = 0;
    while (start <= text.size()) {
      const size_t end = std::min(text.find('+', start), text.size());
      const std::string w = text.substr(start, end - start);
      if (std::find(allowed.begin(), allowed.end(), w) == allowed.end())
        return cat("expects words joined by '+' from ", known, "; got \"", w, "\"");
      words.push_back(w);
      start = end + 1;
    }
    field = std::move(words);
    return "";
  };
  return o;
}

std::string set_policy_option(Policy& policy, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) return cat("expects NAME=VALUE, got \"", assignment, "\"");
  const std::string name = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  std::vector<PolicyOption> options = policy.options();
  std::vector<std::string> names;
  for (PolicyOption& o : options) {
    if (o.name == name) {
      const std::string why = o.set(value);
      return why.empty() ? "" : cat("policy ", policy.name(), " option ", name, " ", why);
    }
    names.push_back(o.name);
  }
  if (names.empty()) return cat("policy ", policy.name(), " has no options (\"", name, "\" given)");
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  const std::string guess = nearest_word(name, names);
  return cat("policy ", policy.name(), " has no option \"", name, "\" (", guess.empty() ? "" : cat("did you mean ", guess, "? "),
             "options: ", known, ")");
}

}  // namespace tessel
