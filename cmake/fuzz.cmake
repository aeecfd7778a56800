# libFuzzer targets for the readers of untrusted files (docs/fuzzing.md): the safetensors
# reader, the --config JSON reader and the tokenizer.json loader, each built with ASan and
# UBSan. Included by CMakeLists.txt when MANTISSA_FUZZ is ON; needs clang (CMAKE_CXX_COMPILER)
# and its libFuzzer runtime. scripts/fuzz.sh configures build-fuzz/ with it and runs the targets.
#
# Only the sources the readers need are compiled, into their own static library, with the
# fuzzer's coverage instrumentation and the sanitizers: core (Tensor, dtypes, errors; autograd
# is part of core), io, text, and the config reader of the command.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "MANTISSA_FUZZ needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++")
endif()

# -O1 -g: fast enough to reach millions of runs, precise enough for the reports' stacks.
set(MANTISSA_FUZZ_FLAGS -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
file(GLOB MANTISSA_FUZZ_LIB_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/core/*.cpp ${PROJECT_SOURCE_DIR}/src/core/cuda/*.cpp
     ${PROJECT_SOURCE_DIR}/src/core/autograd/*.cpp ${PROJECT_SOURCE_DIR}/src/io/*.cpp
     ${PROJECT_SOURCE_DIR}/src/text/*.cpp)
list(APPEND MANTISSA_FUZZ_LIB_SOURCES ${PROJECT_SOURCE_DIR}/apps/json_config.cpp
     ${PROJECT_SOURCE_DIR}/apps/config_source.cpp ${PROJECT_SOURCE_DIR}/apps/config_help.cpp
     ${PROJECT_SOURCE_DIR}/apps/whole_number_options.cpp ${PROJECT_SOURCE_DIR}/apps/flag_value_checks.cpp
     ${PROJECT_SOURCE_DIR}/apps/command_line_errors.cpp)
add_library(mantissa_fuzz_readers STATIC EXCLUDE_FROM_ALL ${MANTISSA_FUZZ_LIB_SOURCES})
target_include_directories(mantissa_fuzz_readers PUBLIC ${PROJECT_SOURCE_DIR}/include
                           ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/apps)
target_compile_features(mantissa_fuzz_readers PUBLIC cxx_std_20)
target_compile_options(mantissa_fuzz_readers PRIVATE
                       -fsanitize=fuzzer-no-link,address,undefined ${MANTISSA_FUZZ_FLAGS})
target_link_libraries(mantissa_fuzz_readers PUBLIC OpenMP::OpenMP_CXX fmt::fmt
                      nlohmann_json::nlohmann_json CLI11::CLI11 PkgConfig::PCRE2
                      PkgConfig::UTF8PROC ZLIB::ZLIB Threads::Threads)
add_dependencies(mantissa_fuzz_readers mantissa_git_revision)
set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/core/version.cpp APPEND PROPERTY
             INCLUDE_DIRECTORIES ${PROJECT_BINARY_DIR}/generated)
target_compile_definitions(mantissa_fuzz_readers PRIVATE MANTISSA_VERSION="${PROJECT_VERSION}")

set(MANTISSA_FUZZ_TARGETS fuzz_safetensors_reader fuzz_json_config fuzz_tokenizer_json)
add_custom_target(fuzz_targets)
foreach(name ${MANTISSA_FUZZ_TARGETS})
  add_executable(${name} EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/tests/fuzz/${name}.cpp)
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined
                         ${MANTISSA_FUZZ_FLAGS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${name} PRIVATE mantissa_fuzz_readers)
  add_dependencies(fuzz_targets ${name})
endforeach()

# A short smoke run of each target on its seed corpus (scripts/fuzz.sh does the long runs):
# ctest -L fuzz in build-fuzz/. Registered only here, so the default build has no such test.
enable_testing()
foreach(name ${MANTISSA_FUZZ_TARGETS})
  add_test(NAME fuzz.${name}_smoke
           COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh --smoke ${name}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(fuzz.${name}_smoke PROPERTIES LABELS fuzz
                       ENVIRONMENT FUZZ_BUILD_DIR=${PROJECT_BINARY_DIR})
endforeach()
