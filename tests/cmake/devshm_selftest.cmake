# cmake -DCHECK=devshm_check.cmake -DDIR=dir -DTAG=TAG -P devshm_selftest.cmake
# devshm_check.cmake ignores what other jobs put in /dev/shm meanwhile
# (other tags, untagged names) and still fails on a leak of its own tag.
# Its own tag TAG_self and state file keep it apart from the suite's check.
set(_tag ${TAG}_self)
set(_state ${DIR}/devshm_selftest.state)
set(_leak /dev/shm/rmacoll-selftest-leak.${_tag})
set(_leak2 "/dev/shm/rmacoll-selftest-region.${_tag}:0:0") # as the shm provider names it
# a test's own tag (TAG_t<index>), named through the map
set(_leak3 "/dev/shm/rmacoll-selftest-window.${_tag}_t7")
set(_map ${DIR}/devshm_selftest.map)
file(WRITE ${_map} "${_tag}_t6 test_six\n${_tag}_t7 test_seven\n")
set(_foreign /dev/shm/rmacoll-selftest-foreign.${_tag}x /dev/shm/rmacoll-selftest-untagged)
file(REMOVE ${_leak} ${_leak2} ${_leak3} ${_foreign} ${_state})
function(run_check mode out rc)
  execute_process(COMMAND ${CMAKE_COMMAND} -DMODE=${mode} -DSTATE=${_state} -DTAG=${_tag}
    -DMAP=${_map} -P ${CHECK} OUTPUT_VARIABLE _o ERROR_VARIABLE _e RESULT_VARIABLE _r)
  set(${out} "${_o}${_e}" PARENT_SCOPE)
  set(${rc} ${_r} PARENT_SCOPE)
endfunction()
run_check(before _out _rc)
# another job's files appear while the suite runs: not ours, no failure
file(WRITE /dev/shm/rmacoll-selftest-foreign.${_tag}x "x")
file(WRITE /dev/shm/rmacoll-selftest-untagged "x")
run_check(after _out1 _rc1)
# a file of our own tag appears: a leak, named
file(WRITE ${_leak} "x")
file(WRITE ${_leak2} "x")
file(WRITE ${_leak3} "x")
run_check(after _out2 _rc2)
file(REMOVE ${_leak} ${_leak2} ${_leak3} ${_foreign} ${_state} ${_map})
set(_bad "")
if(NOT _rc1 EQUAL 0)
  string(APPEND _bad "other jobs' files made the check fail: ${_out1}\n")
endif()
if(_rc2 EQUAL 0 OR NOT _out2 MATCHES "left these in /dev/shm:"
   OR NOT _out2 MATCHES "rmacoll-selftest-leak\\.${_tag}[;\n]"
   OR NOT _out2 MATCHES "rmacoll-selftest-region\\.${_tag}:0:0"
   OR NOT _out2 MATCHES "rmacoll-selftest-window\\.${_tag}_t7 was left by test test_seven;")
  string(APPEND _bad "a leak of tag ${_tag} was not caught (rc ${_rc2}): ${_out2}\n")
elseif(_out2 MATCHES "foreign|untagged")
  string(APPEND _bad "the leak report names other jobs' files: ${_out2}\n")
endif()
if(_bad)
  message(FATAL_ERROR "${_bad}")
endif()
message(STATUS "devshm check: other jobs' files ignored, a leak of its own tag caught")
