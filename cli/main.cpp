// `tessel`: the command-line driver's executable; the commands are in the tessel_cli library
// (cli_main.cpp), which the Python package links too.
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) { return tessel::cli_main(std::vector<std::string>(argv + 1, argv + argc)); }
