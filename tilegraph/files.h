// Files a model names or the user names, handled safely.
//
// Reading data a model file points to (ONNX external data, a JSON model's external weights):
// `data_file_inside` resolves the name against the model's folder and refuses an absolute path,
// `..`, and anything whose canonical path (symbolic links followed) leaves the folder -- ONNX's own
// rule (CVE-2024-27318) -- and anything that is not a regular file (a FIFO would hang the read,
// /dev/zero would never end).
//
// Writing a file the user named, all or nothing: the bytes go to a new file of this user in the
// target's folder (an unpredictable name, created exclusively), every write and the close are
// checked, and only then is it renamed over the target. A full disk or a folder that cannot be
// written is a UserError naming the path (the CLI exits 2), never a truncated file reported as
// written. A device or pipe that exists (/dev/stdout) is written in place; a directory is refused.
#pragma once

#include <filesystem>
#include <string>

namespace tessel {

/// The regular file `name` inside `folder` (see above), or a UserError in `file` at `where`
/// naming `name` and the reason.
std::filesystem::path data_file_inside(const std::filesystem::path& folder, const std::string& name, const std::string& file,
                                       const std::string& where);

void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace tessel
