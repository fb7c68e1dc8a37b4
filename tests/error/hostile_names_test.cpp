// Names that would forge or flood an error line (issue: hostile inputs, class 11): control
// characters in a name are escaped in the message, a message is cut at 4000 bytes, and a name over
// 4096 bytes is refused when the model is lowered.
#include <doctest/doctest.h>

#include "tilegraph/error.h"
#include "tilegraph/limits.h"
#include "tilegraph/lower.h"

using namespace tessel;

namespace {

ModelDef relu_model(const std::string& op_name, const std::string& input_name) {
  ModelDef m;
  m.name = "names";
  m.file = "names.json";
  m.inputs.push_back({input_name, TensorType{DType::f32, {2, 3}}});
  m.ops.push_back({op_name, "Relu", {input_name}, {"y"}, {}, ""});
  m.outputs.push_back("y");
  return m;
}

std::string lowering_error(const ModelDef& m) {
  try {
    lower_model(m);
  } catch (const InternalError& e) {
    FAIL("InternalError instead of a UserError: ", e.what());
  } catch (const UserError& e) {
    return e.what();
  }
  FAIL("expected a UserError");
  return "";
}

}  // namespace

TEST_CASE("hostile names: control characters are escaped, the error stays one line") {
  ModelDef m = relu_model("evil\n\x1b[2Jforged line", "x");
  m.ops[0].inputs[0] = "missing\r\tname\x7f";
  const std::string text = lowering_error(m);
  CHECK(text.find('\n') == std::string::npos);
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x7f') == std::string::npos);
  CHECK(text.find("evil\\n\\x1b[2Jforged line") != std::string::npos);
  CHECK(text.find("missing\\r\\tname\\x7f") != std::string::npos);
  // The error's parts are kept as given (callers compare them); only the text is escaped.
  const UserError e("f\nile", "loc", "message");
  CHECK(e.file() == "f\nile");
  CHECK(std::string(e.what()) == "f\\nile: loc: message");
}

TEST_CASE("hostile names: messages are cut at 4000 bytes, names over 4096 bytes are refused") {
  const UserError long_message("x.json", "", std::string(100000, 'a'));
  const std::string text = long_message.what();
  CHECK(text.size() < 4100);
  CHECK(text.find("more bytes)") != std::string::npos);
  // Cut at a character boundary: no half of a two-byte character (U+00E9) at the end.
  std::string accents;
  for (int i = 0; i < 3000; ++i) accents += "\xc3\xa9";
  const std::string cut = UserError("", "", accents).what();
  const size_t end = cut.find(" ... (");
  REQUIRE(end != std::string::npos);
  CHECK(end % 2 == 0);
  const std::string huge(1000000, 'n');
  const std::string op_error = lowering_error(relu_model(huge, "x"));
  CHECK(op_error.find("a name of 1000000 bytes, more than 4096") != std::string::npos);
  CHECK(op_error.size() < 400);
  const std::string input_error = lowering_error(relu_model("r", huge));
  CHECK(input_error.find("a name of 1000000 bytes, more than 4096") != std::string::npos);
  CHECK(input_error.size() < 400);
}

TEST_CASE("hostile names: names must be UTF-8 (they are written into JSON schedules and manifests)") {
  CHECK(valid_utf8("plain"));
  CHECK(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(valid_utf8("bad\xff"));
  CHECK_FALSE(valid_utf8("cut\xc3"));
  CHECK_FALSE(valid_utf8("overlong\xc0\xaf"));
  CHECK_FALSE(valid_utf8("surrogate\xed\xa0\x80"));
  const std::string text = lowering_error(relu_model("r", "x\xff"));
  CHECK(text.find("not valid UTF-8") != std::string::npos);
}
