# Run at every build (target mantissa_git_revision in CMakeLists.txt): writes OUT, the header
# that src/core/version.cpp includes, with the commit of SOURCE_DIR, and rewrites it only when
# the commit changed, so a build on the same commit recompiles nothing and one on a new commit
# recompiles only version.cpp. Outside a git checkout the revision is empty.
set(rev "")
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
set(text "#define MANTISSA_GIT_REVISION \"${rev}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
