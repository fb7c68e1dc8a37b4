// Runs the tessel binary the tests were built with (TESSEL_BINARY) and returns its exit status
// and its output (stdout and stderr together). One helper for every test that drives the CLI.
// (Its namespace is not tessel's: tests/error/cli_test.cpp names its wrapper `tessel`.)
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <doctest/doctest.h>

namespace cli_testing {

struct Result {
  int status = -1;     // the exit status, or -1 when the process did not exit normally
  std::string output;  // stdout and stderr
};

inline Result run(const std::string& args) {
  const std::string cmd = std::string(TESSEL_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace cli_testing
