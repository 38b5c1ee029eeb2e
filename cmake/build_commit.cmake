# cmake/build_commit.cmake — run at every build (cmake -P, the sheaf_commit target): writes
# generated/build_commit.hpp with the commit the binary is built from, "+" when tracked files
# differ from it, "unknown" outside a git checkout. The file is only rewritten when that
# changes, so an unchanged commit rebuilds nothing.
#   cmake -DSOURCE_DIR=<repo> -DOUT=<file> -P cmake/build_commit.cmake
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND commit "+")
  endif()
endif()
file(WRITE ${OUT}.tmp "#define SHEAF_COMMIT \"${commit}\"\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
