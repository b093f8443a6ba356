# test_bind: the CMocka test, plus the layer rules checked on the source
# tree (core names no transport; transports include only their own folder
# and transports/common/).
add_test(NAME test_bind COMMAND test_bind)
set_tests_properties(test_bind PROPERTIES TIMEOUT 120 LABELS "unit")
add_test(NAME layer_rules COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}
         -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/layer_rules.cmake)
set_tests_properties(layer_rules PROPERTIES TIMEOUT 60 LABELS "unit")

# The layers of core/ (docs/architecture.md), checked by
# tests/layers/check_layers.py: includes over the source tree; calls over
# the library's object files (nm: every folder calls only its own folder and
# those below it, no circle; exec/'s files in their declared order). The
# objects exist once the library is built, before ctest runs.
# layer_check_catches feeds the checker bad trees and listings.
find_program(RMACOLL_LAYERS_PYTHON NAMES python3)
if(RMACOLL_LAYERS_PYTHON AND CMAKE_NM)
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/layers_objects.txt
       CONTENT "$<JOIN:$<TARGET_OBJECTS:rmacoll_obj>,\n>\n")
  add_test(NAME layer_check COMMAND ${RMACOLL_LAYERS_PYTHON}
           ${PROJECT_SOURCE_DIR}/tests/layers/check_layers.py --src ${PROJECT_SOURCE_DIR}
           --objects ${PROJECT_BINARY_DIR}/layers_objects.txt --nm ${CMAKE_NM}
           --allow ${PROJECT_SOURCE_DIR}/tests/layers/allowed.txt)
  set_tests_properties(layer_check PROPERTIES TIMEOUT 120 LABELS "unit")
  add_test(NAME layer_check_catches COMMAND ${RMACOLL_LAYERS_PYTHON}
           ${PROJECT_SOURCE_DIR}/tests/layers/test_check_layers.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(layer_check_catches PROPERTIES TIMEOUT 120 LABELS "unit")
  # layer_long_functions: lists the functions of core/ and transports/ over
  # 80 lines and whether a "Long because:" reason is written at their top
  # (issue 29). It only reports; run it with --strict to fail on one.
  add_test(NAME layer_long_functions COMMAND ${RMACOLL_LAYERS_PYTHON}
           ${PROJECT_SOURCE_DIR}/tests/layers/long_functions.py --src ${PROJECT_SOURCE_DIR})
  set_tests_properties(layer_long_functions PROPERTIES TIMEOUT 60 LABELS "unit")
else()
  message(STATUS "rmacoll: layer_check skipped (needs python3 and nm)")
endif()
