# Every third-party dependency of Tessel, found with find_package from Debian packages (installed
# by scripts/setup) plus the CUDA toolkit under /usr/local/cuda. Nothing is vendored or downloaded.
#
# Used now: Boost.Graph (OpGraph), nlohmann_json (model and spec files), ONNX + Protobuf (ONNX
# import), doctest (tests), CUDAToolkit's NVRTC (reported by `tessel version`).
# Found now and used by the stages that follow (cost model, policies, code generation): LLVM,
# Z3, Google Benchmark, the CUDA driver API.

find_package(Boost 1.74 REQUIRED)  # Boost.Graph is header-only
find_package(nlohmann_json 3.10 REQUIRED)
find_package(ONNX REQUIRED)
find_package(Protobuf REQUIRED)
list(APPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_LIST_DIR})
find_package(Z3 4.8 REQUIRED)  # cmake/FindZ3.cmake
find_package(benchmark REQUIRED)

# LLVM is pinned to one major version; Debian installs it under /usr/lib/llvm-16.
set(TESSEL_LLVM_VERSION 16)
find_package(LLVM ${TESSEL_LLVM_VERSION} REQUIRED CONFIG
             HINTS /usr/lib/llvm-${TESSEL_LLVM_VERSION}/lib/cmake/llvm)
if(NOT LLVM_VERSION_MAJOR EQUAL TESSEL_LLVM_VERSION)
  message(FATAL_ERROR "Tessel pins LLVM ${TESSEL_LLVM_VERSION}, found ${LLVM_PACKAGE_VERSION}")
endif()

# The CUDA toolkit: only its host libraries (NVRTC, driver API) are needed to build; no GPU is
# needed to configure, compile or link.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit REQUIRED)

if(TESSEL_BUILD_TESTS)
  find_package(doctest REQUIRED)
endif()

message(STATUS "Tessel dependencies: Boost ${Boost_VERSION}, nlohmann_json ${nlohmann_json_VERSION}, "
               "ONNX ${ONNX_VERSION}, Protobuf ${Protobuf_VERSION}, Z3 ${Z3_VERSION_STRING}, "
               "LLVM ${LLVM_PACKAGE_VERSION}, CUDA ${CUDAToolkit_VERSION}")
