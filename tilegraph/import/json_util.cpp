// Shared JSON helpers (see json_util.h).
#include "tilegraph/import/json_util.h"

#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/import/strict_json_sax.h"

namespace tessel::json_util {

std::string child(const std::string& ptr, const std::string& key) {
  std::string out = ptr + "/";
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

std::string child(const std::string& ptr, size_t index) { return ptr + "/" + std::to_string(index); }

std::string dump_safe(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

std::string dump_safe(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

std::string describe(const nlohmann::json& j) {
  std::string text = dump_safe(j);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  if (j.is_object()) return "an object " + text;
  if (j.is_array()) return "a list " + text;
  return text;
}

std::string quoted(const std::string& s) { return dump_safe(nlohmann::json(s)); }


nlohmann::json parse_strict(const std::string& text, const std::string& file) {
  try {
    nlohmann::json result;
    StrictSax<nlohmann::json> sax(result, file);
    nlohmann::json::sax_parse(text, &sax);
    return result;
  } catch (const nlohmann::json::exception& e) {
    // parse_error (syntax) and out_of_range 406 (a number beyond double, e.g. 1e400) alike.
    std::string reason = e.what();  // "[json.exception.parse_error.101] parse error at line 3, ..."
    if (size_t end = reason.find("] "); end != std::string::npos) reason = reason.substr(end + 2);
    throw tessel::UserError(file, "", "malformed JSON: " + reason);
  }
}

bool render_inline(const nlohmann::ordered_json& j, std::string& out, size_t limit) {
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      out += first ? "" : ", ";
      first = false;
      out += dump_safe(nlohmann::ordered_json(key)) + ": ";
      if (!render_inline(value, out, limit)) return false;
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      out += i ? ", " : "";
      if (!render_inline(j[i], out, limit)) return false;
    }
    out += ']';
  } else {
    out += dump_safe(j);
  }
  return out.size() <= limit;
}

}  // namespace tessel::json_util
