# Embeds the device library (kernels/cuda/device/*.cuh) into a C++ source file as one string, so
# NVRTC gets it from the binary at run time (no files, no include path). Run by CMake at build time:
#   cmake -DOUT=file.cpp -DFILES="a.cuh|b.cuh" -P embed_device_library.cmake
string(REPLACE "|" ";" FILES "${FILES}")
set(body "")
foreach(f ${FILES})
  file(READ ${f} text)
  string(REPLACE "#pragma once" "" text "${text}")
  get_filename_component(name ${f} NAME)
  string(APPEND body "// ---- kernels/cuda/device/${name} ----\n${text}\n")
endforeach()
set(content "// Generated from kernels/cuda/device/*.cuh by embed_device_library.cmake; do not edit.\n#include <string>\n\nnamespace tessel::cuda {\n\nextern const char* const kDeviceLibrarySource;\nconst char* const kDeviceLibrarySource = R\"tsl_device_lib(${body})tsl_device_lib\";\n\n}  // namespace tessel::cuda\n")
file(WRITE ${OUT}.tmp "${content}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
