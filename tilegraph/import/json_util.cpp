// Shared JSON helpers (see json_util.h).
#include "tilegraph/import/json_util.h"

#include <set>
#include <vector>

#include "tilegraph/error.h"

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

namespace {

using json = nlohmann::json;

constexpr int kMaxJsonDepth = 64;

// A parser callback rejecting a key repeated in one object, with the JSON pointer, and documents
// nested deeper than kMaxJsonDepth.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& file) : file_(file) {}

  bool operator()(int depth, nlohmann::json::parse_event_t event, json& parsed) {
    // Deeper documents are refused as they are read: no format of Tessel nests more than a few
    // levels, and serializing or destroying a value recurses once per level.
    if (depth > kMaxJsonDepth)
      throw tessel::UserError(file_, pointer(), tessel::cat("nested deeper than ", kMaxJsonDepth, " levels"));
    switch (event) {
      case nlohmann::json::parse_event_t::object_start:
        stack_.emplace_back(true);
        break;
      case nlohmann::json::parse_event_t::array_start:
        stack_.emplace_back(false);
        break;
      case nlohmann::json::parse_event_t::key:
        on_key(parsed.get<std::string>());
        break;
      case nlohmann::json::parse_event_t::object_end:
      case nlohmann::json::parse_event_t::array_end:
        stack_.pop_back();
        element_done();
        break;
      case nlohmann::json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    explicit Frame(bool object) : is_object(object) {}
    bool is_object;
    std::set<std::string> keys;  // keys seen so far (objects)
    std::string key;             // the current key (objects)
    size_t index = 0;            // the current element (lists)
  };

  void on_key(const std::string& key) {
    Frame& top = stack_.back();
    top.key = key;
    if (!top.keys.insert(key).second)
      throw tessel::UserError(file_, pointer(), tessel::cat("duplicate key ", quoted(key)));
  }
  void element_done() {
    if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
  }
  std::string pointer() const {
    std::string ptr;
    for (const Frame& f : stack_) ptr = f.is_object ? child(ptr, f.key) : child(ptr, f.index);
    return ptr;
  }

  const std::string& file_;
  std::vector<Frame> stack_;
};


}  // namespace

nlohmann::json parse_strict(const std::string& text, const std::string& file) {
  try {
    return nlohmann::json::parse(text, DuplicateKeyCheck(file));
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
