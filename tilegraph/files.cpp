// write_file_atomically (files.h).
#include "tilegraph/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tilegraph/error.h"

namespace tessel {

namespace {

void write_all(int fd, const std::string& bytes, const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UserError(path, "", cat("cannot write ", bytes.size(), " bytes: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::filesystem::path data_file_inside(const std::filesystem::path& folder, const std::string& name, const std::string& file,
                                       const std::string& where) {
  namespace fs = std::filesystem;
  const fs::path relative(name);
  auto refuse = [&](const std::string& why) -> fs::path {
    throw UserError(file, where, cat("data file '", name, "' ", why));
  };
  if (name.empty()) refuse("is empty");
  if (relative.is_absolute()) refuse("is an absolute path; it must be inside the model's folder");
  for (const fs::path& part : relative)
    if (part == "..") refuse("leaves the model's folder ('..')");
  std::error_code ec;
  const fs::path base = fs::canonical(folder.empty() ? fs::path(".") : folder, ec);
  if (ec) refuse(cat("cannot be looked up: the model's folder: ", ec.message()));
  const fs::path target = fs::canonical(base / relative, ec);
  if (ec) refuse(cat("cannot be opened: ", ec.message()));
  // Inside the folder after every symbolic link is followed: base is a prefix of target.
  auto b = base.begin(), t = target.begin();
  for (; b != base.end(); ++b, ++t)
    if (t == target.end() || *b != *t) refuse(cat("resolves to '", target.string(), "', outside the model's folder"));
  if (!fs::is_regular_file(target, ec)) refuse("is not a regular file");
  return target;
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw UserError(path, "", "is a directory, not a file");
    // A device or a pipe (/dev/stdout): written in place, never replaced.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) throw UserError(path, "", cat("cannot open for writing: ", std::strerror(errno)));
    try {
      write_all(fd, bytes, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throw UserError(path, "", cat("cannot write: ", std::strerror(errno)));
    return;
  }
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string temp = (folder / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw UserError(path, "", cat("cannot create a file in ", folder.string(), ": ", std::strerror(errno)));
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(temp.c_str());
    throw UserError(path, "", cat("cannot ", what, ": ", reason));
  };
  // Created 0600 by mkstemp; a written file gets the permissions a plain create would give.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) fail("set the file's permissions");
  try {
    write_all(fd, bytes, path);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::fsync(fd) != 0) fail("write the file to disk");
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw UserError(path, "", cat("cannot write the file: ", reason));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw UserError(path, "", cat("cannot replace the file: ", reason));
  }
}

std::string read_regular_file(const std::string& path, int64_t max_bytes, const std::string& what,
                              const std::string& referrer, const std::string& where) {
  auto fail = [&](const std::string& why) -> UserError {
    return referrer.empty() ? UserError(path, "", why) : UserError(referrer, where, cat(why, " (", path, ")"));
  };
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw fail(cat("cannot open ", what, ": ", err == ENOENT ? std::string("file not found") : std::string(std::strerror(err))));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw fail(dir ? cat("is a directory, not ", what) : cat(what, " is not a regular file (a device, pipe or socket)"));
  }
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw fail(cat(what, " is ", size, " bytes, more than the ", max_bytes, " this reader accepts"));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, bytes.data() + done, static_cast<size_t>(size - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw fail(n < 0 ? cat("cannot read ", what, ": ", std::strerror(err)) : cat(what, " ended early (changed while read)"));
    }
    done += n;
  }
  ::close(fd);
  return bytes;
}

FileLock::FileLock(const std::string& path, const std::string& what) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw UserError(path, "", cat(what, ": cannot open the lock file"));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd_);
      throw UserError(path, "", cat(what, ": cannot lock the file"));
    }
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace tessel
