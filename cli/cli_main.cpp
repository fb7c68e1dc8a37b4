// `tessel`: the command-line driver (cli_main; main.cpp calls it, and so does the Python
// package's `tessel` command, python/).
//
// Exit status: 0 success; 1 a check failed (`run --expect` found a mismatch); 2 bad input (a
// UserError, a path the file system refuses, a resource the system refuses; printed as one
// escaped line); 3 an internal error (a Tessel bug, or any other exception).
#include <filesystem>
#include <system_error>
#include <iostream>

#include "cli/commands.h"
#include "tilegraph/error.h"

namespace {

const char* kUsage =
    "usage: tessel COMMAND [options]   (tessel COMMAND --help for details)\n"
    "  inspect MODEL          nodes, shapes, dtypes, FLOPs and bytes of a model (--dump: the IR)\n"
    "  run MODEL --interp     run a model with the reference interpreter\n"
    "  convert MODEL.onnx -o MODEL.json\n"
    "                         convert a model to Tessel's JSON format\n"
    "  compile MODEL [--run]  run the compiler pipeline and report each stage\n"
    "  hw show FILE | hw probe [-o FILE] [--device cpu|cuda] [--quick]\n"
    "                         print a hardware spec, or measure this machine and write one\n"
    "  schedule MODEL --hw SPEC [--policy P] -o FILE\n"
    "                         fuse and tile a model for a chip; save the schedule as JSON\n"
    "  explain MODEL --hw SPEC [--format text|dot|html]\n"
    "                         why each kernel, tile and memory level was chosen\n"
    "  sparsify MODEL --hw SPEC -o OUT.json (--density D | --detect)\n"
    "                         block-sparse linear weights: prune (choosing blocks) or mark pruned ones\n"
    "  shard MODEL --hw SPEC --mesh M\n"
    "                         spread a model over a device mesh: the plan, its collectives and times\n"
    "  version                version and build information\n";

}  // namespace

int tessel::cli_main(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "inspect") return tessel::cmd_inspect(rest);
    if (command == "run") return tessel::cmd_run(rest);
    if (command == "convert") return tessel::cmd_convert(rest);
    if (command == "compile") return tessel::cmd_compile(rest);
    if (command == "hw") return tessel::cmd_hw(rest);
    if (command == "schedule") return tessel::cmd_schedule(rest);
    if (command == "explain") return tessel::cmd_explain(rest);
    if (command == "sparsify") return tessel::cmd_sparsify(rest);
    if (command == "shard") return tessel::cmd_shard(rest);
    if (command == "version" || command == "--version") return tessel::cmd_version(rest);
    std::cerr << "tessel: error: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const tessel::UserError& e) {
    std::cerr << "tessel: error: " << e.what() << "\n";
    return 2;
  } catch (const tessel::InternalError& e) {
    std::cerr << "tessel: " << e.what() << "\nThis is a bug in Tessel; please report it with the model.\n";
    return 3;
  } catch (const std::bad_alloc&) {
    std::cerr << "tessel: error: out of memory\n";
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user named that cannot be created, read or written (an existing file where a
    // folder is wanted, no permission): bad input, one line.
    std::cerr << "tessel: error: " << tessel::UserError(e.path1().string(), "", e.code().message()).what() << "\n";
    return 2;
  } catch (const std::system_error& e) {
    // The system refused a resource (threads, files): not a bug in Tessel, and nothing to retry.
    std::cerr << "tessel: error: " << tessel::UserError("", "", e.what()).what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tessel: internal error: unexpected exception: " << tessel::UserError("", "", e.what()).what()
              << "\nThis is a bug in Tessel; please report it with the model.\n";
    return 3;
  }
}
