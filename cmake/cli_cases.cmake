# mantissa_add_cli_cases(TABLE): one CTest test per row of TABLE (tests/apps/cases.txt, the
# command's tests). A row is
#
#   NAME  LABELS  COMMAND [ARGUMENT...]  [PROPERTY VALUE...]...
#
# - LABELS: a comma list (cli; mpi,mpi_job for the Open MPI jobs, which run one at a time:
#   MANTISSA_OPEN_MPI_LOCK in tests.cmake; cli,no_sanitize).
# - COMMAND: a script in tests/apps, run with sh (cli_info.sh), or a program (@MANTISSA@, or
#   a path under @SOURCE_DIR@).
# - Placeholders: @MANTISSA@ the built command, @SOURCE_DIR@ the repository, @MPIEXEC@ Open MPI's
#   launcher, @MANTISSA_MPI_ENV@ the environment its jobs need as root, @PROJECT_VERSION@.
# - PROPERTY: a CTest test property (TIMEOUT, SKIP_RETURN_CODE, ENVIRONMENT,
#   PASS_REGULAR_EXPRESSION, FAIL_REGULAR_EXPRESSION, WILL_FAIL, DEPENDS, FIXTURES_SETUP,
#   FIXTURES_REQUIRED, FIXTURES_CLEANUP, RESOURCE_LOCK, RUN_SERIAL), or NEEDS mpi: the test is
#   registered only where Open MPI and its launcher were found.
#
# Words split as a shell splits them ('...' keeps spaces and backslashes); \n in a property's
# value is a newline. Lines that start with # are comments.
set(MANTISSA_CLI_CASE_KEYS NEEDS TIMEOUT SKIP_RETURN_CODE PASS_REGULAR_EXPRESSION
    FAIL_REGULAR_EXPRESSION WILL_FAIL RUN_SERIAL)
set(MANTISSA_CLI_CASE_LIST_KEYS ENVIRONMENT DEPENDS FIXTURES_SETUP FIXTURES_REQUIRED
    FIXTURES_CLEANUP RESOURCE_LOCK)

function(mantissa_add_cli_cases table)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${table})
  # The placeholders' values, for string(CONFIGURE).
  set(MANTISSA "$<TARGET_FILE:mantissa_cli>")
  set(SOURCE_DIR "${PROJECT_SOURCE_DIR}")
  set(MPIEXEC "${MPIEXEC_EXECUTABLE}")
  set(with_mpi OFF)
  if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
    set(with_mpi ON)
  endif()
  file(STRINGS ${table} rows REGEX "^[^#]")
  foreach(row IN LISTS rows)
    # A path of the machine that wrote the row would pass there and fail in any other clone.
    if(row MATCHES "[ \t]/")
      message(FATAL_ERROR "${table}: a row names an absolute path; write @SOURCE_DIR@/...: ${row}")
    endif()
    string(CONFIGURE "${row}" row @ONLY)
    separate_arguments(words UNIX_COMMAND "${row}")
    cmake_parse_arguments(case "" "${MANTISSA_CLI_CASE_KEYS}" "${MANTISSA_CLI_CASE_LIST_KEYS}"
                          ${words})
    if(DEFINED case_NEEDS AND NOT case_NEEDS STREQUAL "mpi")
      message(FATAL_ERROR "${table}: NEEDS takes mpi only: ${row}")
    elseif(DEFINED case_NEEDS AND NOT with_mpi)
      continue()
    endif()
    set(command ${case_UNPARSED_ARGUMENTS})
    list(LENGTH command words)
    if(words LESS 3)
      message(FATAL_ERROR "${table}: a row is NAME LABELS COMMAND...: ${row}")
    endif()
    list(POP_FRONT command name labels program)
    if(program MATCHES "^[^/]+\\.sh$")
      set(program sh ${PROJECT_SOURCE_DIR}/tests/apps/${program})
    endif()
    add_test(NAME ${name} COMMAND ${program} ${command})
    string(REPLACE "," ";" labels "${labels}")
    set_property(TEST ${name} PROPERTY LABELS ${labels})
    foreach(key IN LISTS MANTISSA_CLI_CASE_KEYS MANTISSA_CLI_CASE_LIST_KEYS)
      if(DEFINED case_${key} AND NOT key STREQUAL "NEEDS")
        string(REPLACE "\\n" "\n" value "${case_${key}}")
        set_property(TEST ${name} PROPERTY ${key} ${value})
      endif()
    endforeach()
    if("mpi_job" IN_LIST labels)
      set_property(TEST ${name} APPEND PROPERTY RESOURCE_LOCK ${MANTISSA_OPEN_MPI_LOCK})
    endif()
  endforeach()
endfunction()
