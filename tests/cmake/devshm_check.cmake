# cmake -DMODE=before|after -DSTATE=FILE -DTAG=TAG -P devshm_check.cmake
# The suite must leave /dev/shm as it found it. Only this build's files
# count: every test runs with RMACOLL_SHM_TAG=TAG_t<index> (one index per
# test; devshm_tests.txt, -DMAP, maps it to the test's name), which rmacoll
# appends to the names of the files it creates there (control windows
# "rmacoll-<comm id>-<rank>.TAG", the shm provider's regions
# "rmacoll-<pid>-<random>-<rank>.TAG:<uid>:<index>", the provider adding
# the last part); other jobs on the host, other
# builds included, make other names and are ignored. "before" records this
# build's entries, "after" fails naming every one that was not there before.
if(NOT TAG)
  message(FATAL_ERROR "devshm_check.cmake: -DTAG= is required")
endif()
# each test of the suite runs with TAG_t<index> (tests/CMakeLists.txt)
file(GLOB _now RELATIVE /dev/shm /dev/shm/rmacoll-*.${TAG} /dev/shm/rmacoll-*.${TAG}:*
  /dev/shm/rmacoll-*.${TAG}_t*)
if(MODE STREQUAL "before")
  file(WRITE ${STATE} "${_now}")
  list(LENGTH _now _n)
  message(STATUS "/dev/shm: ${_n} entries tagged ${TAG} before the suite")
else()
  set(_before "")
  if(EXISTS ${STATE})
    file(READ ${STATE} _before)
  endif()
  set(_new "")
  foreach(e IN LISTS _now)
    list(FIND _before "${e}" _i)
    if(_i EQUAL -1)
      list(APPEND _new "${e}")
    endif()
  endforeach()
  if(_new)
    # name the test that left each one (-DMAP: "TAG_t<index> test" lines)
    set(_who "")
    if(MAP AND EXISTS ${MAP})
      file(STRINGS ${MAP} _map)
      foreach(e IN LISTS _new)
        if(e MATCHES "\\.(${TAG}_t[0-9]+)(:|$)")
          set(_t "${CMAKE_MATCH_1}")
          foreach(m IN LISTS _map)
            if(m MATCHES "^${_t} (.+)$")
              string(APPEND _who " ${e} was left by test ${CMAKE_MATCH_1};")
            endif()
          endforeach()
        endif()
      endforeach()
    endif()
    message(FATAL_ERROR "the suite left these in /dev/shm: ${_new}${_who}")
  endif()
  message(STATUS "/dev/shm: nothing tagged ${TAG} left behind")
endif()
