# tests/cmake/test_verbs.cmake - the verbs transport's unit test. Links the
# fake device of tests/support_verbs (only into this test) and redirects
# every exported verbs function the transport calls to it with ld --wrap.
# The data-path verbs (ibv_post_send/recv, ibv_poll_cq) are inline and go
# through the fake context's ops table instead. Without the verbs transport
# the test is built as a stub that reports "skipped" (exit 77).
# The transport is a module (librmacoll-verbs.so); the test links its
# sources directly (transports/verbs/module.cmake lists them), so the wraps
# reach them.
if(TARGET rmacoll-verbs)
  get_target_property(_verbs_sources rmacoll-verbs RMACOLL_TRANSPORT_SOURCES)
  target_sources(test_verbs PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support_verbs/fake_verbs.c
                                    ${_verbs_sources})
  target_link_libraries(test_verbs PRIVATE ${IBVERBS_LIB})
  target_include_directories(test_verbs PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support_verbs)
  target_compile_definitions(test_verbs PRIVATE RMACOLL_TEST_HAVE_VERBS=1)
  if(RMACOLL_HAVE_CUDA)  # as the module (transports/verbs/module.cmake)
    target_link_libraries(test_verbs PRIVATE CUDA::cudart)
    target_compile_definitions(test_verbs PRIVATE RMACOLL_VERBS_CUDA=1)
  endif()
  set(_verbs_wrapped
    ibv_get_device_list ibv_free_device_list ibv_get_device_name
    ibv_open_device ibv_close_device ibv_query_device ibv_query_port
    ibv_query_gid _ibv_query_gid_ex ibv_alloc_pd ibv_dealloc_pd
    ibv_create_cq ibv_destroy_cq ibv_create_qp ibv_modify_qp ibv_destroy_qp
    ibv_reg_mr ibv_reg_mr_iova2 ibv_reg_dmabuf_mr ibv_dereg_mr)
  list(TRANSFORM _verbs_wrapped PREPEND "--wrap=")
  string(JOIN "," _verbs_wrap_opts ${_verbs_wrapped})
  target_link_options(test_verbs PRIVATE "LINKER:${_verbs_wrap_opts}")
endif()
add_test(NAME test_verbs COMMAND test_verbs)
set_tests_properties(test_verbs PROPERTIES TIMEOUT 120 LABELS "unit;verbs" SKIP_RETURN_CODE 77)
