# test_bind: the CMocka test, plus the layer rules checked on the source
# tree (core names no transport; transports include only their own folder
# and transports/common/).
add_test(NAME test_bind COMMAND test_bind)
set_tests_properties(test_bind PROPERTIES TIMEOUT 120 LABELS "unit")
add_test(NAME layer_rules COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}
         -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/layer_rules.cmake)
set_tests_properties(layer_rules PROPERTIES TIMEOUT 60 LABELS "unit")
