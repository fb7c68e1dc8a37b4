// The parts of the Python module defined outside module.cpp.
#pragma once

#include <nanobind/nanobind.h>

namespace tessel::python {

/// Policies written in Python: the tile-graph API a policy sees (Context, Group, Tile) and
/// register_policy / unregister_policy (policy_bindings.cpp).
void bind_policies(nanobind::module_& m);

}  // namespace tessel::python
