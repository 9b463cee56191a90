# The Metal backend of mlx_fused_attn, included by the top-level
# CMakeLists.txt only when MLX was built with Metal (FA_GPU_BACKEND = metal).
#
# - Host code: mlx_fused_attn/backend/metal/*.cpp.
# - JIT: metal/flatten_source.py flattens each kernel family's .metal file
#   into one ASCII text and embeds them in a generated C++ file, compiled
#   into the library (a library a family at run time).
# - AOT: with `xcrun metal` (and MLX_FUSED_ATTN_BUILD_METALLIB=ON), MLX's
#   mlx_build_metallib builds mlx_fused_attn.metallib, installed beside the
#   library, where the host code loads it from.

option(MLX_FUSED_ATTN_BUILD_METALLIB
       "Build the Metal kernels ahead of time into a .metallib" ON)

set(FA_METAL_SOURCES
    ${PROJECT_SOURCE_DIR}/metal/attention.metal
    ${PROJECT_SOURCE_DIR}/metal/neighborhood.metal
    ${PROJECT_SOURCE_DIR}/metal/short_attention.metal
    ${PROJECT_SOURCE_DIR}/metal/strided_copy.metal)
file(GLOB FA_METAL_HEADERS CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/params.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/na_*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/tile/*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/*.h)

set(FA_JIT_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/metal_jit_source.cpp)
add_custom_command(
  OUTPUT ${FA_JIT_SOURCE}
  COMMAND "${Python_EXECUTABLE}" ${PROJECT_SOURCE_DIR}/metal/flatten_source.py
          -I ${PROJECT_SOURCE_DIR} --cpp ${FA_JIT_SOURCE} ${FA_METAL_SOURCES}
  DEPENDS ${PROJECT_SOURCE_DIR}/metal/flatten_source.py ${FA_METAL_SOURCES}
          ${FA_METAL_HEADERS}
  COMMENT "Embedding the Metal kernel sources for the JIT"
  VERBATIM)

target_sources(
  mlx_fused_attn
  PRIVATE ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/attention_metal.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/na_metal.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/kernel_library.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/attention_covers.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/na_launch.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/short_attention_metal.cpp
          ${FA_JIT_SOURCE})

set(FA_BUILD_METALLIB OFF)
if(MLX_FUSED_ATTN_BUILD_METALLIB)
  execute_process(
    COMMAND xcrun -sdk macosx --find metal
    RESULT_VARIABLE FA_XCRUN_METAL_RESULT
    OUTPUT_QUIET ERROR_QUIET)
  if(FA_XCRUN_METAL_RESULT EQUAL 0)
    set(FA_BUILD_METALLIB ON)
  else()
    message(WARNING "mlx_fused_attn: `xcrun metal` not found; building "
                    "without a metallib (kernels compile at run time)")
  endif()
endif()

if(FA_BUILD_METALLIB)
  # Beside the built library, so that a build-tree library finds it as an
  # installed one does.
  if(CMAKE_LIBRARY_OUTPUT_DIRECTORY)
    set(FA_METALLIB_DIR ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
  else()
    set(FA_METALLIB_DIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  # The kernels use bfloat, i.e. Metal 3.1 (macOS 14, which MLX requires
  # too). Python builds often carry an older deployment target (11.0), which
  # would select an older Metal, so the metallib targets at least 14.0.
  set(FA_METAL_DEPLOYMENT_TARGET 14.0)
  if(CMAKE_OSX_DEPLOYMENT_TARGET VERSION_GREATER 14.0)
    set(FA_METAL_DEPLOYMENT_TARGET ${CMAKE_OSX_DEPLOYMENT_TARGET})
  endif()
  mlx_build_metallib(
    TARGET mlx_fused_attn_metallib
    TITLE mlx_fused_attn
    SOURCES ${FA_METAL_SOURCES}
    INCLUDE_DIRS ${PROJECT_SOURCE_DIR}
    DEPS ${FA_METAL_HEADERS}
    DEPLOYMENT_TARGET ${FA_METAL_DEPLOYMENT_TARGET}
    OUTPUT_DIRECTORY ${FA_METALLIB_DIR})
  add_dependencies(mlx_fused_attn mlx_fused_attn_metallib)
  target_compile_definitions(mlx_fused_attn PRIVATE MLX_FUSED_ATTN_HAS_METALLIB)
  install(FILES ${FA_METALLIB_DIR}/mlx_fused_attn.metallib
          DESTINATION mlx_fused_attn)
endif()
message(STATUS "mlx_fused_attn: Metal metallib (AOT) = ${FA_BUILD_METALLIB}")
