// Tensor files (see tensor_files.h): the `.npy` reader and writer, `.pb` through the TensorProto
// codec of onnx_import.h, and the little-endian value layout that `.npy` and ONNX raw_data share.
//
// The `.npy` format (numpy.lib.format): the magic "\x93NUMPY", a major and minor version byte, the
// header length (2 bytes little endian in version 1, 4 bytes in versions 2 and 3), then the header
// -- a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by '\n' -- then the raw values in C order.
#include "tilegraph/import/tensor_files.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <variant>

#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/limits.h"
#include "tilegraph/import/onnx_import.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Files

enum class TensorFileFormat { npy, pb };

TensorFileFormat format_of(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".npy") return TensorFileFormat::npy;
  if (ext == ".pb") return TensorFileFormat::pb;
  throw UserError(path, "", cat("unknown tensor file extension '", ext,
                                "' (expected .npy or .pb)"));
}

std::string read_file(const std::string& path) {
  // At most the largest tensor the limits allow, 8 bytes an element, and a header.
  return read_regular_file(path, kMaxTensorElements * 8 + (int64_t{1} << 20), "a tensor file");
}

void write_file(const std::string& path, const std::string& bytes) { write_file_atomically(path, bytes); }

// ---------------------------------------------------------------------------------------------
// Little-endian values

uint64_t load_little_endian(const unsigned char* p, int num_bytes) {
  uint64_t bits = 0;
  for (int i = num_bytes - 1; i >= 0; --i) bits = (bits << 8) | p[i];
  return bits;
}

void store_little_endian(std::string& out, uint64_t bits, int num_bytes) {
  for (int i = 0; i < num_bytes; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

double value_from_bits(uint64_t bits, DType dtype) {
  switch (dtype) {
    case DType::f64: return std::bit_cast<double>(bits);
    case DType::f32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DType::f16: return half_bits_to_float(static_cast<uint16_t>(bits));
    case DType::bf16: return bf16_bits_to_float(static_cast<uint16_t>(bits));
    case DType::i64: break;  // exact only as an integer: decode_little_endian reads it apart
    case DType::i32: return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DType::i8: return static_cast<int8_t>(static_cast<uint8_t>(bits));
    case DType::u8: return static_cast<uint8_t>(bits);
    case DType::boolean: return bits != 0 ? 1.0 : 0.0;
  }
  TESSEL_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

/// The stored bits of element i. HostTensor values are already rounded to the dtype, so the
/// integer casts below are exact (as_int reads an i64 value exactly).
uint64_t bits_of_element(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f64: return std::bit_cast<uint64_t>(t[i]);
    case DType::f32: return std::bit_cast<uint32_t>(static_cast<float>(t[i]));
    case DType::f16: return float_to_half_bits(static_cast<float>(t[i]));
    case DType::bf16: return float_to_bf16_bits(static_cast<float>(t[i]));
    case DType::i64: return static_cast<uint64_t>(t.as_int(i));
    case DType::i32: return static_cast<uint32_t>(static_cast<int32_t>(t.as_int(i)));
    case DType::i8: return static_cast<uint8_t>(static_cast<int8_t>(t.as_int(i)));
    case DType::u8: return static_cast<uint8_t>(t.as_int(i));
    case DType::boolean: return t[i] != 0 ? 1 : 0;
  }
  TESSEL_ASSERT(false, "unknown dtype ", static_cast<int>(t.dtype()));
}

// ---------------------------------------------------------------------------------------------
// .npy header

constexpr std::string_view kNpyMagic = "\x93NUMPY";
constexpr size_t kNpyVersionBytes = 2;     // major, minor
constexpr size_t kNpyHeaderAlignment = 64;  // numpy pads magic + lengths + header to this
constexpr size_t kNpyV1MaxHeaderBytes = 0xffff;

/// The dtypes Tessel reads and writes as `.npy` (bf16 has no NumPy dtype; see tensor_files.h).
struct NpyDescr {
  std::string_view descr;
  DType dtype;
};
constexpr NpyDescr kNpyDescrs[] = {
    {"<f8", DType::f64}, {"<f4", DType::f32}, {"<f2", DType::f16}, {"<i8", DType::i64},
    {"<i4", DType::i32}, {"|i1", DType::i8},  {"|u1", DType::u8},  {"|b1", DType::boolean},
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

/// Parses the header dict. Values are strings, True/False, or tuples of integers; a list as
/// descr (a structured dtype) is unsupported.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    std::map<std::string, Value> entries;
    expect('{');
    while (!accept('}')) {
      std::string key = parse_string();
      expect(':');
      if (key == "descr" && accept('['))
        throw UnsupportedError(file_, "", cat("unsupported npy dtype: a structured dtype in ",
                                              shown()));
      entries[key] = parse_value();
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    NpyHeader header;
    header.descr = std::get<std::string>(required(entries, "descr", "a string"));
    header.fortran_order = std::get<bool>(required(entries, "fortran_order", "True or False"));
    header.shape = std::get<std::vector<int64_t>>(required(entries, "shape", "a tuple"));
    return header;
  }

 private:
  using Value = std::variant<std::string, bool, std::vector<int64_t>>;

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(file_, "", cat("malformed npy header ", shown(), ": ", what));
  }
  /// The header for error messages: without its padding, and cut if very long.
  std::string shown() const {
    constexpr size_t kMaxShownChars = 200;
    std::string_view text = text_.substr(0, kMaxShownChars);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
      text.remove_suffix(1);
    return cat("\"", text, text_.size() > kMaxShownChars ? "...\"" : "\"");
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(cat("expected '", c, "' at offset ", pos_));
  }
  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail(cat("expected a quoted string at offset ", pos_));
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  std::vector<int64_t> parse_int_tuple() {
    std::vector<int64_t> values;
    expect('(');
    while (!accept(')')) {
      skip_space();
      const size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (start == pos_) fail(cat("expected a non-negative integer at offset ", start));
      const std::string digits(text_.substr(start, pos_ - start));
      errno = 0;
      values.push_back(std::strtoll(digits.c_str(), nullptr, 10));
      if (errno == ERANGE) fail(cat("dimension ", digits, " is out of range"));
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return values;
  }
  Value parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    const char c = text_[pos_];
    if (c == '\'' || c == '"') return parse_string();
    if (c == '(') return parse_int_tuple();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(pos_).starts_with(word)) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    fail(cat("unexpected value at offset ", pos_));
  }
  const Value& required(const std::map<std::string, Value>& entries, const std::string& key,
                        const std::string& expected) const {
    const auto it = entries.find(key);
    if (it == entries.end()) fail(cat("missing key '", key, "'"));
    const bool right_kind = (key == "descr" && std::holds_alternative<std::string>(it->second)) ||
                            (key == "fortran_order" && std::holds_alternative<bool>(it->second)) ||
                            (key == "shape" &&
                             std::holds_alternative<std::vector<int64_t>>(it->second));
    if (!right_kind) fail(cat("'", key, "' must be ", expected));
    return it->second;
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
};

/// The dtype of a descr. Byte order is irrelevant for one-byte types ('<i1', '|i1'); '=' means
/// the host's order.
DType dtype_from_descr(const std::string& descr, const std::string& file) {
  std::string canonical = descr;
  if (canonical.size() == 3 && canonical[2] == '1' && std::string_view("<>=").find(canonical[0]) !=
                                                          std::string_view::npos)
    canonical[0] = '|';
  if (!canonical.empty() && canonical[0] == '=' && std::endian::native == std::endian::little)
    canonical[0] = '<';
  for (const NpyDescr& known : kNpyDescrs)
    if (known.descr == canonical) return known.dtype;
  if (!canonical.empty() && canonical[0] == '>')
    throw UnsupportedError(file, "", cat("unsupported npy dtype '", descr, "' (big-endian)"));
  throw UnsupportedError(file, "", cat("unsupported npy dtype '", descr,
                                       "' (supported: <f8 <f4 <f2 <i8 <i4 |i1 |u1 |b1)"));
}

std::string_view descr_of(DType dtype) {
  for (const NpyDescr& known : kNpyDescrs)
    if (known.dtype == dtype) return known.descr;
  TESSEL_ASSERT(false, "no npy descr for ", dtype_name(dtype));
}

std::string shape_tuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return cat("(", shape[0], ",)");
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + ")";
}

