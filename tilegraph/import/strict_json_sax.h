// The strict JSON reader's SAX handler (json_util.h's parse_strict): nlohmann's DOM builder, with
// a key repeated in one object refused (with its JSON pointer) and documents nested deeper than
// kMaxJsonDepth refused as they are read. A template over the JSON type so that a test can build
// the DOM into a type whose arrays count their iterators' steps (tests/error/json_parse_work_test:
// the parser's work must grow linearly). Include only from .cpp files: it brings in nlohmann/json.
//
// (Not nlohmann's parser callback: its DOM builder then scans the enclosing container for
// discarded values after every object, quadratic in a list's length -- a 100k-op model took 8 s
// to parse, one of 1M ops did not finish.)
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilegraph/error.h"
#include "tilegraph/import/json_util.h"

namespace tessel::json_util {

inline constexpr int kMaxJsonDepth = 64;

template <class Json>
class StrictSax {
 public:
  StrictSax(Json& result, const std::string& file) : dom_(result, true), file_(file) {}

  bool null() { return value(dom_.null()); }
  bool boolean(bool v) { return value(dom_.boolean(v)); }
  bool number_integer(typename Json::number_integer_t v) { return value(dom_.number_integer(v)); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return value(dom_.number_unsigned(v)); }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t& text) {
    return value(dom_.number_float(v, text));
  }
  bool string(typename Json::string_t& v) { return value(dom_.string(v)); }
  bool binary(typename Json::binary_t& v) { return value(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    ++events_;
    push(true);
    return dom_.start_object(n);
  }
  bool key(typename Json::string_t& k) {
    ++events_;
    Frame& top = stack_.back();
    top.key = k;
    if (!top.keys.insert(k).second) throw UserError(file_, pointer(), cat("duplicate key ", quoted(k)));
    return dom_.key(k);
  }
  bool end_object() {
    stack_.pop_back();
    return value(dom_.end_object());
  }
  bool start_array(std::size_t n) {
    ++events_;
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

  /// The SAX events handled so far (the parser's work, with the DOM's).
  int64_t events() const { return events_; }

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
      throw UserError(file_, pointer(), cat("nested deeper than ", kMaxJsonDepth, " levels"));
    stack_.emplace_back(object);
  }
  // A value (or a container) is complete: the enclosing list moves to its next element.
  bool value(bool ok) {
    ++events_;
    if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
    return ok;
  }
  std::string pointer() const {
    std::string ptr;
    for (const Frame& f : stack_) ptr = f.is_object ? child(ptr, f.key) : child(ptr, f.index);
    return ptr;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  const std::string& file_;
  std::vector<Frame> stack_;
  int64_t events_ = 0;
};

}  // namespace tessel::json_util
