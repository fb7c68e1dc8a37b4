// libFuzzer target: tessel::fuzz::hw_spec (fuzz_bodies.h).
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::fuzz::hw_spec(data, size);
  return 0;
}
