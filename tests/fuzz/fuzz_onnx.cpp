// libFuzzer target: tessel::fuzz::onnx (fuzz_bodies.h).
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::fuzz::onnx(data, size);
  return 0;
}