/// Where the header text starts and how long it is, from the magic, version and length fields.
struct NpyPrefix {
  size_t header_offset = 0;
  size_t header_bytes = 0;
};

NpyPrefix read_npy_prefix(std::string_view bytes, const std::string& path) {
  if (!bytes.starts_with(kNpyMagic)) {
    std::string shown;
    for (unsigned char c : bytes.substr(0, kNpyMagic.size())) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      shown += std::isprint(c) ? std::string(1, static_cast<char>(c)) : std::string(escaped);
    }
    throw UserError(path, "", cat("not a .npy file: bad magic \"", shown,
                                  "\" (expected \"\\x93NUMPY\")"));
  }
  const size_t version_at = kNpyMagic.size();
  if (bytes.size() < version_at + kNpyVersionBytes)
    throw UserError(path, "", cat("truncated: file has ", bytes.size(), " bytes, no version"));
  const int major = static_cast<unsigned char>(bytes[version_at]);
  const int minor = static_cast<unsigned char>(bytes[version_at + 1]);
  if (major < 1 || major > 3)
    throw UnsupportedError(path, "", cat("unsupported npy format version ", major, ".", minor));
  const int length_bytes = major == 1 ? 2 : 4;
  const size_t length_at = version_at + kNpyVersionBytes;
  if (bytes.size() < length_at + length_bytes)
    throw UserError(path, "", cat("truncated: file has ", bytes.size(), " bytes, no header length"));
  const auto* length_field = reinterpret_cast<const unsigned char*>(bytes.data() + length_at);
  NpyPrefix prefix{length_at + length_bytes, load_little_endian(length_field, length_bytes)};
  if (bytes.size() - prefix.header_offset < prefix.header_bytes)
    throw UserError(path, "", cat("truncated: header length says ", prefix.header_bytes,
                                  " bytes, file has ", bytes.size() - prefix.header_offset));
  return prefix;
}

