// SHA-256 (tilegraph/sha256.h) against FIPS 180-4's examples and a million 'a's, fed whole and in
// odd pieces; the kernel cache's keys are length-prefixed, so parts cannot run into each other.
#include <doctest/doctest.h>

#include <string>

#include "kernels/kernel_cache.h"
#include "tilegraph/sha256.h"

using namespace tessel;

TEST_CASE("sha256: the standard's examples, whole and in pieces") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(sha256_hex(two_blocks) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  Sha256 pieces;
  for (size_t at = 0; at < million.size(); at += 997) pieces.update(std::string_view(million).substr(at, 997));
  const auto digest = pieces.finish();
  CHECK(digest[0] == 0xcd);
  CHECK(digest[31] == 0xd0);
}

TEST_CASE("kernel cache keys: SHA-256, parts length-prefixed") {
  CHECK(KernelCache::key({"ab", "c"}) != KernelCache::key({"a", "bc"}));
  CHECK(KernelCache::key({"ab", "c"}).size() == 64);
}
