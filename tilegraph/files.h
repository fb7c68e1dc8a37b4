// Files a model names or the user names, handled safely.
//
// Reading data a model file points to (ONNX external data, a JSON model's external weights):
// `data_file_inside` resolves the name against the model's folder and refuses an absolute path,
// `..`, and anything whose canonical path (symbolic links followed) leaves the folder -- ONNX's own
// rule (CVE-2024-27318) -- and anything that is not a regular file (a FIFO would hang the read,
// /dev/zero would never end).
//
// Reading a file the user named: regular files only, of a stated size at most (read_regular_file).
//
// Writing a file the user named, all or nothing: the bytes go to a new file of this user in the
// target's folder (an unpredictable name, created exclusively), every write and the close are
// checked, and only then is it renamed over the target. A full disk or a folder that cannot be
// written is a UserError naming the path (the CLI exits 2), never a truncated file reported as
// written. A device or pipe that exists (/dev/stdout) is written in place; a directory is refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace tessel {

/// The regular file `name` inside `folder` (see above), or a UserError in `file` at `where`
/// naming `name` and the reason.
std::filesystem::path data_file_inside(const std::filesystem::path& folder, const std::string& name, const std::string& file,
                                       const std::string& where);

void write_file_atomically(const std::string& path, const std::string& bytes);

/// Reading a file the user named (a model, a spec and what it extends, a schedule, an input
/// tensor): the whole of `path`, which must be a regular file (a FIFO would hang the read,
/// /dev/zero never end; it is opened without blocking, then checked) of at most `max_bytes`; else
/// a UserError in `path` (or in `referrer` at `where`, when set) naming `what` and the reason.
std::string read_regular_file(const std::string& path, int64_t max_bytes, const std::string& what,
                              const std::string& referrer = "", const std::string& where = "");

/// Size limits of the files read_regular_file reads, by kind (design choices, stated once).
inline constexpr int64_t kMaxSpecFileBytes = int64_t{16} << 20;       // a hardware spec: a few KB
inline constexpr int64_t kMaxScheduleFileBytes = int64_t{1} << 30;    // a saved schedule
inline constexpr int64_t kMaxModelFileBytes = int64_t{1} << 40;       // a model with its weights

/// An exclusive flock on `path` for the object's lifetime (created 0666 if missing); none when
/// `path` is empty. Processes sharing one device hold it while they time, so one thing is timed
/// at a time (`tessel run --time-lock`, BackendMeasurer). A file that cannot be opened or locked
/// is a UserError naming it and `what` (the option that named it).
class FileLock {
 public:
  FileLock(const std::string& path, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tessel
