// The `tessel` subcommands; each takes the arguments after its name and returns the exit status.
#pragma once

#include <string>
#include <vector>

namespace tessel {

/// The whole command line after the program name: runs the command, catches every error and
/// prints it as the exit status documents (cli_main.cpp). 0 success, 1 a failed check, 2 bad
/// input, 3 an internal error.
int cli_main(const std::vector<std::string>& args);

int cmd_inspect(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_convert(const std::vector<std::string>& argv);
int cmd_compile(const std::vector<std::string>& argv);
int cmd_version(const std::vector<std::string>& argv);
/// `tessel hw show FILE` and `tessel hw probe` (hw_commands.cpp).
int cmd_hw(const std::vector<std::string>& argv);
int cmd_schedule(const std::vector<std::string>& argv);
int cmd_explain(const std::vector<std::string>& argv);
int cmd_sparsify(const std::vector<std::string>& argv);
int cmd_shard(const std::vector<std::string>& argv);
class Args;
/// `tessel run --mesh`: the model over a device mesh (shard_commands.cpp).
int run_on_mesh(const Args& args);

}  // namespace tessel
