// Tessel's two error types (STYLE.md habit 5).
//
// UserError: the input was bad (a model file, a hardware spec, a command-line value). It carries
// where the problem is -- the file, a JSON pointer or node name -- and a message that names the
// offending value. The CLI prints it as one line and exits with status 2.
//
// InternalError: a Tessel bug. Raised by TESSEL_ASSERT, which is always on (also in Release).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

class UserError : public std::runtime_error {
 public:
  /// `location` is a JSON pointer ("/ops/3/attrs/axis"), a node or tensor name ("node 'ln0'"),
  /// or empty; `message` should contain the offending value.
  UserError(std::string file, std::string location, std::string message);

  const std::string& file() const { return file_; }
  const std::string& location() const { return location_; }
  const std::string& message() const { return message_; }

  /// Errors raised deep in lowering do not know the file; the loader attaches it on the way out.
  void set_file_if_empty(const std::string& file);
  /// Errors raised by size checks deep in a computation do not know the operator; the lowering
  /// loop attaches it.
  void set_location_if_empty(const std::string& location);

  const char* what() const noexcept override { return text_.c_str(); }

 private:
  void compose();
  std::string file_, location_, message_, text_;
};

/// A UserError for input that is valid but not supported by Tessel yet (an operator, attribute value
/// or dtype). Test drivers count these as "skipped: unsupported", never as passes.
class UnsupportedError : public UserError {
 public:
  using UserError::UserError;
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

[[noreturn]] void raise_internal_error(const char* file, int line, const std::string& message);

/// Levenshtein distance between two words.
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate nearest to `word` when it is close enough to be a typo (at most a third of its
/// letters apart, at least 2), else "": for "did you mean" in error messages.
std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates);

/// Concatenates anything printable with operator<<; used to build error messages.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace tessel

/// Always-on invariant check; a failure is a Tessel bug, never bad input.
#define TESSEL_ASSERT(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::tessel::raise_internal_error(__FILE__, __LINE__,                                  \
                                     ::tessel::cat("assertion `" #cond "` failed: ", ##__VA_ARGS__)); \
  } while (0)
