// libFuzzer target: tessel::fuzz::model_json (fuzz_bodies.h).
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::fuzz::model_json(data, size);
  return 0;
}
