// Helpers every Tessel JSON reader and writer shares (models, hardware specs, tile configs,
// schedules): JSON pointers for error locations, values as they appear in error messages, and
// compact pretty printing (objects and lists on one line when they fit). Include only from .cpp
// files: it brings in nlohmann/json.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tessel::json_util {

/// `ptr` extended by an object key (RFC 6901 escaping) or a list index.
std::string child(const std::string& ptr, const std::string& key);
std::string child(const std::string& ptr, size_t index);

/// One-line JSON text; invalid UTF-8 is replaced instead of throwing.
std::string dump_safe(const nlohmann::json& j);
std::string dump_safe(const nlohmann::ordered_json& j);

/// A value as it appears in an error message, shortened: `an object {...}`, `a list [...]`, `7`.
std::string describe(const nlohmann::json& j);

/// Parses JSON text strictly: malformed text, a key repeated in one object (which nlohmann
/// would silently keep the last of) and nesting deeper than 64 levels (stopped as it is read) are
/// UserErrors naming `file`, the line/column or the JSON pointer.
nlohmann::json parse_strict(const std::string& text, const std::string& file);

/// A string as a JSON string literal (for error messages).
std::string quoted(const std::string& s);

/// Appends `j` on one line; returns false (with `out` partly written) once `out` exceeds `limit`.
bool render_inline(const nlohmann::ordered_json& j, std::string& out, size_t limit);

}  // namespace tessel::json_util
