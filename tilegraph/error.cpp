// Formatting of UserError and the sink of TESSEL_ASSERT.
#include "tilegraph/error.h"

#include <algorithm>

namespace tessel {

UserError::UserError(std::string file, std::string location, std::string message)
    : std::runtime_error(""),
      file_(std::move(file)),
      location_(std::move(location)),
      message_(std::move(message)) {
  compose();
}

void UserError::set_file_if_empty(const std::string& file) {
  if (file_.empty()) {
    file_ = file;
    compose();
  }
}

void UserError::set_location_if_empty(const std::string& location) {
  if (location_.empty()) {
    location_ = location;
    compose();
  }
}

namespace {

// An error is one line of bounded length whatever the input named: control characters (a
// newline, an ANSI escape in a node name) are escaped, and text past kMaxErrorBytes is cut at a
// character boundary.
constexpr size_t kMaxErrorBytes = 4000;

std::string escaped(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) out += cat("\\x", "0123456789abcdef"[u >> 4], "0123456789abcdef"[u & 15]);
    else out += c;
  }
  return out;
}

}  // namespace

void UserError::compose() {
  text_.clear();
  if (!file_.empty()) text_ += escaped(file_) + ": ";
  if (!location_.empty()) text_ += escaped(location_) + ": ";
  text_ += escaped(message_);
  if (text_.size() > kMaxErrorBytes) {
    size_t cut = kMaxErrorBytes;
    while (cut > 0 && (static_cast<unsigned char>(text_[cut]) & 0xc0) == 0x80) --cut;  // not inside a UTF-8 character
    const size_t rest = text_.size() - cut;
    text_ = cat(text_.substr(0, cut), " ... (", rest, " more bytes)");
  }
}

void raise_internal_error(const char* file, int line, const std::string& message) {
  throw InternalError(cat("internal error at ", file, ":", line, ": ", message));
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates)
    if (const size_t d = edit_distance(word, c); d < best_distance) best = c, best_distance = d;
  return best;
}

}  // namespace tessel
