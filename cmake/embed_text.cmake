# embed_text.cmake — writes a C++ file defining `extern const std::string_view sheaf::NAME` with
# the contents of a text file (the guide of `sheaf init-ai`).
# Usage: cmake -DIN=<file> -DOUT=<file.cpp> -DNAME=<identifier> -P embed_text.cmake
file(READ ${IN} text)
set(body "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#include <string_view>\n\n")
string(APPEND body "namespace sheaf {\nextern const std::string_view ${NAME};\n")
string(APPEND body "const std::string_view ${NAME} = R\"SHEAF_TEXT(${text})SHEAF_TEXT\";\n}  // namespace sheaf\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
