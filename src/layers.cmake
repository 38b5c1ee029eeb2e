# src/layers.cmake — the layers of src/: one library target per folder, naming the layers it
# depends on. A folder's files include only headers of its own folder and of the layers named
# here (tests/tools/check_layers.py checks every #include against this file, and that the layers
# form a DAG; CMake itself refuses a cycle among these object libraries). docs/architecture.md
# draws the graph and says what each layer is.
#
# sheaf_layer(<folder> [DEPS <layer>...] [OPTIMIZE Os|O2] [EXCLUDE <regex>])
#   <folder>  a folder of src/ (backend's subfolders cpu, cuda and ref are layers of their own:
#             backend/cpu); its *.cpp files (not those of its subfolders) become the OBJECT library
#             sheaf_<folder with / as _>, which sheaf_core (or, for cli, the sheaf executable) links.
#   OPTIMIZE  in the size-tuned Release build (SHEAF_SIZE_TUNED), -Os for code that runs once per
#             program or per compile rather than per step (differentiation's and vmap's rules too:
#             as fast at -Os, callgrind on bench/gpu_dry, and 135 KB smaller), -O2 for the rest of
#             the compile-time work (tracing, passes, the shared lowering); the rest keeps -O3.
#   EXCLUDE   sources of the folder that are not part of the layer (a regex on the path).
# With SHEAF_UNITY_BUILD each layer compiles its sources in batches of up to 16 (names private to a
# file must then differ across the files of its folder).
#
# The declarations are written to ${CMAKE_BINARY_DIR}/layers.txt for the check, one line per layer:
# <folder>|<deps separated by spaces>.

set(SHEAF_LAYER_TARGETS)  # the layers that make up sheaf_core (all but cli)
set(SHEAF_LAYER_LINES)

function(sheaf_layer folder)
  cmake_parse_arguments(L "" "OPTIMIZE;EXCLUDE" "DEPS" ${ARGN})
  string(REPLACE "/" "_" target "sheaf_${folder}")
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${folder}/*.cpp)
  if(L_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${L_EXCLUDE}")
  endif()
  add_library(${target} OBJECT ${sources})
  target_link_libraries(${target} PUBLIC sheaf_common)
  foreach(dep ${L_DEPS})
    string(REPLACE "/" "_" dep_target "sheaf_${dep}")
    target_link_libraries(${target} PUBLIC ${dep_target})
  endforeach()
  if(SHEAF_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
  endif()
  if(SHEAF_SIZE_TUNED AND L_OPTIMIZE)
    target_compile_options(${target} PRIVATE -${L_OPTIMIZE})
  endif()
  if(folder STREQUAL "cli")
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL ON)  # built for the sheaf executable
  else()
    set(SHEAF_LAYER_TARGETS ${SHEAF_LAYER_TARGETS} ${target} PARENT_SCOPE)
  endif()
  string(REPLACE ";" " " deps "${L_DEPS}")
  set(SHEAF_LAYER_LINES "${SHEAF_LAYER_LINES}${folder}|${deps}\n" PARENT_SCOPE)
endfunction()

# What every layer is compiled with and what users of sheaf_core get.
add_library(sheaf_common INTERFACE)
target_include_directories(sheaf_common INTERFACE ${CMAKE_SOURCE_DIR}/src)
# {fmt}: headers only from the package; its implementation is compiled in (src/base/fmt_static.cpp).
target_include_directories(sheaf_common SYSTEM INTERFACE $<TARGET_PROPERTY:fmt::fmt,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(sheaf_common INTERFACE nlohmann_json::nlohmann_json Threads::Threads ZLIB::ZLIB OpenSSL::Crypto
                      ${CMAKE_DL_LIBS})
target_compile_definitions(sheaf_common INTERFACE SHEAF_VERSION="${PROJECT_VERSION}")

# Bottom to top: a layer names only layers declared before it.
sheaf_layer(base)
sheaf_layer(tensor DEPS base)
sheaf_layer(dist OPTIMIZE Os DEPS base tensor)
sheaf_layer(ir OPTIMIZE O2 DEPS base tensor)
sheaf_layer(value DEPS base tensor)
sheaf_layer(reader OPTIMIZE O2 DEPS base value)
sheaf_layer(io OPTIMIZE Os DEPS base tensor value EXCLUDE "/tensorboard_plugin\\.cpp$")
sheaf_layer(backend/ref DEPS base dist ir tensor)
sheaf_layer(passes OPTIMIZE O2 DEPS backend/ref base ir tensor)
sheaf_layer(backend OPTIMIZE O2 DEPS backend/ref base ir passes tensor)
sheaf_layer(backend/cpu OPTIMIZE Os DEPS backend backend/ref base io ir passes tensor)
if(SHEAF_SIZE_TUNED)  # but what runs per compiled call (its dispatch, the loop threads) keeps -O3
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/backend/cpu/program.cpp ${CMAKE_SOURCE_DIR}/src/backend/cpu/parallel.cpp
                              PROPERTIES COMPILE_OPTIONS -O3)
endif()
sheaf_layer(backend/cuda OPTIMIZE Os DEPS backend backend/ref base dist io passes tensor EXCLUDE "/cudnn_plugin\\.cpp$")
sheaf_layer(emit OPTIMIZE Os DEPS base dist ir tensor)
sheaf_layer(plot OPTIMIZE Os DEPS base io EXCLUDE "${SHEAF_PLOT_EXCLUDE}")
sheaf_layer(eval DEPS base reader tensor value)
sheaf_layer(trace OPTIMIZE O2 DEPS base eval ir passes tensor value)
sheaf_layer(obs OPTIMIZE Os DEPS backend/ref base emit eval io ir tensor trace value)
sheaf_layer(runtime DEPS backend backend/cpu backend/cuda backend/ref base dist eval io obs passes tensor trace value)
sheaf_layer(autodiff OPTIMIZE Os DEPS base dist eval ir runtime tensor trace value)
sheaf_layer(batching OPTIMIZE Os DEPS dist eval ir runtime tensor trace value)
sheaf_layer(builtins OPTIMIZE Os DEPS autodiff base batching dist eval io obs runtime tensor trace value)
sheaf_layer(docs OPTIMIZE Os DEPS builtins eval)
sheaf_layer(cli OPTIMIZE Os DEPS autodiff backend/cuda base builtins dist docs emit eval io obs passes plot reader
  runtime trace value)

file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/layers.txt CONTENT "${SHEAF_LAYER_LINES}")
