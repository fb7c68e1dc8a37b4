// Formatting of UserError and the sink of TESSEL_ASSERT.
#include "tilegraph/error.h"

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

}  // namespace tessel
