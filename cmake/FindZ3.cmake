# FindZ3: Debian's libz3-dev ships no CMake package config, so this module finds the header and
# library and defines the imported target Z3::libz3 plus Z3_VERSION_STRING.
find_path(Z3_INCLUDE_DIR NAMES z3.h)
find_library(Z3_LIBRARY NAMES z3)
if(Z3_INCLUDE_DIR AND EXISTS "${Z3_INCLUDE_DIR}/z3_version.h")
  file(STRINGS "${Z3_INCLUDE_DIR}/z3_version.h" _z3_version_lines REGEX "#define Z3_FULL_VERSION")
  string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" Z3_VERSION_STRING "${_z3_version_lines}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Z3 REQUIRED_VARS Z3_LIBRARY Z3_INCLUDE_DIR
                                  VERSION_VAR Z3_VERSION_STRING)
if(Z3_FOUND AND NOT TARGET Z3::libz3)
  add_library(Z3::libz3 UNKNOWN IMPORTED)
  set_target_properties(Z3::libz3 PROPERTIES IMPORTED_LOCATION "${Z3_LIBRARY}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${Z3_INCLUDE_DIR}")
endif()
mark_as_advanced(Z3_INCLUDE_DIR Z3_LIBRARY)