HostTensor read_npy(const std::string& path) {
  const std::string bytes = read_file(path);
  const NpyPrefix prefix = read_npy_prefix(bytes, path);
  const std::string_view text = std::string_view(bytes).substr(prefix.header_offset,
                                                               prefix.header_bytes);
  const NpyHeader header = NpyHeaderParser(text, path).parse();
  const DType dtype = dtype_from_descr(header.descr, path);
  if (header.fortran_order)
    throw UnsupportedError(path, "", "unsupported npy layout: fortran_order True (save the array "
                                     "in C order, e.g. numpy.ascontiguousarray)");
  int64_t count = 1;
  for (int64_t d : header.shape)
    if (__builtin_mul_overflow(count, d, &count))
      throw UserError(path, "", cat("shape ", shape_tuple(header.shape), " overflows int64"));

  const size_t data_offset = prefix.header_offset + prefix.header_bytes;
  const uint64_t data_bytes = bytes.size() - data_offset;
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), uint64_t(dtype_bytes(dtype)),
                             &expected_bytes))
    throw UserError(path, "", cat("shape ", shape_tuple(header.shape), " is too large"));
  if (data_bytes < expected_bytes)
    throw UserError(path, "", cat("truncated: header says ", count, " x ", header.descr, " = ",
                                  expected_bytes, " bytes, file has ", data_bytes));
  if (data_bytes > expected_bytes)
    throw UserError(path, "", cat("trailing data: header says ", expected_bytes,
                                  " bytes, file has ", data_bytes));
  return decode_little_endian(std::string_view(bytes).substr(data_offset), TensorType{dtype, header.shape});
}

/// The header dict, padded with spaces and a final '\n' so that the data starts aligned.
std::string npy_header_text(std::string_view descr, const std::vector<int64_t>& shape,
                            size_t prefix_bytes) {
  std::string text = cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                         shape_tuple(shape), ", }");
  const size_t unpadded = prefix_bytes + text.size() + 1;
  text.append((kNpyHeaderAlignment - unpadded % kNpyHeaderAlignment) % kNpyHeaderAlignment, ' ');
  return text + "\n";
}

std::string encode_npy(const HostTensor& tensor) {
  // NumPy has no bfloat16: write its values as float32, which holds each exactly.
  const HostTensor stored = tensor.dtype() == DType::bf16
                                ? HostTensor(TensorType{DType::f32, tensor.shape()},
                                             tensor.values())
                                : tensor;
  const std::string_view descr = descr_of(stored.dtype());
  const size_t v1_prefix = kNpyMagic.size() + kNpyVersionBytes + 2;
  std::string header = npy_header_text(descr, stored.shape(), v1_prefix);
  const int major = header.size() <= kNpyV1MaxHeaderBytes ? 1 : 2;
  const int length_bytes = major == 1 ? 2 : 4;
  if (major == 2) header = npy_header_text(descr, stored.shape(), v1_prefix + 2);

  std::string out(kNpyMagic);
  out.push_back(static_cast<char>(major));
  out.push_back(0);  // minor version
  store_little_endian(out, header.size(), length_bytes);
  out += header;
  out += encode_little_endian(stored);
  return out;
}

}  // namespace

HostTensor decode_little_endian(std::string_view bytes, TensorType type) {
  const DType dtype = type.dtype;
  const int64_t count = type.num_elements();
  const int element_bytes = dtype_bytes(dtype);
  TESSEL_ASSERT(bytes.size() == static_cast<uint64_t>(count) * element_bytes, bytes.size(),
                " bytes for ", count, " elements of ", dtype_name(dtype));
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (dtype == DType::i64) {
    std::vector<int64_t> exact(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      exact[i] = static_cast<int64_t>(load_little_endian(p + i * element_bytes, element_bytes));
    return HostTensor::from_integers(std::move(type), std::move(exact));
  }
  std::vector<double> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    values[i] = value_from_bits(load_little_endian(p + i * element_bytes, element_bytes), dtype);
  return HostTensor(std::move(type), std::move(values));
}

std::string encode_little_endian(const HostTensor& tensor) {
  const int element_bytes = dtype_bytes(tensor.dtype());
  std::string out;
  out.reserve(static_cast<size_t>(tensor.size() * element_bytes));
  for (int64_t i = 0; i < tensor.size(); ++i)
    store_little_endian(out, bits_of_element(tensor, i), element_bytes);
  return out;
}

HostTensor read_tensor_file(const std::string& path) {
  switch (format_of(path)) {
    case TensorFileFormat::npy: return read_npy(path);
    case TensorFileFormat::pb: return decode_onnx_tensor(read_file(path), path);
  }
  TESSEL_ASSERT(false, "unknown tensor file format");
}

void write_tensor_file(const std::string& path, const HostTensor& tensor) {
  switch (format_of(path)) {
    case TensorFileFormat::npy: return write_file(path, encode_npy(tensor));
    case TensorFileFormat::pb:
      return write_file(path, encode_onnx_tensor(tensor, fs::path(path).stem().string()));
  }
  TESSEL_ASSERT(false, "unknown tensor file format");
}

}  // namespace tessel
