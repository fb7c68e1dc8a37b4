// The test runner's main(); every test file under unit/, correctness/ and error/ links into it.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
