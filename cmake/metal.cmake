# The Metal backend of mlx_fused_attn, included by the top-level
# CMakeLists.txt only when MLX was built with Metal (FA_GPU_BACKEND = metal).
#
# - Host code: mlx_fused_attn/backend/metal/*.cpp and each kernel family's
#   mlx_fused_attn/families/*/metal/*.cpp.
# - JIT: cmake/flatten_source.py flattens each kernel family's .metal file
#   (mlx_fused_attn/families/<folder>/<family>.metal)
#   into one ASCII text and embeds them, without their instantiations, in a
#   generated C++ file with the instantiation lines by kernel name: at run
#   time a library holds the one kernel (instantiation) a call needs.
# - AOT: with `xcrun metal` (and MLX_FUSED_ATTN_BUILD_METALLIB=ON),
#   cmake/build_metallib.py builds mlx_fused_attn_<family>.metallib for each
#   family (MLX's mlx_build_metallib flags), installed beside the library,
#   where the host code loads them from.

option(MLX_FUSED_ATTN_BUILD_METALLIB
       "Build the Metal kernels ahead of time into a metallib a family" ON)
option(MLX_FUSED_ATTN_METAL_STRICT
       "A kernel family that does not compile fails the build (else it falls back at run time)"
       OFF)

# A family's Metal entry point is the .metal file of its folder
# (families/registry.h); the file's stem is the family's name.
file(GLOB FA_METAL_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/families/*/*.metal)
file(GLOB FA_METAL_HEADERS CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/params.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/na_*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/tile/*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/families/*/*.h)

set(FA_JIT_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/metal_jit_source.cpp)
add_custom_command(
  OUTPUT ${FA_JIT_SOURCE}
  COMMAND "${Python_EXECUTABLE}" ${PROJECT_SOURCE_DIR}/cmake/flatten_source.py
          -I ${PROJECT_SOURCE_DIR} --cpp ${FA_JIT_SOURCE} --instances
          ${FA_METAL_SOURCES}
  DEPENDS ${PROJECT_SOURCE_DIR}/cmake/flatten_source.py ${FA_METAL_SOURCES}
          ${FA_METAL_HEADERS}
  COMMENT "Embedding the Metal kernel sources for the JIT"
  VERBATIM)

# The backend's own host code and each family's (families/*/metal/).
file(GLOB FA_METAL_FAMILY_HOST CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/families/*/metal/*.cpp)
target_sources(
  mlx_fused_attn
  PRIVATE ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/attention_metal.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/attention_dispatch.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/kernel_library.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/metal/split_partials.cpp
          ${FA_METAL_FAMILY_HOST}
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
  # Beside the built library, so that a build-tree library finds them as an
  # installed one does.
  set(FA_METALLIB_DIR ${CMAKE_CURRENT_BINARY_DIR})
  if(CMAKE_LIBRARY_OUTPUT_DIRECTORY)
    set(FA_METALLIB_DIR ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
  endif()
  # The kernels use bfloat, i.e. Metal 3.1 (macOS 14, which MLX requires
  # too). Python builds often carry an older deployment target (11.0), which
  # would select an older Metal, so the metallibs target at least 14.0.
  set(FA_METAL_DEPLOYMENT_TARGET 14.0)
  if(CMAKE_OSX_DEPLOYMENT_TARGET VERSION_GREATER 14.0)
    set(FA_METAL_DEPLOYMENT_TARGET ${CMAKE_OSX_DEPLOYMENT_TARGET})
  endif()
  set(FA_METALLIB_ON_ERROR warn)
  if(MLX_FUSED_ATTN_METAL_STRICT)
    set(FA_METALLIB_ON_ERROR fail)
  endif()
  set(FA_METALLIB_DEBUG)
  if(MLX_METAL_DEBUG OR CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(FA_METALLIB_DEBUG --debug)
  endif()

  # One metallib a family. cmake/build_metallib.py writes the compiler's
  # message to mlx_fused_attn_<family>.metallib.log instead of a metallib
  # that does not compile (unless strict); the log is installed in its
  # place and the runtime reports it as the family's fallback reason. With
  # no metallib made, such a family's command reruns at each build, so its
  # warning is never hidden by an up-to-date build.
  set(FA_METALLIBS)
  foreach(FA_METAL_SOURCE IN LISTS FA_METAL_SOURCES)
    get_filename_component(FA_FAMILY ${FA_METAL_SOURCE} NAME_WE)
    set(FA_FAMILY_METALLIB ${FA_METALLIB_DIR}/mlx_fused_attn_${FA_FAMILY}.metallib)
    add_custom_command(
      OUTPUT ${FA_FAMILY_METALLIB}
      COMMAND "${Python_EXECUTABLE}" ${PROJECT_SOURCE_DIR}/cmake/build_metallib.py
              --family ${FA_FAMILY} --source ${FA_METAL_SOURCE}
              -I ${PROJECT_SOURCE_DIR}
              --deployment-target ${FA_METAL_DEPLOYMENT_TARGET}
              --output-dir ${FA_METALLIB_DIR}
              --work-dir ${CMAKE_CURRENT_BINARY_DIR}/air
              --on-error ${FA_METALLIB_ON_ERROR} ${FA_METALLIB_DEBUG}
      DEPENDS ${PROJECT_SOURCE_DIR}/cmake/build_metallib.py ${FA_METAL_SOURCE}
              ${FA_METAL_HEADERS}
      COMMENT "Building mlx_fused_attn_${FA_FAMILY}.metallib"
      VERBATIM)
    list(APPEND FA_METALLIBS ${FA_FAMILY_METALLIB})
    install(FILES ${FA_FAMILY_METALLIB} ${FA_FAMILY_METALLIB}.log
            DESTINATION mlx_fused_attn OPTIONAL)
  endforeach()
  add_custom_target(mlx_fused_attn_metallibs DEPENDS ${FA_METALLIBS})
  add_dependencies(mlx_fused_attn mlx_fused_attn_metallibs)
  target_compile_definitions(mlx_fused_attn PRIVATE MLX_FUSED_ATTN_HAS_METALLIB)
endif()
message(STATUS "mlx_fused_attn: Metal metallib (AOT) = ${FA_BUILD_METALLIB}")
