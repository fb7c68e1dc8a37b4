// OpGraph: building, producers/consumers, topological order, subgraphs, dead-node elimination.
#include <doctest/doctest.h>

#include "tilegraph/error.h"
#include "tilegraph/op_graph.h"

using namespace tessel;

namespace {
NodeRef unary_node(const std::string& name, ExprOp op) {
  NodeSpec s;
  s.name = name;
  s.axes = {{"i", 4, AxisKind::spatial}};
  s.inputs = {Access{TensorType{DType::f32, {4}}, AffineMap::select_axes(1, {0})}};
  s.body = unary(op, input(0, DType::f32));
  return make_node(s);
}
NodeRef add_node(const std::string& name) {
  NodeSpec s;
  s.name = name;
  s.axes = {{"i", 4, AxisKind::spatial}};
  const Access a{TensorType{DType::f32, {4}}, AffineMap::select_axes(1, {0})};
  s.inputs = {a, a};
  s.body = input(0, DType::f32) + input(1, DType::f32);
  return make_node(s);
}
}  // namespace

TEST_CASE("a diamond: x -> a, b -> c, plus a dead branch") {
  OpGraph g;
  const TensorType t{DType::f32, {4}};
  const TensorId x = g.add_input("x", t);
  const TensorId a = g.add_node(unary_node("a", ExprOp::exp), {x}, "a");
  const TensorId b = g.add_node(unary_node("b", ExprOp::tanh), {x}, "b");
  const TensorId dead = g.add_node(unary_node("dead", ExprOp::sin), {a}, "dead");
  const TensorId c = g.add_node(add_node("c"), {a, b}, "c");
  g.mark_output(c);
  CHECK(g.num_nodes() == 4);
  CHECK(g.producer(c) == 3);
  CHECK(g.consumers(x) == std::vector<NodeId>{0, 1});
  CHECK(g.consumers(a) == std::vector<NodeId>{2, 3});
  const auto order = g.topological_order();
  CHECK(order == std::vector<NodeId>{0, 1, 2, 3});

  const OpGraph live = eliminate_dead_nodes(g);
  CHECK(live.num_nodes() == 3);
  CHECK_FALSE(live.find_tensor("dead").has_value());
  CHECK(live.tensor(live.outputs()[0]).name == "c");
  (void)dead;

  // The {b, c} subgraph reads x and a from outside: both become inputs.
  const OpGraph sub = extract_subgraph(g, {1, 3});
  CHECK(sub.num_nodes() == 2);
  CHECK(sub.inputs().size() == 2);
  CHECK(sub.tensor(sub.outputs()[0]).name == "c");
}

TEST_CASE("mismatched tensor types and duplicate names are internal errors") {
  OpGraph g;
  const TensorId x = g.add_input("x", TensorType{DType::f32, {5}});
  CHECK_THROWS_AS(g.add_node(unary_node("a", ExprOp::exp), {x}, "a"), InternalError);
  CHECK_THROWS_AS(g.add_input("x", TensorType{DType::f32, {4}}), InternalError);
}

TEST_CASE("the printer lists inputs, weights, nodes and outputs") {
  OpGraph g;
  const TensorId x = g.add_input("x", TensorType{DType::f32, {4}});
  const TensorId w = g.add_weight("w", TensorType{DType::f32, {4}}, RandomInit{RandomInit::Dist::normal, 0, 1, 3});
  g.mark_output(g.add_node(add_node("s"), {x, w}, "s"));
  CHECK(g.print() ==
        "input x: f32[4]\n"
        "weight w: f32[4] normal(0, 1) seed 3\n"
        "s: f32[4] = node \"s\"\n"
        "  domain (i:4)\n"
        "  in0 = x[i] : f32[4]\n"
        "  in1 = w[i] : f32[4]\n"
        "  body add(in0, in1)\n"
        "output s\n");
}
