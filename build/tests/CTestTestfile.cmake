# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[lang.basics]=] "/work/main/build/tests/golden_runner" "/work/main/tests/lang/basics.shf")
set_tests_properties([=[lang.basics]=] PROPERTIES  WORKING_DIRECTORY "/work/main/tests/lang" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;10;add_test;/work/main/tests/CMakeLists.txt;0;")
