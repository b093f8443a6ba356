# test_config: the CMocka test, plus rmacoll-info run end to end (an
# environment override must show in its JSON; a missing file must fail).
add_test(NAME test_config COMMAND test_config)
set_tests_properties(test_config PROPERTIES TIMEOUT 120)
if(TARGET rmacoll-info)
  add_test(NAME rmacoll_info_json COMMAND rmacoll-info --json)
  set_tests_properties(rmacoll_info_json PROPERTIES TIMEOUT 60
    ENVIRONMENT "RMACOLL_CONFIG=;RMACOLL_RELAY_SLOTS=8"
    PASS_REGULAR_EXPRESSION "\"key\": ?\"relay.slots\", ?\"type\": ?\"u32\", ?\"default\": ?\"4\", ?\"value\": ?\"8\"")
  add_test(NAME rmacoll_info_bad_config COMMAND rmacoll-info --config ${CMAKE_CURRENT_BINARY_DIR}/no-such-config.yaml)
  set_tests_properties(rmacoll_info_bad_config PROPERTIES TIMEOUT 60 WILL_FAIL TRUE)
endif()
