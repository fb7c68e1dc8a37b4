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

// The strict reader's SAX handler: nlohmann's DOM builder, with a key repeated in one object
// refused (with its JSON pointer) and documents nested deeper than kMaxJsonDepth refused as they
// are read. (Not nlohmann's parser callback: its DOM builder then scans the enclosing container
// for discarded values after every object, quadratic in a list's length -- a 100k-op model took
// 8 s to parse, one of 1M ops did not finish.)
class StrictSax {
 public:
  StrictSax(json& result, const std::string& file) : dom_(result, true), file_(file) {}

  bool null() { return value(dom_.null()); }
  bool boolean(bool v) { return value(dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return value(dom_.number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(dom_.number_unsigned(v)); }
  bool number_float(json::number_float_t v, const json::string_t& text) { return value(dom_.number_float(v, text)); }
  bool string(json::string_t& v) { return value(dom_.string(v)); }
  bool binary(json::binary_t& v) { return value(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    push(true);
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    Frame& top = stack_.back();
    top.key = k;
    if (!top.keys.insert(k).second) throw tessel::UserError(file_, pointer(), tessel::cat("duplicate key ", quoted(k)));
    return dom_.key(k);
  }
  bool end_object() {
    stack_.pop_back();
    return value(dom_.end_object());
  }
  bool start_array(std::size_t n) {
    push(false);
    return dom_.start_array(n);
  }
  bool end_array() {
    stack_.pop_back();
    return value(dom_.end_array());
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(position, token, e);  // throws e
  }

 private:
  struct Frame {
    explicit Frame(bool object) : is_object(object) {}
    bool is_object;
    std::set<std::string> keys;  // keys seen so far (objects)
    std::string key;             // the current key (objects)
    size_t index = 0;            // the current element (lists)
  };

  // Deeper documents are refused as they are read: no format of Tessel nests more than a few
  // levels, and serializing or destroying a value recurses once per level.
  void push(bool object) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth)
      throw tessel::UserError(file_, pointer(), tessel::cat("nested deeper than ", kMaxJsonDepth, " levels"));
    stack_.emplace_back(object);
  }
  // A value (or a container) is complete: the enclosing list moves to its next element.
  bool value(bool ok) {
    if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
    return ok;
  }
  std::string pointer() const {
    std::string ptr;
    for (const Frame& f : stack_) ptr = f.is_object ? child(ptr, f.key) : child(ptr, f.index);
    return ptr;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const std::string& file_;
  std::vector<Frame> stack_;
};

}  // namespace

nlohmann::json parse_strict(const std::string& text, const std::string& file) {
  try {
    json result;
    StrictSax sax(result, file);
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
