// Checked size arithmetic (limits.h).
#include "tilegraph/limits.h"

#include "tilegraph/error.h"

namespace tessel {

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xe0) == 0xc0) { extra = 1; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { extra = 2; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { extra = 3; cp = c & 0x07; }
    else return false;
    if (i + extra >= s.size()) return false;  // cut short
    for (int k = 1; k <= extra; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += extra + 1;
  }
  return true;
}

std::string name_problem(const std::string& name) {
  if (name.size() > kMaxNameBytes) return cat("a name of ", name.size(), " bytes, more than ", kMaxNameBytes);
  if (!valid_utf8(name)) return "a name that is not valid UTF-8";
  return "";
}

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> checked_product(const std::vector<int64_t>& dims, int64_t limit) {
  for (int64_t d : dims)
    if (d < 0) return std::nullopt;
  for (int64_t d : dims)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : dims) {
    const std::optional<int64_t> m = checked_mul(n, d);
    if (!m || *m > limit) return std::nullopt;
    n = *m;
  }
  return n;
}

std::string tensor_size_problem(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) return cat("dimension ", d, " is negative");
  if (checked_product(dims, kMaxTensorElements)) return "";
  std::string shape;
  for (size_t i = 0; i < dims.size(); ++i) shape += cat(i ? "x" : "", dims[i]);
  return cat("shape ", shape, " has more than ", kMaxTensorElementsText, " elements (Tessel's limit per tensor)");
}

}  // namespace tessel
