# test_refexec: the reference executor over shared cases, random
# topologies and corrupted plans; about 10 s of CPU on 2 cores.
add_test(NAME ${name} COMMAND ${name})
set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS "plan")
