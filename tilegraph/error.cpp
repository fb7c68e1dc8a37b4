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

void UserError::compose() {
  text_.clear();
  if (!file_.empty()) text_ += file_ + ": ";
  if (!location_.empty()) text_ += location_ + ": ";
  text_ += message_;
}

void raise_internal_error(const char* file, int line, const std::string& message) {
  throw InternalError(cat("internal error at ", file, ":", line, ": ", message));
}

}  // namespace tessel
